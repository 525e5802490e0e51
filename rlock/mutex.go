package rlock

import (
	"context"
	"time"

	"github.com/latchkey/latchkey/internal/luascripts"
)

// Mutex is a handle on one named, reentrant, distributed lock. Get it from
// Client.Mutex or Client.SpinMutex.
//
// Ownership works as with sync.Mutex (see the package doc): any number of
// goroutines may share a handle, and each Lock is a new owner that excludes
// every other. A Lock re-enters only when its context carries a hold of the
// lock, and each Lock needs its own Unlock. Goroutines started with a
// context derived from a lock context (an errgroup's, say) are part of that
// owner: give them the context you had before Lock if they must exclude
// each other.
type Mutex struct {
	c    *Client
	name string
	keys luascripts.Keys
	sd   *side
	err  error // invalid name, reported by every method
}

// Name is the lock's name.
func (m *Mutex) Name() string { return m.name }

// Key is the Redis key of the lock hash.
func (m *Mutex) Key() string { return m.keys.Lock }

// Lock blocks until it holds the lock or ctx ends. It returns a context
// derived from ctx that carries the hold (pass it to nested calls: they
// re-enter) and is cancelled when the hold ends: by the matching Unlock, or
// with cause ErrLockLost when the lock is lost. If ctx already carries a
// hold of this lock, Lock re-enters it at once, or fails with ErrLockLost
// if that hold was lost. A deadline on ctx bounds the hold as well as the
// wait; to bound only the wait, use TryLock with WithWait.
//
// Without WithLease the lease is Options.WatchdogTimeout and the watchdog
// renews it until Unlock. With WithLease(d) it expires d after the acquire
// was sent, and the context ends a drift margin before that (LeaseEnd
// tells when; its Deadline stays ctx's, since Extend moves the end). A
// re-entry shares the lease of the Lock it re-enters (a WithLease given to
// it is checked, not applied). Transient Redis errors are retried until
// ctx ends, and so are the refusals Redis passes through (BUSY, LOADING, a
// failover's READONLY, MASTERDOWN, CLUSTERDOWN or NOREPLICAS); other errors
// Redis returns end the call.
//
// Keep the returned context until its Unlock: if it becomes unreachable
// while held, latchkey unlocks it after a garbage collection, logs a Warn
// and counts it in latchkey.lock.leaked.
func (m *Mutex) Lock(ctx context.Context, opts ...LockOption) (context.Context, error) {
	return m.c.lockCall(ctx, m.err, opts, m.sd.lock)
}

// TryLock is Lock that gives up when the lock is busy: at once, or after
// waiting up to WithWait(d). It reports false (with a nil error) when the
// lock stayed busy; another goroutine of this Client holding or waiting for
// the lock counts as busy. If ctx ends first, TryLock returns its error.
func (m *Mutex) TryLock(ctx context.Context, opts ...LockOption) (context.Context, bool, error) {
	return m.c.tryLockCall(ctx, m.err, opts, m.sd.lock)
}

// Unlock ends the level of the hold that ctx carries: the one the Lock
// that returned ctx (or the context ctx derives from) took, whatever other
// levels goroutines sharing the hold took since; the lock is released, and
// the next waiter woken, at the last level. It
// returns ErrNotHeld, changing nothing, when ctx carries no hold of this
// lock, that level was unlocked already, or the hold was lost.
//
// Unlock ignores ctx's cancellation, so `defer m.Unlock(lctx)` works after
// lctx ended; its Redis call is bounded by Options.ReleaseTimeout and
// retried while its reply is lost. If the last level's release still
// fails, the hold ends here and the lock expires within its lease; an inner
// level's failed release is sent again before the hold's next call.
func (m *Mutex) Unlock(ctx context.Context) error {
	return m.c.unlockCarried(ctx, m.err, m.keys.Lock, m.name, "hold")
}

// Token returns the fencing token of the hold that ctx carries, even when
// that hold was lost, or ErrNotHeld. Tokens rise strictly from grant to
// grant of one lock, across all clients; re-entries share their grant's.
// Pass it with every write to the protected resource, which must reject a
// token below the highest it has seen (docs/safety.md). No I/O.
func (m *Mutex) Token(ctx context.Context) (int64, error) {
	return m.c.tokenCarried(ctx, m.err, m.keys.Lock, m.name, "hold")
}

// IsLocked reports whether anyone holds the lock.
func (m *Mutex) IsLocked(ctx context.Context) (bool, error) {
	info, err := m.c.Inspect(ctx, m.name)
	return info.Held(), err
}

// HoldCount is the number of holds that the owner ctx carries has on the
// lock, as Redis counts them: 0 when ctx carries no hold or it was lost.
func (m *Mutex) HoldCount(ctx context.Context) (int, error) {
	info, err := m.c.Inspect(ctx, m.name)
	if err != nil {
		return 0, err
	}
	if lv := m.c.carried(ctx, m.keys.Lock); lv != nil {
		for _, h := range info.Holders {
			if h.Owner == lv.h.owner {
				return int(h.Count), nil
			}
		}
	}
	return 0, nil
}

// TTL is the lock's remaining lease: 0 when it is not locked, and -1ns for
// a key without expiry (not written by latchkey).
func (m *Mutex) TTL(ctx context.Context) (time.Duration, error) {
	info, err := m.c.Inspect(ctx, m.name)
	return info.LeaseLeft, err
}

// Extend pushes out the expiry of the fixed-lease hold that lctx carries
// to at least lease from when its call was sent; every level's context
// gets the later end (LeaseEnd). It never shortens a lease. It returns
// ErrNotHeld when lctx carries no live hold of this lock (a lost one also
// ends lctx with ErrLockLost), and ErrInvalidArgument for a watchdog hold
// or a lease out of WithLease's bounds. If the call fails, the hold keeps
// the lease it had; if it ends at that lease's deadline while the call may
// have run in Redis (its reply came late, or never), it is released there.
func (m *Mutex) Extend(lctx context.Context, lease time.Duration) error {
	return m.c.extendCarried(lctx, m.err, m.keys.Lock, m.name, "hold", lease)
}

// lockFunc is a side's lock, or a primitive's dispatch to one of its sides.
type lockFunc func(ctx context.Context, lo lockOptions, deadline time.Time, noWait bool) (context.Context, error)

// lockCall is every primitive's Lock: check the call, then wait.
func (c *Client) lockCall(ctx context.Context, handleErr error, opts []LockOption, lock lockFunc) (context.Context, error) {
	lo, err := c.checkCall(ctx, handleErr, opts, false)
	if err != nil {
		return nil, err
	}
	return lock(ctx, lo, time.Time{}, false)
}

// tryLockCall is every primitive's TryLock: wait up to WithWait's d, or
// try once.
func (c *Client) tryLockCall(ctx context.Context, handleErr error, opts []LockOption, lock lockFunc) (context.Context, bool, error) {
	lo, err := c.checkCall(ctx, handleErr, opts, true)
	if err != nil {
		return nil, false, err
	}
	return tried(lock(ctx, lo, time.Now().Add(lo.wait), lo.wait == 0))
}

// newSide is a side; the caller adds the scripts.
func (c *Client) newSide(name, key, inbox, what string, metric lockKind, spin bool) *side {
	return &side{c: c, name: name, key: key, inbox: inbox, what: what, metric: metric, spin: spin}
}

// bindExclusive makes sd an exclusive side that runs x's calls.
func (sd *side) bindExclusive(x luascripts.Exclusive) {
	rc := sd.c.rc
	sd.exclusive = true
	sd.acquire = func(ctx context.Context, a luascripts.AcquireArgs) (reply, error) {
		r, err := x.Acquire(ctx, rc, a)
		return reply{AcquireReply: r}, err
	}
	sd.reenter = func(ctx context.Context, owner string) (int64, error) { return x.Reenter(ctx, rc, owner) }
	sd.release = func(ctx context.Context, a luascripts.ReleaseArgs) (luascripts.ReleaseReply, error) {
		return x.Release(ctx, rc, a)
	}
}

func (c *Client) newMutex(name string, spin bool) *Mutex {
	if c.opts.Protocol == ProtocolRedisson {
		return c.newRedissonMutex(name, spin)
	}
	keys, err := lockKeys(c.opts.Prefix, name)
	sd := c.newSide(name, keys.Lock, keys.Inbox(c.id), "lock", kindMutex.spinIf(spin), spin)
	sd.bindExclusive(keys)
	sd.leave = func(ctx context.Context) error {
		_, err := luascripts.RunLeave(ctx, c.rc, keys, c.entry, c.wake)
		return err
	}
	// The holder record is a field of the lock hash: renewed with it.
	sd.keep = [][]string{{keys.Lock}}
	return &Mutex{c: c, name: name, keys: keys, sd: sd, err: err}
}
