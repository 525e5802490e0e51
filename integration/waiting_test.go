package integration

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/rlock"
)

// TestLossSignal: deleting a watchdog-kept lock behind the holder's back
// cancels its context with ErrLockLost within one renewal period.
func TestLossSignal(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx := context.Background()
		rc := redisClient(t, tp)
		const timeout = 900 * time.Millisecond // renewal period 300ms
		m := lockClient(t, tp, rlock.Options{WatchdogTimeout: timeout}).Mutex(lockName(t))
		lctx := mustLock(t, ctx, m)

		require.NoError(t, rc.Do(ctx, rc.B().Del().Key(m.Key()).Build()).Error())
		deleted := time.Now()
		select {
		case <-lctx.Done():
		case <-time.After(10 * timeout):
			t.Fatal("no loss signal")
		}
		took := time.Since(deleted)
		require.ErrorIs(t, context.Cause(lctx), rlock.ErrLockLost)
		// One period, plus slack for a loaded machine running -race.
		require.Less(t, took, timeout/3+time.Second)
		t.Logf("loss signalled %v after the DEL", took.Round(time.Millisecond))
		err := m.Unlock(lctx)
		require.ErrorIs(t, err, rlock.ErrNotHeld)
		require.ErrorIs(t, err, rlock.ErrLockLost)
	})
}

// TestWakeUp: a blocked waiter acquires promptly after Unlock, long before
// the holder's TTL would have let it; and if the lock vanishes without a
// message (a raw DEL), the waiter still gets it by the TTL bound.
func TestWakeUp(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx := context.Background()
		t.Run("unlock", func(t *testing.T) {
			name := lockName(t)
			holder := lockClient(t, tp, rlock.Options{}).Mutex(name) // TTL 30s
			hctx := mustLock(t, ctx, holder)
			att := newAttempts()
			waiter := lockClient(t, tp, rlock.Options{OnAttempt: att.hook}).Mutex(name)

			var seq atomic.Int64
			var unlockedAt, acquiredAt int64
			acquired := make(chan time.Time, 1)
			done := make(chan struct{})
			// The waiter's Unlock must end before the test, whose cleanup
			// closes the clients it uses; a failed test cancels its wait.
			gctx, cancel := context.WithCancel(ctx)
			defer func() { cancel(); <-done }()
			go func() {
				defer close(done)
				wctx, err := waiter.Lock(gctx)
				if err == nil {
					acquiredAt = seq.Add(1)
					acquired <- time.Now()
					err = waiter.Unlock(wctx)
				}
				if err != nil {
					t.Error(err)
					close(acquired)
				}
			}()
			// First try, then the try after subscribing: now it waits.
			await(t, att.reached(name, 2), 10*time.Second, "the waiter to block")
			unlockedAt = seq.Add(1)
			start := time.Now()
			require.NoError(t, holder.Unlock(hctx))
			at, ok := <-acquired
			require.True(t, ok)
			require.Equal(t, int64(1), unlockedAt)
			require.Equal(t, int64(2), acquiredAt, "acquired before the unlock")
			// Prompt: far inside the 30s TTL that a missed message would cost.
			require.Less(t, at.Sub(start), 5*time.Second)
			require.Equal(t, 3, att.count(name), "one try after the wake-up")
			t.Logf("handoff took %v", at.Sub(start).Round(time.Microsecond))
		})

		t.Run("silent-delete", func(t *testing.T) {
			name := lockName(t)
			rc := redisClient(t, tp)
			const ttl = 1500 * time.Millisecond
			holder := lockClient(t, tp, rlock.Options{}).Mutex(name)
			mustLock(t, ctx, holder, rlock.WithLease(ttl))
			att := newAttempts()
			waiter := lockClient(t, tp, rlock.Options{OnAttempt: att.hook}).Mutex(name)
			acquired := startWaiter(t, ctx, waiter, att)
			// No message: the waiter must fall back on the TTL it was given.
			require.NoError(t, rc.Do(ctx, rc.B().Del().Key(holder.Key()).Build()).Error())
			requireAcquired(t, acquired, ttl+5*time.Second, "the waiter hung past the TTL bound")
		})
	})
}

// TestWakeOne: each release wakes one client, and in it one goroutine: 4
// clients (processes, as far as Redis can tell) with 5 waiters each make
// at most about one acquire attempt per handoff, not one per waiter (in
// fact about one per client: a client's other waiters get the lock by
// local handover, without an attempt).
func TestWakeOne(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx := context.Background()
		name := lockName(t)
		const clients, each = 4, 5
		holder := lockClient(t, tp, rlock.Options{}).Mutex(name)
		hctx := mustLock(t, ctx, holder)
		att := newAttempts()

		var wg sync.WaitGroup
		var inside atomic.Int32
		for range clients {
			c := lockClient(t, tp, att.options(rlock.Options{}))
			blockWaiters(t, att, name, each, &wg, func() {
				m := c.Mutex(name)
				lctx, err := m.Lock(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				if inside.Add(1) != 1 {
					t.Error("two holders at once")
				}
				inside.Add(-1)
				if err := m.Unlock(lctx); err != nil {
					t.Error(err)
				}
			})
		}
		before := att.count(name)
		require.NoError(t, holder.Unlock(hctx))
		wg.Wait()
		during := att.count(name) - before
		perHandoff := float64(during) / (clients * each)
		t.Logf("%d attempts for %d handoffs across %d clients: %.2f per handoff", during, clients*each, clients, perHandoff)
		require.LessOrEqual(t, perHandoff, 1.5)
	})
}

// TestForceUnlock deletes a held lock: a waiter gets it at once (the script
// publishes), and the former holder hears of it at its next renewal.
func TestForceUnlock(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx := context.Background()
		name := lockName(t)
		admin := lockClient(t, tp, rlock.Options{})
		holder := lockClient(t, tp, rlock.Options{WatchdogTimeout: 900 * time.Millisecond}).Mutex(name)
		hctx := mustLock(t, ctx, holder)
		att := newAttempts()
		waiter := lockClient(t, tp, rlock.Options{OnAttempt: att.hook}).Mutex(name)
		acquired := startWaiter(t, ctx, waiter, att)

		ok, err := admin.ForceUnlock(ctx, name)
		require.NoError(t, err)
		require.True(t, ok)
		requireAcquired(t, acquired, 5*time.Second, "the waiter was not woken by the force-unlock")
		select {
		case <-hctx.Done():
			require.ErrorIs(t, context.Cause(hctx), rlock.ErrLockLost)
		case <-time.After(5 * time.Second):
			t.Fatal("the former holder was not told")
		}
		ok, err = admin.ForceUnlock(ctx, name)
		require.NoError(t, err)
		require.False(t, ok, "nothing left to force")
	})
}

// TestClassicPubSubOnCluster: PubSubClassic cannot wake waiters correctly
// on a Cluster (a PUBLISH counts only its own node's subscribers), so
// NewClient refuses the combination; on standalone Redis it works, and a
// waiter is woken promptly.
func TestClassicPubSubOnCluster(t *testing.T) {
	ctx := context.Background()
	opts := rlock.Options{PubSub: rlock.PubSubClassic}
	c, err := rlock.NewClient(redisClient(t, topologies()[1]), opts)
	require.ErrorIs(t, err, rlock.ErrInvalidOptions)
	require.Nil(t, c)

	tp := topologies()[0]
	name := lockName(t)
	holder := lockClient(t, tp, opts).Mutex(name) // TTL 30s
	hctx := mustLock(t, ctx, holder)
	att := newAttempts()
	opts.OnAttempt = att.hook
	waiter := lockClient(t, tp, opts).Mutex(name)
	acquired := startWaiter(t, ctx, waiter, att)
	require.NoError(t, holder.Unlock(hctx))
	requireAcquired(t, acquired, 5*time.Second, "classic pub/sub did not wake the waiter")
}
