// Package rlock provides reentrant distributed locks on Redis, in the
// manner of Redisson's RLock, over a rueidis client.
//
// A lock is a Redis hash {owner id → hold count} that only Lua scripts
// change. Lock blocks until the lock is held or the context ends, without
// polling: a refused waiter queues its client, and each release wakes the
// oldest queued client with one pub/sub message. Every grant carries a
// fencing token (Mutex.Token) that rises from grant to grant. Without
// WithLease a watchdog keeps the lock alive until Unlock; if the lock is
// lost, the context Lock returned is cancelled with ErrLockLost as cause.
//
//	m := locks.Mutex("invoice:42")
//	lctx, err := m.Lock(ctx)
//	if err != nil {
//		return err
//	}
//	defer func() { err = errors.Join(err, m.Unlock(lctx)) }()
//	return process(lctx) // stop when lctx ends
//
// Ownership is sync.Mutex's: a handle may be shared by any number of
// goroutines, and each Lock excludes every other. A Lock re-enters only
// when its context carries a hold of the lock (the context an earlier Lock
// returned, or one derived from it). Each Lock needs its Unlock.
//
// The rest of Redisson's family follows the same rules: Client.RWMutex
// (many readers or one writer), Client.Semaphore (permits),
// Client.MultiMutex (several locks at once, without deadlock) and
// Client.CountDownLatch; the Spin variants poll instead of pub/sub. Locker and RLocker adapt them to sync.Locker;
// Client.Do is the shortest correct use of a lock. docs/design.md explains
// the scripts, the waiting protocol and what a Redis lock can and cannot
// guarantee.
package rlock
