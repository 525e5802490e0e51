package integration

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/rlock"
	"github.com/latchkey/latchkey/watchdog"
)

// TestReentrancy takes one lock three deep through the contexts Lock
// returns, on one handle and on three, and checks the counts on the way
// down. The handle itself is no owner: a Lock on the same handle by another
// goroutine, with a context that carries no hold, waits for the lock all
// along, while the holder's re-entries never wait behind it.
func TestReentrancy(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx := context.Background()
		att := newAttempts()
		c := lockClient(t, tp, att.options(rlock.Options{}))
		other := lockClient(t, tp, rlock.Options{})
		rc := redisClient(t, tp)

		t.Run("handle", func(t *testing.T) {
			name := lockName(t)
			m := c.Mutex(name)
			lctxs := []context.Context{mustLock(t, ctx, m)}
			require.Equal(t, 1, holdCount(t, lctxs[0], m))
			require.Equal(t, 0, holdCount(t, ctx, m), "the handle is no owner")
			token, err := m.Token(lctxs[0])
			require.NoError(t, err)
			requireBusy(t, m) // the same handle, without the lock context

			// Another goroutine locks the same handle: a new owner, so it
			// waits (in this client's gate) for as long as the lock is held.
			type result struct {
				ctx   context.Context
				token int64
				err   error
			}
			waiter := make(chan result, 1)
			go func() {
				wctx, err := m.Lock(ctx)
				r := result{ctx: wctx, err: err}
				if err == nil {
					r.token, r.err = m.Token(wctx)
				}
				waiter <- r
			}()
			await(t, att.reached(waitKey(name), 1), 10*time.Second, "the second Lock on the handle to wait")

			// Re-entries through the context go ahead of the waiter, at once.
			for depth := 2; depth <= 3; depth++ {
				lctxs = append(lctxs, mustLock(t, lctxs[depth-2], m))
				require.Equal(t, depth, holdCount(t, lctxs[depth-1], m))
			}
			require.Equal(t, []string{"3"}, holdCounts(t, rc, m.Key()), "one owner in Redis, three deep")
			requireBusy(t, other.Mutex(name))
			for depth := 3; depth >= 1; depth-- {
				select {
				case r := <-waiter:
					t.Fatalf("a Lock on the shared handle returned while the lock was held %d deep: %v", depth, r.err)
				default:
				}
				require.NoError(t, m.Unlock(lctxs[depth-1]))
				// Unlock ends the innermost hold's context, and only that one.
				require.ErrorIs(t, lctxs[depth-1].Err(), context.Canceled)
				if depth > 1 {
					require.Equal(t, depth-1, holdCount(t, lctxs[depth-2], m))
					require.NoError(t, lctxs[depth-2].Err())
					require.True(t, exists(t, rc, m.Key()), "released before the last Unlock")
					requireBusy(t, other.Mutex(name))
				}
			}
			var r result
			select {
			case r = <-waiter:
			case <-time.After(10 * time.Second):
				t.Fatal("the waiting Lock on the shared handle did not get the lock after the last Unlock")
			}
			require.NoError(t, r.err)
			require.Greater(t, r.token, token, "the waiter is a new owner, with a grant of its own")
			require.Equal(t, 1, holdCount(t, r.ctx, m))
			// (WithoutCancel: the ended lock context still carries the hold,
			// but HoldCount does I/O with it.)
			require.Equal(t, 0, holdCount(t, context.WithoutCancel(lctxs[0]), m), "the first owner's hold ended")
			require.ErrorIs(t, m.Unlock(lctxs[0]), rlock.ErrNotHeld, "a second Unlock of the same level")
			require.ErrorIs(t, m.Unlock(ctx), rlock.ErrNotHeld, "an Unlock with a context that carries no hold")
			require.Equal(t, 1, holdCount(t, r.ctx, m), "a failed Unlock changed the new owner's hold")
			require.NoError(t, m.Unlock(r.ctx))
			require.False(t, exists(t, rc, m.Key()))
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
// Non-owners are other processes, and in the holder's own process any
// context that carries no hold of the lock, whatever the handle; a lock
// context is a hold only for the Client whose Lock returned it.
func TestNonOwnerUnlock(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx := context.Background()
		rc := redisClient(t, tp)
		hc := lockClient(t, tp, rlock.Options{})
		holder := hc.Mutex(lockName(t))
		lctx := mustLock(t, ctx, holder, rlock.WithLease(time.Minute))
		inner := mustLock(t, lctx, holder, rlock.WithLease(time.Minute)) // count 2

		before := hgetall(t, rc, holder.Key())
		require.Len(t, lockOwners(t, rc, holder.Key()), 1)
		sub := rawWaiter(t, tp, rc, holder.Key())

		strangers := []*rlock.Mutex{
			holder, hc.Mutex(holder.Name()), hc.SpinMutex(holder.Name()), // this process, without the lock context
			lockClient(t, tp, rlock.Options{}).Mutex(holder.Name()), // another process
			lockClient(t, tp, rlock.Options{}).SpinMutex(holder.Name()),
		}
		for i, stranger := range strangers {
			require.ErrorIs(t, stranger.Unlock(ctx), rlock.ErrNotHeld, "stranger %d", i)
			if i >= 3 {
				// Another client's lock context is no hold of this one's.
				require.ErrorIs(t, stranger.Unlock(inner), rlock.ErrNotHeld, "stranger %d with the holder's context", i)
			}
		}

		require.Equal(t, before, hgetall(t, rc, holder.Key()))
		require.Equal(t, 2, holdCount(t, inner, holder))
		require.NoError(t, inner.Err(), "a failed Unlock ended the holder's context")
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

		require.NoError(t, holder.Unlock(inner))
		require.NoError(t, holder.Unlock(lctx))
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
		octx := mustLock(t, ctx, old, rlock.WithLease(time.Minute))
		require.NoError(t, rc.Do(ctx, rc.B().Del().Key(old.Key()).Build()).Error())
		newer := lockClient(t, tp, rlock.Options{}).Mutex(name)
		nctx := mustLock(t, ctx, newer)

		require.ErrorIs(t, old.Unlock(ctx), rlock.ErrNotHeld)
		require.ErrorIs(t, old.Unlock(octx), rlock.ErrNotHeld)
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
		deadline, ok := rlock.LeaseEnd(actx)
		require.True(t, ok, "a leased hold's context has a lease end")
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
		err := abandoned.Unlock(actx)
		require.ErrorIs(t, err, rlock.ErrNotHeld)
		require.ErrorIs(t, err, rlock.ErrLockLost, "Unlock after the loss says why")
		require.Equal(t, 1, holdCount(t, nctx, next))
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
		require.NoError(t, m.Unlock(lctx))
		require.False(t, exists(t, rc, m.Key()))
		ticks := c.WatchdogStats().Ticks
		require.Eventually(t, func() bool { return c.WatchdogStats().Ticks >= ticks+2 }, 10*time.Second, 20*time.Millisecond)
		require.False(t, exists(t, rc, m.Key()), "a renewal brought the key back after Unlock")
		require.ErrorIs(t, lctx.Err(), context.Canceled)
		require.NoError(t, kctx.Err())
		require.NoError(t, keeper.Unlock(kctx))
	})
}

// TestRelockAfterSilentLoss: the key vanished behind the holder's back,
// and its process locks again before the watchdog noticed. A re-entry
// through the lock context finds its hold gone: it fails with ErrLockLost
// at once, ends the hold's contexts with it, and adds nothing in Redis; the
// next new owner then takes the lock afresh, and one Unlock releases it.
// Without that re-entry, a new owner of the same process waits (the
// process still believes the lock held) until the watchdog finds the key
// gone, and then gets it.
func TestRelockAfterSilentLoss(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx := context.Background()
		rc := redisClient(t, tp)

		t.Run("reenter", func(t *testing.T) {
			m := lockClient(t, tp, rlock.Options{}).Mutex(lockName(t)) // renewals every 10s: too slow to notice
			old := mustLock(t, ctx, m)
			require.NoError(t, rc.Do(ctx, rc.B().Del().Key(m.Key()).Build()).Error())

			_, err := m.Lock(old)
			require.ErrorIs(t, err, rlock.ErrLockLost)
			require.ErrorIs(t, context.Cause(old), rlock.ErrLockLost)
			require.False(t, exists(t, rc, m.Key()), "a re-entry of a lost hold recreated the lock")

			fresh := mustLock(t, ctx, m)
			require.NoError(t, fresh.Err())
			require.Equal(t, 1, holdCount(t, fresh, m))
			require.Equal(t, []string{"1"}, holdCounts(t, rc, m.Key()))
			require.ErrorIs(t, m.Unlock(old), rlock.ErrNotHeld)
			require.Equal(t, 1, holdCount(t, fresh, m), "the lost hold's Unlock touched the new one")
			require.NoError(t, m.Unlock(fresh))
			require.False(t, exists(t, rc, m.Key()))
			require.ErrorIs(t, m.Unlock(fresh), rlock.ErrNotHeld)
		})

		t.Run("new-owner", func(t *testing.T) {
			const timeout = 900 * time.Millisecond // renewals every 300ms
			m := lockClient(t, tp, rlock.Options{WatchdogTimeout: timeout}).Mutex(lockName(t))
			old := mustLock(t, ctx, m)
			require.NoError(t, rc.Do(ctx, rc.B().Del().Key(m.Key()).Build()).Error())

			fresh := mustLock(t, ctx, m)
			// The new owner got in only once the old hold was known lost.
			require.ErrorIs(t, context.Cause(old), rlock.ErrLockLost)
			require.NoError(t, fresh.Err())
			require.Equal(t, 1, holdCount(t, fresh, m))
			require.Equal(t, []string{"1"}, holdCounts(t, rc, m.Key()))
			require.ErrorIs(t, m.Unlock(old), rlock.ErrNotHeld)
			require.NoError(t, m.Unlock(fresh))
			require.False(t, exists(t, rc, m.Key()))
		})
	})
}

// TestSharedHandle: goroutines sharing one handle exclude each other, as
// with a sync.Mutex: a non-atomic increment under the lock loses no update
// (and the race detector sees no race), no hold is mistaken for lost, and
// the lock is gone at the end.
func TestSharedHandle(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx := context.Background()
		rc := redisClient(t, tp)
		m := lockClient(t, tp, rlock.Options{}).Mutex(lockName(t))
		const goroutines, rounds = 8, 50
		counter := 0 // guarded by the lock alone
		var wg sync.WaitGroup
		for g := 0; g < goroutines; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < rounds; i++ {
					lctx, err := m.Lock(ctx)
					if err != nil {
						t.Error(err)
						return
					}
					n := counter
					runtime.Gosched() // widen the window for a lost update
					counter = n + 1
					if lctx.Err() != nil {
						t.Error("the hold ended inside its critical section:", context.Cause(lctx))
					}
					if err := m.Unlock(lctx); err != nil {
						t.Error(err)
						return
					}
					// Ended by its own Unlock, never by a false loss.
					if errors.Is(context.Cause(lctx), rlock.ErrLockLost) {
						t.Error("a hold was reported lost:", context.Cause(lctx))
						return
					}
					if !errors.Is(lctx.Err(), context.Canceled) {
						t.Error("Unlock did not end the lock context:", lctx.Err())
						return
					}
				}
			}()
		}
		wg.Wait()
		require.Equal(t, goroutines*rounds, counter, "lost updates: goroutines sharing a handle overlapped")
		require.Equal(t, 0, holdCount(t, ctx, m))
		require.False(t, exists(t, rc, m.Key()))
	})
}
