package integration

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/rlock"
	"github.com/latchkey/latchkey/watchdog"
)

// TestReentrancy takes one lock three deep, through the same handle and
// through the context Lock returns, and checks the counts on the way down.
func TestReentrancy(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx := context.Background()
		c := lockClient(t, tp, rlock.Options{})
		other := lockClient(t, tp, rlock.Options{})
		rc := redisClient(t, tp)

		t.Run("handle", func(t *testing.T) {
			name := lockName(t)
			m := c.Mutex(name)
			var lctxs []context.Context
			for depth := 1; depth <= 3; depth++ {
				lctxs = append(lctxs, mustLock(t, ctx, m))
				require.Equal(t, depth, holdCount(t, ctx, m))
			}
			requireBusy(t, other.Mutex(name))
			for depth := 3; depth >= 1; depth-- {
				require.NoError(t, m.Unlock(ctx))
				// Unlock ends the innermost hold's context, and only that one.
				require.ErrorIs(t, lctxs[depth-1].Err(), context.Canceled)
				require.Equal(t, depth-1, holdCount(t, ctx, m))
				if depth > 1 {
					require.NoError(t, lctxs[depth-2].Err())
					require.True(t, exists(t, rc, m.Key()), "released before the last Unlock")
					requireBusy(t, other.Mutex(name))
				}
			}
			require.False(t, exists(t, rc, m.Key()))
			require.ErrorIs(t, m.Unlock(ctx), rlock.ErrNotHeld)
		})

		t.Run("context", func(t *testing.T) {
			name := lockName(t)
			// Three different handles, as three nested functions would make.
			outer, middle, inner := c.Mutex(name), c.Mutex(name), c.Mutex(name)
			l1 := mustLock(t, ctx, outer)
			l2 := mustLock(t, l1, middle)
			l3 := mustLock(t, l2, inner)
			require.Equal(t, 3, holdCount(t, l3, inner))
			// A handle called without the lock context is another owner.
			require.Equal(t, 0, holdCount(t, ctx, inner))
			requireBusy(t, c.Mutex(name))

			require.NoError(t, inner.Unlock(l3))
			require.Error(t, l3.Err())
			require.NoError(t, l2.Err())
			require.Equal(t, 2, holdCount(t, l2, middle))
			require.NoError(t, middle.Unlock(l2))
			require.Equal(t, 1, holdCount(t, l1, outer))
			require.True(t, exists(t, rc, outer.Key()))
			requireBusy(t, other.Mutex(name))
			require.NoError(t, outer.Unlock(l1))
			require.ErrorIs(t, l1.Err(), context.Canceled)
			require.False(t, exists(t, rc, outer.Key()))

			lctx, ok, err := other.Mutex(name).TryLock(ctx)
			require.NoError(t, err)
			require.True(t, ok, "free after the last Unlock")
			require.NoError(t, other.Mutex(name).Unlock(lctx))
		})
	})
}

func requireBusy(t *testing.T, m *rlock.Mutex) {
	t.Helper()
	lctx, ok, err := m.TryLock(context.Background())
	require.NoError(t, err)
	require.False(t, ok, "%s should be held by someone else", m.Name())
	require.Nil(t, lctx)
}

// TestNonOwnerUnlock: Unlock by an owner that does not hold the lock reports
// ErrNotHeld and changes nothing: same holder, count and TTL, no message.
func TestNonOwnerUnlock(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx := context.Background()
		rc := redisClient(t, tp)
		holder := lockClient(t, tp, rlock.Options{}).Mutex(lockName(t))
		lctx := mustLock(t, ctx, holder, rlock.WithLease(time.Minute))
		mustLock(t, lctx, holder, rlock.WithLease(time.Minute)) // count 2

		before, err := rc.Do(ctx, rc.B().Hgetall().Key(holder.Key()).Build()).AsStrMap()
		require.NoError(t, err)
		sub := rawWaiter(t, tp, rc, holder.Key())

		for _, stranger := range []*rlock.Mutex{
			lockClient(t, tp, rlock.Options{}).Mutex(holder.Name()), // another process
			lockClient(t, tp, rlock.Options{}).SpinMutex(holder.Name()),
		} {
			require.ErrorIs(t, stranger.Unlock(ctx), rlock.ErrNotHeld)
		}

		after, err := rc.Do(ctx, rc.B().Hgetall().Key(holder.Key()).Build()).AsStrMap()
		require.NoError(t, err)
		require.Equal(t, before, after)
		pttl, err := rc.Do(ctx, rc.B().Pttl().Key(holder.Key()).Build()).AsInt64()
		require.NoError(t, err)
		require.Greater(t, pttl, int64(50*time.Second/time.Millisecond), "TTL must not have been touched")
		// Anything the failed unlocks published would arrive before this.
		publish(t, rc, tp, holder.Key()+":ch:"+rawWaiterID, "sentinel")
		select {
		case msg := <-sub.msgs:
			require.Equal(t, "sentinel", msg, "a non-owner unlock published")
		case <-time.After(10 * time.Second):
			t.Fatal("sentinel not received")
		}

		require.NoError(t, holder.Unlock(ctx))
		require.NoError(t, holder.Unlock(ctx))
		select {
		case msg := <-sub.msgs:
			require.Equal(t, "unlock", msg)
		case <-time.After(10 * time.Second):
			t.Fatal("the real release published nothing")
		}
	})
}

// TestUnlockAfterLoss: a holder whose lock was deleted and taken by someone
// else gets ErrNotHeld from Unlock and leaves the new holder alone.
func TestUnlockAfterLoss(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx := context.Background()
		rc := redisClient(t, tp)
		name := lockName(t)
		old := lockClient(t, tp, rlock.Options{}).Mutex(name)
		mustLock(t, ctx, old, rlock.WithLease(time.Minute))
		require.NoError(t, rc.Do(ctx, rc.B().Del().Key(old.Key()).Build()).Error())
		newer := lockClient(t, tp, rlock.Options{}).Mutex(name)
		nctx := mustLock(t, ctx, newer)

		require.ErrorIs(t, old.Unlock(ctx), rlock.ErrNotHeld)
		require.Equal(t, 1, holdCount(t, nctx, newer))
		require.NoError(t, nctx.Err())
		require.NoError(t, newer.Unlock(nctx))
	})
}

// TestLeaseExpiry: a holder with a 500ms lease that never unlocks loses the
// lock to the next client once the lease runs out, and its context says so.
func TestLeaseExpiry(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx := context.Background()
		name := lockName(t)
		abandoned := lockClient(t, tp, rlock.Options{}).Mutex(name)
		start := time.Now()
		actx := mustLock(t, ctx, abandoned, rlock.WithLease(500*time.Millisecond))
		// The holder's context ends the drift margin before the lease, which
		// runs from when the acquire was sent: between start and now.
		deadline, ok := actx.Deadline()
		require.True(t, ok, "a leased hold's context has a deadline")
		validity := 500*time.Millisecond - watchdog.DriftMargin(500*time.Millisecond)
		require.False(t, deadline.Before(start.Add(validity)), "deadline %v after start", deadline.Sub(start))
		require.False(t, deadline.After(time.Now().Add(validity)), "deadline %v after start", deadline.Sub(start))

		next := lockClient(t, tp, rlock.Options{}).Mutex(name)
		nctx := mustLock(t, ctx, next)
		waited := time.Since(start)
		require.GreaterOrEqual(t, waited, 400*time.Millisecond, "acquired long before the lease could have run out")
		select {
		case <-actx.Done():
			require.ErrorIs(t, context.Cause(actx), rlock.ErrLockLost)
		case <-time.After(5 * time.Second):
			t.Fatal("the expired holder's context was not cancelled")
		}
		require.ErrorIs(t, abandoned.Unlock(ctx), rlock.ErrNotHeld)
		require.NoError(t, next.Unlock(nctx))
	})
}

// TestWatchdog: a holder without a lease keeps the lock for many times its
// 1s watchdog timeout, and after Unlock the key is gone and stays gone.
func TestWatchdog(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx := context.Background()
		rc := redisClient(t, tp)
		c := lockClient(t, tp, rlock.Options{WatchdogTimeout: time.Second})
		m := c.Mutex(lockName(t))
		lctx := mustLock(t, ctx, m)

		// The claim is about time itself: 5s is five timeouts.
		select {
		case <-lctx.Done():
			t.Fatalf("lock lost while held: %v", context.Cause(lctx))
		case <-time.After(5 * time.Second):
		}
		require.True(t, exists(t, rc, m.Key()))
		requireBusy(t, lockClient(t, tp, rlock.Options{}).Mutex(m.Name()))
		require.GreaterOrEqual(t, c.WatchdogStats().Renewed, uint64(10))

		// A second lock keeps the watchdog ticking after the first is gone.
		keeper := c.Mutex(lockName(t))
		kctx := mustLock(t, ctx, keeper)
		require.NoError(t, m.Unlock(ctx))
		require.False(t, exists(t, rc, m.Key()))
		ticks := c.WatchdogStats().Ticks
		require.Eventually(t, func() bool { return c.WatchdogStats().Ticks >= ticks+2 }, 10*time.Second, 20*time.Millisecond)
		require.False(t, exists(t, rc, m.Key()), "a renewal brought the key back after Unlock")
		require.ErrorIs(t, lctx.Err(), context.Canceled)
		require.NoError(t, kctx.Err())
		require.NoError(t, keeper.Unlock(kctx))
	})
}

// TestRelockAfterSilentLoss: the key vanished behind the holder's back and
// the same owner locks again before the watchdog noticed. Redis counts one
// hold, so the old hold is over: its context ends with ErrLockLost, and the
// new one is a first acquisition that one Unlock releases.
func TestRelockAfterSilentLoss(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx := context.Background()
		rc := redisClient(t, tp)
		m := lockClient(t, tp, rlock.Options{}).Mutex(lockName(t)) // renewals every 10s: too slow to notice
		old := mustLock(t, ctx, m)
		require.NoError(t, rc.Do(ctx, rc.B().Del().Key(m.Key()).Build()).Error())

		fresh := mustLock(t, ctx, m)
		require.ErrorIs(t, context.Cause(old), rlock.ErrLockLost)
		require.NoError(t, fresh.Err())
		require.Equal(t, 1, holdCount(t, ctx, m))
		require.NoError(t, m.Unlock(fresh))
		require.False(t, exists(t, rc, m.Key()))
		require.ErrorIs(t, m.Unlock(ctx), rlock.ErrNotHeld)
	})
}

// TestSharedHandle: goroutines sharing one handle are one owner, so they
// re-enter rather than exclude each other (as documented); whatever the
// interleaving, no hold is mistaken for lost and the counts balance out.
func TestSharedHandle(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx := context.Background()
		rc := redisClient(t, tp)
		m := lockClient(t, tp, rlock.Options{}).Mutex(lockName(t))
		var wg sync.WaitGroup
		for g := 0; g < 8; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 50; i++ {
					lctx, err := m.Lock(ctx)
					if err != nil {
						t.Error(err)
						return
					}
					if err := m.Unlock(ctx); err != nil {
						t.Error(err)
						return
					}
					<-lctx.Done() // ended by some Unlock of this owner ...
					if errors.Is(context.Cause(lctx), rlock.ErrLockLost) {
						t.Error("a hold was reported lost:", context.Cause(lctx)) // ... never by a false loss
						return
					}
				}
			}()
		}
		wg.Wait()
		require.Equal(t, 0, holdCount(t, ctx, m))
		require.False(t, exists(t, rc, m.Key()))
	})
}
