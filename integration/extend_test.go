package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/rlock"
)

// TestExtend: Extend moves a fixed lease out, in Redis and in the deadline
// of every level's context, and the hold outlives its first lease.
func TestExtend(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx := context.Background()
		rc := redisClient(t, tp)
		m := lockClient(t, tp, rlock.Options{}).Mutex(lockName(t))
		const first = 300 * time.Millisecond
		lctx := mustLock(t, ctx, m, rlock.WithLease(first))
		inner := mustLock(t, lctx, m) // a re-entry shares the hold

		require.NoError(t, m.Extend(inner, 5*time.Second))
		for _, c := range []context.Context{lctx, inner} {
			d, ok := rlock.LeaseEnd(c)
			require.True(t, ok)
			require.Greater(t, time.Until(d), 4*time.Second, "a level's deadline did not move")
		}
		pttl, err := rc.Do(ctx, rc.B().Pttl().Key(m.Key()).Build()).AsInt64()
		require.NoError(t, err)
		require.Greater(t, pttl, int64(4000), "Redis' expiry did not move")

		// The first lease's end passes without ending the hold.
		select {
		case <-lctx.Done():
			t.Fatalf("the hold ended at its first lease: %v", context.Cause(lctx))
		case <-time.After(2 * first):
		}
		require.NoError(t, m.Unlock(inner))
		require.NoError(t, m.Unlock(lctx))
		require.False(t, exists(t, rc, m.Key()))
	})
}

// TestExtendNeverShortens: a shorter lease than the one left changes
// nothing.
func TestExtendNeverShortens(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		m := lockClient(t, tp, rlock.Options{}).Mutex(lockName(t))
		lctx := mustLock(t, context.Background(), m, rlock.WithLease(10*time.Second))
		before, _ := rlock.LeaseEnd(lctx)
		require.NoError(t, m.Extend(lctx, time.Second))
		after, _ := rlock.LeaseEnd(lctx)
		require.Equal(t, before, after)
		require.NoError(t, m.Unlock(lctx))
	})
}

// TestExtendRefuses: Extend changes nothing and says why for a watchdog
// hold, a bad lease, a context without the hold, an unlocked level, an
// expired lease and a lock deleted under the holder.
func TestExtendRefuses(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx := context.Background()
		c := lockClient(t, tp, rlock.Options{})
		name := lockName(t)
		m := c.Mutex(name)

		wctx := mustLock(t, ctx, m) // the watchdog's
		require.ErrorIs(t, m.Extend(wctx, time.Second), rlock.ErrInvalidArgument)
		require.NoError(t, m.Unlock(wctx))

		lctx := mustLock(t, ctx, m, rlock.WithLease(5*time.Second))
		require.ErrorIs(t, m.Extend(lctx, 0), rlock.ErrInvalidArgument)
		require.ErrorIs(t, m.Extend(lctx, rlock.MaxLease+time.Hour), rlock.ErrInvalidArgument)
		require.ErrorIs(t, m.Extend(ctx, time.Second), rlock.ErrNotHeld)
		require.NoError(t, m.Unlock(lctx))
		require.ErrorIs(t, m.Extend(lctx, time.Second), rlock.ErrNotHeld, "after Unlock")

		short := mustLock(t, ctx, m, rlock.WithLease(200*time.Millisecond))
		<-short.Done()
		err := m.Extend(short, time.Second)
		require.ErrorIs(t, err, rlock.ErrNotHeld)
		require.ErrorIs(t, err, rlock.ErrLockLost)
		awaitExpiry(t, tp, name)

		gone := mustLock(t, ctx, m, rlock.WithLease(5*time.Second))
		deleted, err := c.ForceUnlock(ctx, name)
		require.NoError(t, err)
		require.True(t, deleted)
		require.ErrorIs(t, m.Extend(gone, time.Second), rlock.ErrNotHeld)
		requireLost(t, gone, time.Second, "a hold found gone at Extend must end its context")
		require.ErrorIs(t, m.Unlock(gone), rlock.ErrNotHeld)
	})
}
