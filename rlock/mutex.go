package rlock

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/latchkey/latchkey/internal/luascripts"
)

// Mutex is a handle on one named, reentrant, distributed lock. Get it from
// Client.Mutex or Client.SpinMutex.
//
// Ownership works as with sync.Mutex: a handle is not an owner, and any
// number of goroutines may share one; each Lock is a new owner that
// excludes every other, in this process and elsewhere. A Lock re-enters
// only when its context carries a hold of the lock: the context an earlier
// Lock of the same Client returned, or one derived from it. So a function
// that is passed the lock context can lock again without deadlocking, and
// each Lock needs its own Unlock; the lock is released at the last.
//
// Goroutines started with a context derived from a lock context (an
// errgroup's, say) are part of that owner: their Locks re-enter instead of
// excluding each other. Give such goroutines the context you had before
// Lock if they must exclude each other.
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
// derived from ctx that carries the hold (pass it to nested calls that may
// lock again: they re-enter) and is cancelled when this hold ends: normally
// by the matching Unlock, or with cause ErrLockLost when the lock is lost.
//
// If ctx already carries a hold of this lock, Lock re-enters it at once,
// without waiting; it fails with ErrLockLost if that hold was lost.
//
// The returned context ends when ctx does, too: a deadline on ctx bounds
// the hold as well as the wait. To bound only the wait, use TryLock with
// WithWait.
//
// Without WithLease the lock's lease is Options.WatchdogTimeout and the
// watchdog renews it until Unlock. With WithLease(d) it expires d after the
// acquire was sent, and the returned context's deadline is a drift margin
// before that. A re-entry shares the lease (or the watchdog) of the Lock it
// re-enters: a WithLease given to it is checked but not applied, so code
// that always passes one works nested too. Transient Redis errors (a
// dropped connection) are retried until ctx ends; errors Redis itself
// returns end the call.
//
// Keep the returned context until its Unlock. If it becomes unreachable
// while held (Unlock was given ctx instead, say), latchkey unlocks it
// after a garbage collection, logs a Warn naming the lock and the Lock
// call, and counts it in latchkey.lock.leaked: a dropped context must not
// hold a lock for as long as the process lives.
func (m *Mutex) Lock(ctx context.Context, opts ...LockOption) (context.Context, error) {
	lo, err := m.check(ctx, opts, false)
	if err != nil {
		return nil, err
	}
	return m.sd.lock(ctx, lo, time.Time{}, false)
}

// TryLock is Lock that gives up when the lock is busy: at once, or after
// waiting up to WithWait(d). It reports false (with a nil error) when the
// lock stayed busy; another goroutine of this Client holding or waiting for
// the lock counts as busy. On success the context is as Lock's. ctx still
// bounds everything: if it ends first, TryLock returns its error. A context
// that carries a hold re-enters, as with Lock.
func (m *Mutex) TryLock(ctx context.Context, opts ...LockOption) (context.Context, bool, error) {
	lo, err := m.check(ctx, opts, true)
	if err != nil {
		return nil, false, err
	}
	return tried(m.sd.lock(ctx, lo, time.Now().Add(lo.wait), lo.wait == 0))
}

// Unlock releases the hold that ctx carries (a context Lock returned, or
// one derived from it): its innermost level. The lock itself is released,
// and the next waiter woken, at the last level. Unlock returns ErrNotHeld,
// changing nothing, when ctx carries no hold of this lock, when that level
// was already unlocked, or when the hold was lost before.
//
// Unlock ignores ctx's cancellation, so `defer m.Unlock(lctx)` works even
// when lctx has ended; its Redis call is bounded by Options.ReleaseTimeout
// instead, and retried while its reply is lost. If the last level's release
// still fails, the hold ends locally and the lock expires within its lease.
// If an inner level's fails, the level is gone here and its release is sent
// again by a retry of this Unlock or before the hold's next Lock or Unlock,
// so that Redis counts it once whether or not the first call ran.
func (m *Mutex) Unlock(ctx context.Context) error {
	return m.c.unlockCarried(ctx, m.err, m.keys.Lock, m.name, "hold")
}

// Token returns the fencing token of the hold that ctx carries, even when
// that hold was lost, or ErrNotHeld when it carries none or was unlocked.
// Tokens rise strictly from grant to grant of one lock, across all clients; re-entries share their grant's token. Pass it with every
// write to a resource the lock protects, and have the resource reject a
// token below the highest it has seen: that is what stops a holder that
// paused past its lease (see docs/safety.md). Token does no I/O.
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

func (m *Mutex) check(ctx context.Context, opts []LockOption, try bool) (lockOptions, error) {
	return m.c.checkCall(ctx, m.err, opts, try)
}

func (c *Client) newMutex(name string, spin bool) *Mutex {
	if c.opts.Protocol == ProtocolRedisson {
		return c.newRedissonMutex(name, spin)
	}
	keys, err := lockKeys(c.opts.Prefix, name)
	m := &Mutex{c: c, name: name, keys: keys, err: err}
	m.sd = &side{c: c, last: new(atomic.Pointer[refusal]), name: name, key: keys.Lock, inbox: keys.Inbox(c.id), what: "lock",
		metric: kindMutex.spinIf(spin), spin: spin, exclusive: true,
		acquire: func(ctx context.Context, owner string, lease time.Duration, queued bool) (reply, error) {
			r, err := luascripts.RunAcquire(ctx, c.rc, keys, luascripts.AcquireArgs{
				Owner: owner, Lease: lease, Client: c.id, Waiter: queued, Sync: c.opts.sync(), About: c.about, Wake: c.wake,
			})
			return replyOf(r, nil), err
		},
		reenter: func(ctx context.Context, owner string) (int64, error) {
			return luascripts.RunReenter(ctx, c.rc, keys, owner)
		},
		release: func(ctx context.Context, r release) (released, error) {
			a := luascripts.ReleaseArgs{Owner: r.owner, Count: r.count, Wake: c.wake, Retry: r.retry}
			if r.sync {
				a.Sync = c.opts.sync()
			}
			if r.heir != "" {
				a.Heir, a.HeirLease, a.HeirAbout = r.heir, r.heirLease, c.about
			}
			out, err := luascripts.RunRelease(ctx, c.rc, keys, a)
			return releasedOf(out), err
		},
		leave: func(ctx context.Context) error {
			_, err := luascripts.RunLeave(ctx, c.rc, keys, c.id, c.wake)
			return err
		},
		// The holder record is a field of the lock hash: renewed and
		// deleted with it.
		keep: func(string) [][]string { return [][]string{{keys.Lock}} },
	}
	return m
}

// Extend pushes out the expiry of the fixed-lease hold that lctx carries
// (a context Lock returned with WithLease, or one derived from it): the
// lock then lasts at least lease from when Extend's call was sent, and
// every level's context has the later deadline. It never shortens a lease.
//
// It returns ErrNotHeld when lctx carries no hold of this lock, when its
// level was unlocked, or when the hold was lost (its lease ran out before
// Extend, or the lock was found gone: then lctx ends with ErrLockLost), and
// ErrInvalidArgument for a hold kept by the watchdog, which needs no
// extending, or a lease out of WithLease's bounds. If the call fails on the
// way (Redis unreachable), the hold keeps the lease it had.
func (m *Mutex) Extend(lctx context.Context, lease time.Duration) error {
	return m.c.extendCarried(lctx, m.err, m.keys.Lock, m.name, "hold", lease)
}
