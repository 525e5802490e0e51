package rlock

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/latchkey/latchkey/internal/luascripts"
)

// ErrSizeMismatch: a Semaphore handle was opened with a size other than
// the one its name is in use with. The first user of a name fixes its
// size for as long as anyone holds or waits for permits; open every handle
// on a name with the same size, or use another name.
var ErrSizeMismatch = errors.New("latchkey: semaphore in use with another size")

// MaxSemaphoreSize is the largest Semaphore size: 2^53-1, the largest
// integer up to which the scripts' numbers (Lua's doubles) count exactly.
const MaxSemaphoreSize = 1<<53 - 1

// Semaphore is a handle on a named, distributed counting semaphore of a
// fixed number of permits. Get it from Client.Semaphore.
//
// As with Mutex, the handle is not an owner: each Acquire is a new owner
// of the permits it took, carried by the context it returns, and Release
// takes that context. The permits expire with their lease (renewed by the
// watchdog without WithLease), so a holder that crashes cannot leak them.
// Semaphores are not reentrant: an Acquire with a context that carries
// permits of this semaphore is simply another owner, which takes (and may
// wait for) permits of its own, and whose context shadows the first's
// until its Release.
//
// Waiting is fair across clients: a request is granted only when the
// permits held, the permits wanted by clients queued before it and its
// own fit in the size, so a large request is not starved by a stream of
// small ones. A release wakes as many waiting clients as the freed permits
// can serve, oldest first.
type Semaphore struct {
	c    *Client
	name string
	size int64
	keys luascripts.SemKeys
	spin bool
	err  error // invalid name or size, reported by every method
}

// Semaphore returns a handle on the semaphore called name with size
// permits. Names follow Mutex's rules; a Semaphore and a Mutex of the same
// name are different objects (their keys share the name's Cluster slot).
// A size below 1 or above MaxSemaphoreSize is reported by the handle's
// methods as ErrInvalidArgument; a size other than the one the name is in
// use with, as ErrSizeMismatch.
func (c *Client) Semaphore(name string, size int64) *Semaphore {
	return c.newSemaphore(name, size, false)
}

// SpinSemaphore returns a handle on the semaphore called name that waits
// by polling with backoff, as SpinMutex does, instead of pub/sub. It
// shares Semaphore's scripts and interoperates with it, but it never
// queues, so it gets none of the order: a large request can starve. It
// exists to compare against.
func (c *Client) SpinSemaphore(name string, size int64) *Semaphore {
	return c.newSemaphore(name, size, true)
}

func (c *Client) newSemaphore(name string, size int64, spin bool) *Semaphore {
	keys, err := lockKeys(c.opts.Prefix, name)
	if err == nil {
		err = c.latchkeyOnly("Semaphore")
	}
	if err == nil && (size < 1 || size > MaxSemaphoreSize) {
		err = fmt.Errorf("%w: semaphore %q: size %d must be between 1 and MaxSemaphoreSize (2^53-1)", ErrInvalidArgument, name, size)
	}
	return &Semaphore{c: c, name: name, size: size, keys: semKeys(keys), spin: spin, err: err}
}

// Name is the semaphore's name.
func (s *Semaphore) Name() string { return s.name }

// Size is the number of permits the handle was opened with.
func (s *Semaphore) Size() int64 { return s.size }

// Acquire blocks until it holds n permits (1 <= n <= Size) or ctx ends,
// and returns their context: derived from ctx, ended by the matching
// Release, or with cause ErrLockLost when the permits are lost (their
// lease ran out, or a renewal found them gone). Leases, retries and
// options are as Mutex.Lock's; WithWait is refused.
func (s *Semaphore) Acquire(ctx context.Context, n int64, opts ...LockOption) (context.Context, error) {
	lo, err := s.check(ctx, n, opts, false)
	if err != nil {
		return nil, err
	}
	return s.acquire(ctx, n, lo, time.Time{}, false)
}

// TryAcquire is Acquire that gives up when the permits are not free (or
// clients queued first want them): at once, or after waiting up to
// WithWait(d). It reports false with a nil error when it gave up; another
// goroutine of this Client waiting for permits of this semaphore counts
// as busy.
func (s *Semaphore) TryAcquire(ctx context.Context, n int64, opts ...LockOption) (context.Context, bool, error) {
	lo, err := s.check(ctx, n, opts, true)
	if err != nil {
		return nil, false, err
	}
	return tried(s.acquire(ctx, n, lo, time.Now().Add(lo.wait), lo.wait == 0))
}

// Release gives back all the permits of the Acquire whose context pctx is
// (or is derived from), and wakes the waiters they can serve. It ignores
// pctx's cancellation, as Mutex.Unlock does. A second Release of the same
// permits, or a pctx that carries none, returns ErrNotHeld; permits lost
// before the Release return ErrNotHeld wrapping the loss (ErrLockLost).
func (s *Semaphore) Release(pctx context.Context) error {
	return s.c.unlockCarried(pctx, s.err, s.keys.Holders, s.name, "permits")
}

// Extend pushes out the lease of the fixed-lease permits that pctx
// carries: see Mutex.Extend.
func (s *Semaphore) Extend(pctx context.Context, lease time.Duration) error {
	return s.c.extendCarried(pctx, s.err, s.keys.Holders, s.name, "permits", lease)
}

// Available is the number of permits nobody holds (permits whose holder's
// lease ran out count as free). Clients may be queued for them.
func (s *Semaphore) Available(ctx context.Context) (int64, error) {
	if err := ready(ctx, s.err); err != nil {
		return 0, err
	}
	free, recorded, err := luascripts.RunSemAvailable(ctx, s.c.rc, s.keys, s.size)
	switch {
	case err != nil:
		return 0, fmt.Errorf("latchkey: semaphore %q: %w", s.name, err)
	case recorded != 0:
		return 0, s.mismatch(recorded)
	}
	return free, nil
}

func (s *Semaphore) mismatch(recorded int64) error {
	return fmt.Errorf("%w: %q has %d permits, this handle %d (open it with its size, or use another name)", ErrSizeMismatch, s.name, recorded, s.size)
}

// acquire contends for n permits for a new owner; deadline and noWait as
// Mutex.TryLock's. Semaphores are not reentrant: the side has no reenter.
func (s *Semaphore) acquire(ctx context.Context, n int64, lo lockOptions, deadline time.Time, noWait bool) (context.Context, error) {
	return s.side(n).lock(ctx, lo, deadline, noWait)
}

// side is the semaphore's one side, for requests of n permits.
func (s *Semaphore) side(n int64) *side {
	c, keys := s.c, s.keys
	return &side{c: c, last: new(atomic.Pointer[refusal]), name: s.name, key: keys.Holders, inbox: keys.Inbox(c.id), what: "permits",
		metric: kindSemaphore.spinIf(s.spin), spin: s.spin,
		acquire: func(ctx context.Context, owner string, lease time.Duration, queued bool) (reply, error) {
			r, err := luascripts.RunSemAcquire(ctx, c.rc, keys, luascripts.SemAcquireArgs{
				Owner: owner, Permits: n, Size: s.size, Lease: lease, Client: c.id, Queued: queued, Wake: c.wake, Sync: c.opts.sync(), About: c.about,
			})
			var fail error
			if r.Size != 0 {
				fail = s.mismatch(r.Size)
			}
			return replyOf(r, fail), err
		},
		release: func(ctx context.Context, r release) (released, error) {
			a := luascripts.SemReleaseArgs{Owner: r.owner, Size: s.size, Wake: c.wake, Retry: r.retry}
			if r.sync {
				a.Sync = c.opts.sync()
			}
			out, err := luascripts.RunSemRelease(ctx, c.rc, keys, a)
			return releasedOf(out), err
		},
		leave: func(ctx context.Context) error {
			_, err := luascripts.RunSemLeave(ctx, c.rc, keys, c.id, s.size, c.wake)
			return err
		},
		// The holders share their keys: each renewal checks and moves the
		// owner's own lease in the lease set.
		keep: func(string) [][]string { return [][]string{keys.Keep()} },
	}
}

// check validates a call's context, handle, n and options before any I/O.
func (s *Semaphore) check(ctx context.Context, n int64, opts []LockOption, try bool) (lockOptions, error) {
	if err := checkCtx(ctx, s.err); err != nil {
		return lockOptions{}, err
	}
	if n < 1 || n > s.size {
		return lockOptions{}, fmt.Errorf("%w: semaphore %q: %d permits asked, need 1 to its size %d (more would wait forever)", ErrInvalidArgument, s.name, n, s.size)
	}
	return s.c.checkCall(ctx, s.err, opts, try)
}
