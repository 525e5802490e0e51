package rlock

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/latchkey/latchkey/internal/luascripts"
)

// ErrUpgrade: Lock was called with a context that carries a read hold of
// the same RWMutex (and no write hold). Upgrading a read hold would
// deadlock as soon as two readers tried it; RUnlock first, then Lock.
var ErrUpgrade = errors.New("latchkey: cannot upgrade a read hold to the write lock")

// RWMutex is a handle on a named, distributed reader/writer lock: any
// number of readers, or one writer. Get it from Client.RWMutex. As with
// Mutex, the handle is not an owner: every RLock and Lock is a new owner,
// and a call re-enters only through the context an earlier one returned.
//
//   - A reader re-enters its read hold (RLock with its context); a writer
//     re-enters its write hold, and may also take read holds, which it
//     keeps after Unlock of the write: that is a downgrade.
//   - Lock with a context that carries only a read hold fails at once with
//     ErrUpgrade instead of deadlocking.
//   - Writers come first: once a writer waits, new readers queue behind it,
//     so a stream of readers cannot starve writers. A write release wakes
//     every reader queued before the next writer (one message per client,
//     whose readers then follow one another); the last read release wakes
//     one writer.
//   - Each reader's hold has its own lease (watchdog-renewed without
//     WithLease), so a dead reader's hold lapses without the others'.
//
// Writers' holds carry fencing tokens (Token); read holds do not.
type RWMutex struct {
	c           *Client
	name        string
	keys        luascripts.RWKeys
	read, write *side
	err         error
}

// RWMutex returns a handle on the reader/writer lock called name. Names
// follow Mutex's rules; an RWMutex and a Mutex of the same name are
// different locks (their keys share the name's Cluster slot).
func (c *Client) RWMutex(name string) *RWMutex {
	return c.newRWMutex(name, false)
}

// SpinRWMutex returns a handle on the reader/writer lock called name that
// waits by polling with backoff, as SpinMutex does, instead of pub/sub.
// It shares RWMutex's scripts and interoperates with it, but it never
// queues, so it gets none of the ordering: waiting writers do not hold
// back new readers that poll. It exists to compare against.
func (c *Client) SpinRWMutex(name string) *RWMutex {
	return c.newRWMutex(name, true)
}

func (c *Client) newRWMutex(name string, spin bool) *RWMutex {
	base, err := lockKeys(c.opts.Prefix, name)
	if err == nil {
		err = c.latchkeyOnly("RWMutex")
	}
	keys := rwKeys(base)
	rw := &RWMutex{c: c, name: name, keys: keys, err: err}
	rw.read, rw.write = rw.newSide(false, spin, ""), rw.newSide(true, spin, "")
	return rw
}

// newSide builds the read or write side; writer, for a read side, is the
// write owner whose read hold it takes (a downgrade), or "".
func (rw *RWMutex) newSide(write, spin bool, writer string) *side {
	c, keys := rw.c, rw.keys
	sd := &side{c: c, last: new(atomic.Pointer[refusal]), name: rw.name, key: keys.Readers, inbox: keys.Inbox(c.id, write), what: "read lock",
		metric: kindRead.spinIf(spin), spin: spin, shared: !write,
		acquire: func(ctx context.Context, owner string, lease time.Duration, queued bool) (reply, error) {
			r, err := luascripts.RunRWAcquire(ctx, c.rc, keys, write, luascripts.RWAcquireArgs{
				Owner: owner, Lease: lease, Client: c.id, Queued: queued, Writer: writer, Wake: c.wake, Sync: c.opts.sync(), About: c.about,
			})
			return replyOf(r, nil), err
		},
		reenter: func(ctx context.Context, owner string) (int64, error) {
			return luascripts.RunRWReenter(ctx, c.rc, keys, owner)
		},
		release: func(ctx context.Context, r release) (released, error) {
			a := luascripts.RWUnlockArgs{Owner: r.owner, Write: write, Count: r.count, Wake: c.wake, Retry: r.retry}
			if r.sync {
				a.Sync = c.opts.sync()
			}
			out, err := luascripts.RunRWUnlock(ctx, c.rc, keys, a)
			return releasedOf(out), err
		},
		leave: func(ctx context.Context) error { return luascripts.RunRWLeave(ctx, c.rc, keys, c.id, write, c.wake) },
		// The readers share their keys: each renewal checks and moves the
		// owner's own lease in the lease set, so a dead reader lapses
		// alone while the live ones keep the keys.
		keep: func(string) [][]string { return [][]string{keys.ReadKeep()} },
	}
	if write {
		sd.key, sd.what, sd.metric = keys.Write, "write lock", kindWrite.spinIf(spin)
		sd.reenter = func(ctx context.Context, owner string) (int64, error) {
			return luascripts.RunReenter(ctx, c.rc, luascripts.Keys{Lock: keys.Write}, owner)
		}
		sd.keep = func(string) [][]string { return [][]string{{keys.Write}} }
	}
	return sd
}

// Name is the lock's name.
func (rw *RWMutex) Name() string { return rw.name }

// RLock blocks until it holds a read hold or ctx ends, and returns its
// context: derived from ctx, ended by the matching RUnlock, or with cause
// ErrLockLost when the hold is lost. A ctx that carries a read hold of
// this lock re-enters it at once. A ctx that carries its write hold takes
// a read hold at once (writers may read), whose context does not end with
// the write Unlock: keep it to downgrade. Options as Mutex.Lock.
func (rw *RWMutex) RLock(ctx context.Context, opts ...LockOption) (context.Context, error) {
	return rw.blockingLock(ctx, false, opts)
}

// TryRLock is RLock that gives up when a writer holds or waits: at once,
// or after waiting up to WithWait(d). It reports false with a nil error
// when it gave up.
func (rw *RWMutex) TryRLock(ctx context.Context, opts ...LockOption) (context.Context, bool, error) {
	return rw.tryLock(ctx, false, opts)
}

// Lock blocks until it holds the write lock or ctx ends; see Mutex.Lock
// for its context, leases and retries. A ctx that carries the write hold
// re-enters it; one that carries only a read hold gets ErrUpgrade.
func (rw *RWMutex) Lock(ctx context.Context, opts ...LockOption) (context.Context, error) {
	return rw.blockingLock(ctx, true, opts)
}

// TryLock is Lock that gives up when the lock is busy: at once, or after
// waiting up to WithWait(d). It reports false with a nil error when it
// gave up.
func (rw *RWMutex) TryLock(ctx context.Context, opts ...LockOption) (context.Context, bool, error) {
	return rw.tryLock(ctx, true, opts)
}

func (rw *RWMutex) blockingLock(ctx context.Context, write bool, opts []LockOption) (context.Context, error) {
	lo, err := rw.check(ctx, opts, false)
	if err != nil {
		return nil, err
	}
	return rw.lock(ctx, write, lo, time.Time{}, false)
}

func (rw *RWMutex) tryLock(ctx context.Context, write bool, opts []LockOption) (context.Context, bool, error) {
	lo, err := rw.check(ctx, opts, true)
	if err != nil {
		return nil, false, err
	}
	return tried(rw.lock(ctx, write, lo, time.Now().Add(lo.wait), lo.wait == 0))
}

// RUnlock releases the read hold that ctx carries (its innermost level);
// the read hold itself ends at its last level. Errors as Mutex.Unlock.
func (rw *RWMutex) RUnlock(ctx context.Context) error {
	return rw.unlock(ctx, false)
}

// Unlock releases the write hold that ctx carries (its innermost level).
// Read holds the writer took stay. Errors as Mutex.Unlock.
func (rw *RWMutex) Unlock(ctx context.Context) error {
	return rw.unlock(ctx, true)
}

// Token returns the fencing token of the write hold that ctx carries, even
// when it was lost, or ErrNotHeld: see Mutex.Token. Read holds have none.
func (rw *RWMutex) Token(ctx context.Context) (int64, error) {
	return rw.c.tokenCarried(ctx, rw.err, rw.keys.Write, rw.name, "write hold (read holds have none)")
}

// Extend pushes out the lease of the fixed-lease write hold that lctx
// carries: see Mutex.Extend.
func (rw *RWMutex) Extend(lctx context.Context, lease time.Duration) error {
	return rw.c.extendCarried(lctx, rw.err, rw.keys.Write, rw.name, "write hold", lease)
}

// RExtend pushes out the lease of the fixed-lease read hold that lctx
// carries: see Mutex.Extend.
func (rw *RWMutex) RExtend(lctx context.Context, lease time.Duration) error {
	return rw.c.extendCarried(lctx, rw.err, rw.keys.Readers, rw.name, "read hold", lease)
}

// lock re-enters a hold that ctx carries, or contends for a new one.
func (rw *RWMutex) lock(ctx context.Context, write bool, lo lockOptions, deadline time.Time, noWait bool) (context.Context, error) {
	c := rw.c
	wl, rl := c.carried(ctx, rw.keys.Write), c.carried(ctx, rw.keys.Readers)
	writing := wl != nil && wl.h.lostOrDone() == nil
	switch {
	case write && wl != nil && (writing || rl == nil || rl.h.lostOrDone() != nil):
		return wl.h.reenter(ctx, wl)
	case write && rl != nil && rl.h.lostOrDone() == nil:
		return nil, fmt.Errorf("%w: %q: RUnlock the read hold first", ErrUpgrade, rw.name)
	case write:
		return rw.write.lock(ctx, lo, deadline, noWait)
	case rl != nil || !writing:
		return rw.read.lock(ctx, lo, deadline, noWait)
	}
	return rw.downgrade(ctx, wl.h, lo)
}

// downgrade takes a read hold for the writer that holds w: granted at once
// (a writer may always read), outside the turn, so it never queues behind
// this client's other readers. Its hold must outlive the write hold's last
// Unlock: it ends with what the write grant was given, not with any write
// level's context (a re-entry's parent is an outer level's). A try whose
// outcome was unknown is undone and retried, as a re-entry is.
func (rw *RWMutex) downgrade(ctx context.Context, w *hold, lo lockOptions) (_ context.Context, err error) {
	c := rw.c
	sd := rw.newSide(false, rw.read.spin, w.owner)
	lo.obs = c.obs.begin(ctx, sd.metric, rw.name)
	defer func() { lo.obs.end(ctx, err) }()
	retry := retryBackoff()
	for {
		t, err := sd.attempt(ctx, lo, false)
		switch {
		case err == nil && t.granted:
			return c.newHold(valuesFrom{Context: w.base, values: ctx}, sd, nil, t, lo)
		case err == nil:
			err = fmt.Errorf("%w: %q: the write hold was lost", ErrLockLost, rw.name)
		case transient(ctx, err) && sleep(ctx, c.closing, retry.Next()):
			continue
		}
		// The write hold's context may have ended under the call (its
		// loss cancels it): say why, not how the call broke off.
		return nil, ended(ctx, ctx, err)
	}
}

func (rw *RWMutex) unlock(ctx context.Context, write bool) error {
	sd := rw.read
	if write {
		sd = rw.write
	}
	return rw.c.unlockCarried(ctx, rw.err, sd.key, rw.name, sd.what)
}

func (rw *RWMutex) checkCtx(ctx context.Context) error { return checkCtx(ctx, rw.err) }

func (rw *RWMutex) check(ctx context.Context, opts []LockOption, try bool) (lockOptions, error) {
	return rw.c.checkCall(ctx, rw.err, opts, try)
}

// valuesFrom is a context whose cancellation and deadline are Context's
// and whose values are values'.
type valuesFrom struct {
	context.Context
	values context.Context
}

func (v valuesFrom) Value(key any) any { return v.values.Value(key) }
