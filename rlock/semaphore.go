package rlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/latchkey/latchkey/internal/luascripts"
)

// ErrSizeMismatch: a Semaphore handle was opened with a size other than
// the one its name is in use with, which its first user fixed for as long
// as anyone holds or waits for permits.
var ErrSizeMismatch = errors.New("latchkey: semaphore in use with another size")

// MaxSemaphoreSize is the largest Semaphore size: 2^53-1, the largest
// integer up to which the scripts' numbers (Lua's doubles) count exactly.
const MaxSemaphoreSize = 1<<53 - 1

// Semaphore is a handle on a named, distributed counting semaphore of a
// fixed number of permits. Get it from Client.Semaphore.
//
// Ownership is Mutex's: each Acquire is a new owner of its permits, carried
// by the context it returns, and they expire with their lease. Semaphores
// are not reentrant: an Acquire with a context that carries permits of
// this semaphore takes permits of its own, and its context carries only
// those (Release each set through its own context). Waiting is fair across clients: a request is
// granted only when it fits beside the permits held and those wanted by
// clients queued before it, so a stream of small requests cannot starve a
// large one.
type Semaphore struct {
	c    *Client
	name string
	size int64
	keys luascripts.SemKeys
	spin bool
	err  error // invalid name or size, reported by every method
}

// Semaphore returns a handle on the semaphore called name with size
// permits. Names are Mutex's (a Mutex of the same name is another lock).
// The handle's methods report a size out of 1 to MaxSemaphoreSize as
// ErrInvalidArgument, and one the name is not in use with as
// ErrSizeMismatch.
func (c *Client) Semaphore(name string, size int64) *Semaphore {
	return c.newSemaphore(name, size, false)
}

// SpinSemaphore is Semaphore waiting by polling, as SpinMutex does. It
// interoperates with Semaphore but never queues, so a large request can
// starve. It exists to compare against.
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

// Acquire is Mutex.Lock for n permits (1 <= n <= Size), without re-entry:
// its context ends with the matching Release, or with cause ErrLockLost.
func (s *Semaphore) Acquire(ctx context.Context, n int64, opts ...LockOption) (context.Context, error) {
	return s.c.lockCall(ctx, s.errFor(n), opts, s.side(n).lock)
}

// TryAcquire is Mutex.TryLock for n permits: it gives up while they are not
// free or clients queued first want them.
func (s *Semaphore) TryAcquire(ctx context.Context, n int64, opts ...LockOption) (context.Context, bool, error) {
	return s.c.tryLockCall(ctx, s.errFor(n), opts, s.side(n).lock)
}

// Release is Mutex.Unlock for all the permits of the Acquire whose context
// pctx carries; it wakes the waiters they can serve. Permits lost before
// return ErrNotHeld wrapping ErrLockLost.
func (s *Semaphore) Release(pctx context.Context) error {
	return s.c.unlockCarried(pctx, s.err, s.keys.Holders, s.name, "permits")
}

// Extend is Mutex.Extend for the permits pctx carries.
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

// side is the semaphore's one side, for requests of n permits; it has no
// re-entry.
func (s *Semaphore) side(n int64) *side {
	c, keys := s.c, s.keys
	sd := c.newSide(s.name, keys.Holders, keys.Inbox(c.id), "permits", kindSemaphore.spinIf(s.spin), s.spin)
	sd.acquire = func(ctx context.Context, a luascripts.AcquireArgs) (reply, error) {
		r, err := luascripts.RunSemAcquire(ctx, c.rc, keys, a, n, s.size)
		if r.Size != 0 {
			return reply{AcquireReply: r, fail: s.mismatch(r.Size)}, err
		}
		return reply{AcquireReply: r}, err
	}
	sd.release = func(ctx context.Context, a luascripts.ReleaseArgs) (luascripts.ReleaseReply, error) {
		return luascripts.RunSemRelease(ctx, c.rc, keys, a, s.size)
	}
	sd.leave = func(ctx context.Context) error {
		_, err := luascripts.RunSemLeave(ctx, c.rc, keys, c.entry, s.size, c.wake)
		return err
	}
	// Each renewal moves the owner's own lease in the holders' lease set.
	sd.keep = [][]string{keys.Keep()}
	return sd
}

// errFor is the handle's error for a request of n permits: its own, else
// n out of range.
func (s *Semaphore) errFor(n int64) error {
	if s.err == nil && (n < 1 || n > s.size) {
		return fmt.Errorf("%w: semaphore %q: %d permits asked, need 1 to its size %d (more would wait forever)", ErrInvalidArgument, s.name, n, s.size)
	}
	return s.err
}
