// Package rlock provides reentrant distributed locks on Redis, in the
// manner of Redisson's RLock, over a rueidis client.
//
// A lock is a Redis hash {owner id → hold count} that only Lua scripts
// change. Lock blocks until the lock is held or the context ends, without
// polling: a refused waiter queues its client, and each release wakes the
// oldest queued client with one pub/sub message; a woken client keeps its
// place for a moment, and loses it if it does not come. No wait outlasts
// the holder's remaining TTL or a woken client's moment. Every
// grant carries a fencing token (Mutex.Token) that rises from grant to
// grant. Without WithLease, a watchdog (one goroutine per Client) keeps the
// lock alive until Unlock; if the lock is lost, the context Lock returned
// is cancelled with ErrLockLost as its cause.
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
// returned, or one derived from it), so goroutines started with such a
// context are part of its owner. Each Lock needs its Unlock.
//
// Within one Client, one goroutine per lock contends in Redis; the others
// wait their turn locally, and a release hands the lock straight to the
// next of them in the same round trip, a few times in a row at most before
// other clients get their turn.
//
// Client.SpinMutex gives the same lock with a polling wait, for comparison.
// The rest of Redisson's family follows the same rules: Client.RWMutex
// (many readers or one writer, writers first), Client.Semaphore (permits
// that expire with their holder's lease), Client.MultiMutex (all of several
// locks or none, without deadlock) and Client.CountDownLatch (reaching zero
// wakes every Await, in every process, with one message). Locker and
// RLocker adapt them to sync.Locker; Client.Do is the shortest correct use
// of a lock. docs/design.md explains the scripts, the waiting protocol and
// what a Redis lock can and cannot guarantee.
package rlock
