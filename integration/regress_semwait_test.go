package integration

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/internal/luascripts"
	"github.com/latchkey/latchkey/rlock"
)

// TestRegressSemaphoreWaitErrorLeaseLeft: a Semaphore waiter refused for a
// client woken before it names the first permit holder with that holder's
// lease left. The refusal's wait (the woken client's window, when it ends
// first) was reported as the holder's lease left.
func TestRegressSemaphoreWaitErrorLeaseLeft(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		const lease, window = time.Minute, 30 * time.Second
		ctx := context.Background()
		name := lockName(t)
		holder := lockClient(t, tp, rlock.Options{ClientName: "worker-7"})
		hctx, err := holder.Semaphore(name, 2).Acquire(ctx, 1, rlock.WithLease(lease))
		require.NoError(t, err)
		// A client woken for the free permit that has not come yet: it keeps
		// the permit for its window, which ends before the holder's lease.
		rc := redisClient(t, tp)
		queueWoken(t, rc, semKeysOf(name).Queue, frozenClient, window)

		att := newAttempts()
		waiter := lockClient(t, tp, att.options(rlock.Options{}))
		wctx, cancel := context.WithCancel(ctx)
		errc := make(chan error, 1)
		go func() {
			_, err := waiter.Semaphore(name, 2).Acquire(wctx, 1)
			errc <- err
		}()
		await(t, att.reached(waitKey(name), 1), 10*time.Second, "the waiter to wait")
		cancel()
		err = recvErr(t, errc, 10*time.Second, "the cancelled wait")
		var we *rlock.WaitError
		require.True(t, errors.As(err, &we), "%T: %v", err, err)
		require.NotNil(t, we.Holder, "the permit holder")
		require.Equal(t, "worker-7", we.Holder.Client.Name)

		info, err := holder.InspectSemaphore(ctx, name)
		require.NoError(t, err)
		require.Len(t, info.Holders, 1)
		left := info.Holders[0].LeaseLeft
		require.Greater(t, left, window, "the holder's lease outlasts the window")
		require.InDelta(t, float64(left), float64(we.Holder.LeaseLeft), float64(5*time.Second),
			"the WaitError's lease left (%v) is the holder's (%v), not the woken client's window", we.Holder.LeaseLeft, left)

		// The woken client gives up its place (else its queue outlives the test).
		wake := luascripts.Wake{Sharded: tp.cluster, Window: rlock.DefaultHandoffWindow}
		removed, err := luascripts.RunSemLeave(ctx, rc, semKeysOf(name), frozenClient, 2, wake)
		require.NoError(t, err)
		require.True(t, removed, "the woken client was still queued")
		require.NoError(t, holder.Semaphore(name, 2).Release(hctx))
		requireNoLeftovers(t, tp, name)
	})
}

// TestRegressRWMutexWaitErrorPosition: an RWMutex waiter's place in line
// counts the clients queued before it that it waits for, in both queues: a
// writer waits for every client queued before it, a reader for the writers
// queued before it (the readers before it are admitted with it). It was
// the rank in the caller's own side's queue alone.
func TestRegressRWMutexWaitErrorPosition(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx := context.Background()
		name := lockName(t)
		holder := lockClient(t, tp, rlock.Options{ClientName: "worker-7"})
		hctx, err := holder.RWMutex(name).Lock(ctx)
		require.NoError(t, err)
		defer func() { require.NoError(t, holder.RWMutex(name).Unlock(hctx)) }()

		// Queued in this order, each once the one before waits.
		waiters := []struct {
			what  string
			write bool
			place int
		}{
			{"the first reader", false, 1},
			{"a reader behind a reader", false, 1},
			{"a writer behind two readers", true, 3},
			{"a reader behind the writer", false, 2},
		}
		errs := make([]chan error, len(waiters))
		cancels := make([]context.CancelFunc, len(waiters))
		for i, w := range waiters {
			att := newAttempts()
			rw := lockClient(t, tp, att.options(rlock.Options{})).RWMutex(name)
			wctx, cancel := context.WithCancel(ctx)
			cancels[i], errs[i] = cancel, make(chan error, 1)
			go func() {
				var err error
				if w.write {
					_, err = rw.Lock(wctx)
				} else {
					_, err = rw.RLock(wctx)
				}
				errs[i] <- err
			}()
			await(t, att.reached(waitKey(name), 1), 10*time.Second, w.what+" to wait")
		}
		// All at once: a waiter that leaves could otherwise prod another
		// into a new try, and a new place.
		for _, cancel := range cancels {
			cancel()
		}
		want, got := make([]int, len(waiters)), make([]int, len(waiters))
		for i, w := range waiters {
			err := recvErr(t, errs[i], 10*time.Second, "the cancelled wait of "+w.what)
			var we *rlock.WaitError
			require.True(t, errors.As(err, &we), "%s: %T: %v", w.what, err, err)
			want[i], got[i] = w.place, we.Position
		}
		require.Equal(t, want, got, "the places in line of the waiters, in the order they queued")
	})
}
