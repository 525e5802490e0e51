package integration

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/rlock"
)

// Regression tests for defects of the lock family found by
// TestTortureFamily. Each failed before its fix.

// TestRegressRWReentryRetries: an RWMutex re-entry whose reply is lost is
// undone and retried, as Mutex's is, instead of failing with the
// connection's error (it returned "re-enter the read lock: EOF").
func TestRegressRWReentryRetries(t *testing.T) {
	x, rc := resetFixture(t)
	name := lockName(t)
	c := oneConnLockClient(t, proxied(x), rlock.Options{})
	rw := c.RWMutex(name)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rctx, err := rw.RLock(ctx)
	require.NoError(t, err)
	inner := withReplyCut(t, x, "the re-entry", func() (context.Context, error) { return rw.RLock(rctx) })
	require.NoError(t, rw.RUnlock(inner))
	require.NoError(t, rw.RUnlock(rctx))
	require.False(t, exists(t, rc, "latchkey:{"+name+"}:rw:rd"), "a re-entry counted twice: the read hold outlived its RUnlocks")
}

// TestRegressRWDowngradeRetries: a writer's read (the first step of a
// downgrade) whose reply is lost is undone and retried, as a re-entry is,
// instead of failing with the connection's error (TestTortureFamily, seed
// 1795607185696469404: "downgrade: acquire: outcome unknown, undone: EOF").
func TestRegressRWDowngradeRetries(t *testing.T) {
	x, rc := resetFixture(t)
	name := lockName(t)
	c := oneConnLockClient(t, proxied(x), rlock.Options{})
	rw := c.RWMutex(name)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	wctx, err := rw.Lock(ctx)
	require.NoError(t, err)
	rctx := withReplyCut(t, x, "the writer's read", func() (context.Context, error) { return rw.RLock(wctx) })
	require.NoError(t, rw.Unlock(wctx))
	require.NoError(t, context.Cause(rctx), "the downgraded read hold must outlive the write hold")
	require.NoError(t, rw.RUnlock(rctx))
	require.False(t, exists(t, rc, "latchkey:{"+name+"}:rw:rd"), "a read hold outlived its RUnlock")
	require.False(t, exists(t, rc, "latchkey:{"+name+"}:rw:w"), "the write hold outlived its Unlock")
}

// TestRegressMultiMutexMemberTryRetries: when the try of a MultiMutex
// member loses its reply, Lock releases what it took and waits for that
// member (which retries), instead of failing with the connection's error
// (it returned "acquire: outcome unknown, undone: EOF").
func TestRegressMultiMutexMemberTryRetries(t *testing.T) {
	x, rc := resetFixture(t)
	name := lockName(t)
	var armed atomic.Bool
	opts := rlock.Options{OnAttempt: func(lock string, acquired bool) {
		// Once the first member is held, the next reply (the second
		// member's try) is cut.
		if lock == name+"-a" && acquired && armed.CompareAndSwap(false, true) {
			connectionsCut.Store(0)
			x.add(t, toxic{Name: "cut", Type: cutOnReplyType, Stream: "downstream"})
		}
	}}
	c := oneConnLockClient(t, proxied(x), opts)
	mm := c.MultiMutex(name+"-a", name+"-b")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan error, 1)
	var held atomic.Value
	go func() {
		lctx, err := mm.Lock(ctx)
		if err == nil {
			held.Store(lctx)
		}
		done <- err
	}()
	awaitCond(t, 10*time.Second, "the second member's reply to be cut", func() bool { return armed.Load() && connectionsCut.Load() > 0 })
	x.remove(t, "cut")
	require.NoError(t, recvErr(t, done, 15*time.Second, "the multi-lock"), "a member try whose reply was lost must not fail Lock")
	require.NoError(t, mm.Unlock(held.Load().(context.Context)))
	for _, k := range []string{"latchkey:{" + name + "-a}", "latchkey:{" + name + "-b}"} {
		require.False(t, exists(t, rc, k), "%s left held", k)
	}
}

// TestRegressSemaphoreHoldersOutliveNobody: a Semaphore's holders hash
// lives as long as its holders' leases, even after a client queued: a
// queued client used to stretch it to the queue's expiry (its holders'
// TTL plus 10 s), so a holder that lost its permits (never released) left
// the key behind for seconds (TestTortureFamily's quiescence check).
func TestRegressSemaphoreHoldersOutliveNobody(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx := context.Background()
		name := lockName(t)
		holder := lockClient(t, tp, rlock.Options{}).Semaphore(name, 1)
		pctx, err := holder.Acquire(ctx, 1, rlock.WithLease(300*time.Millisecond))
		require.NoError(t, err)
		waiter := lockClient(t, tp, rlock.Options{}).Semaphore(name, 1)
		_, ok, err := waiter.TryAcquire(ctx, 1, rlock.WithWait(50*time.Millisecond)) // queues, then leaves
		require.NoError(t, err)
		require.False(t, ok)
		requireLost(t, pctx, 5*time.Second, "the leased permits")
		require.ErrorIs(t, holder.Release(pctx), rlock.ErrNotHeld)
		// Nobody holds or waits: everything goes within the lease.
		requireNoLeftovers(t, tp, name)
	})
}

// withReplyCut runs lock with the next reply through proxy x cut (its
// connection reset as the reply comes back), and requires that lock
// succeeds anyway: a call whose reply was lost is undone and retried.
func withReplyCut(t *testing.T, x *netProxy, what string, lock func() (context.Context, error)) context.Context {
	t.Helper()
	done := make(chan error, 1)
	var got atomic.Value
	start := make(chan struct{})
	go func() {
		<-start
		lctx, err := lock() // its reply is the next one through the proxy
		if err == nil {
			got.Store(lctx)
		}
		done <- err
	}()
	connectionsCut.Store(0)
	x.add(t, toxic{Name: "cut", Type: cutOnReplyType, Stream: "downstream"})
	close(start)
	awaitCond(t, 10*time.Second, what+"'s reply to be cut", func() bool { return connectionsCut.Load() > 0 })
	x.remove(t, "cut")
	require.NoError(t, recvErr(t, done, 15*time.Second, what), "%s: a call whose reply was lost must be retried", what)
	return got.Load().(context.Context)
}
