// Package rlock provides reentrant distributed locks on Redis, in the
// manner of Redisson's RLock, over a rueidis client.
//
// A lock is a Redis hash {owner id → hold count} that only Lua scripts
// change. Lock blocks until the lock is held or the context ends. A refused
// waiter queues its client in the lock's wait queue; each release wakes the
// oldest queued client with one pub/sub message (shared by every waiter of
// the process, waking one of them) and hands the lock to it for a short
// window. No wait is longer than the holder's remaining TTL. Every grant
// carries a fencing token (Mutex.Token) that rises from grant to grant.
// Without WithLease, a watchdog (one goroutine per Client) keeps the lock
// alive until Unlock; if the lock is lost, the context Lock returned is
// cancelled with ErrLockLost as its cause.
//
//	locks, err := rlock.NewClient(rueidisClient, rlock.Options{})
//	...
//	m := locks.Mutex("invoice:42")
//	lctx, err := m.Lock(ctx)
//	if err != nil {
//		return err
//	}
//	defer m.Unlock(lctx)
//	return process(lctx) // stop when lctx ends
//
// A Mutex handle is one owner, and so is a context returned by Lock: locking
// again through either re-enters, and each Lock needs its Unlock. Goroutines
// that must exclude each other need handles of their own.
//
// Client.SpinMutex gives the same lock with a polling wait, for comparison.
// docs/design.md in the repository explains the scripts, the waiting
// protocol and what a Redis lock can and cannot guarantee.
package rlock
