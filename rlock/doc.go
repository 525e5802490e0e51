// Package rlock provides reentrant distributed locks on Redis, in the
// manner of Redisson's RLock, over a rueidis client.
//
// A lock is a Redis hash {owner id → hold count} that only Lua scripts
// change. Lock blocks until the lock is held or the context ends, waiting
// for the holder's unlock message on a pub/sub channel that every waiter of
// the process shares, and never longer than the holder's remaining TTL.
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
