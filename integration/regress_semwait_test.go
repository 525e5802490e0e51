package integration

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

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
		defer func() { require.NoError(t, holder.Semaphore(name, 2).Release(hctx)) }()
		// A client woken for the free permit that has not come yet: it keeps
		// the permit for its window, which ends before the holder's lease.
		queueWoken(t, redisClient(t, tp), semKeysOf(name).Queue, frozenClient, window)

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
	})
}
