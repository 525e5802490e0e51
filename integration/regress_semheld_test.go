package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/rlock"
)

// TestRegressSemaphoreStaleSize: InspectSemaphore and ForceUnlockSemaphore
// see only live state. The holders hash expires with the longest lease
// ever started, so after a long-lease holder released early and a
// short-lease holder crashed, its "#size" outlived them: Inspect reported
// a Size with nobody holding or waiting (documented as 0), and
// ForceUnlockSemaphore returned true, counting a force-unlock, for
// deleting only the dead holder's leftovers.
func TestRegressSemaphoreStaleSize(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx := context.Background()
		name := lockName(t)
		r, _, observed := observe(t)
		admin := lockClient(t, tp, observed(rlock.Options{}))
		long := lockClient(t, tp, rlock.Options{}).Semaphore(name, 3)
		crashed := lockClient(t, tp, rlock.Options{})

		lctx, err := long.Acquire(ctx, 1, rlock.WithLease(time.Minute))
		require.NoError(t, err)
		dctx, err := crashed.Semaphore(name, 3).Acquire(ctx, 1, rlock.WithLease(300*time.Millisecond))
		require.NoError(t, err)
		keepHeld(t, dctx) // it never releases: it crashed
		require.NoError(t, long.Release(lctx))
		rc := redisClient(t, tp)
		leases := semKeysOf(name).Leases
		awaitCond(t, 10*time.Second, "the crashed holder's lease to run out in Redis", func() bool {
			return !leaseLive(t, rc, leases, crashed.ID()+":1")
		})

		info, err := admin.InspectSemaphore(ctx, name)
		require.NoError(t, err)
		assert.False(t, info.Held())
		assert.Zero(t, info.Size, "a size with nobody holding or waiting")
		ok, err := admin.ForceUnlockSemaphore(ctx, name)
		require.NoError(t, err)
		assert.False(t, ok, "a force-unlock of a semaphore nobody holds")
		assert.Zero(t, r.value("latchkey.lock.force_unlocks"), "a force-unlock counted")
		requireNoLeftovers(t, tp, name)
	})
}
