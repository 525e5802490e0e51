package integration

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/internal/luascripts"
	"github.com/latchkey/latchkey/rlock"
)

// TestRegressLastUnlockSettleFailed: an outer Unlock whose re-send of a
// failed inner Unlock fails too ends the hold all the same, as its error
// says ("the hold expires within its lease"). It returned before ending
// the hold: the watchdog went on renewing it, and the lock stayed held for
// as long as the process lived, with its context never ended.
func TestRegressLastUnlockSettleFailed(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx := context.Background()
		raw := redisClient(t, tp)
		var on atomic.Bool
		rc := scripted{Client: raw, fail: shaOf(luascripts.Release), on: &on, fails: new(atomic.Int64), held: new(atomic.Int64)}
		c, err := rlock.NewClient(rc, rlock.Options{WatchdogTimeout: time.Second, ReleaseTimeout: 100 * time.Millisecond})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, c.Close()) })
		m := c.Mutex(lockName(t))
		warm, err := m.Lock(ctx) // loads the release script: the failed calls are EVALSHAs
		require.NoError(t, err)
		require.NoError(t, m.Unlock(warm))

		outer, err := m.Lock(ctx)
		require.NoError(t, err)
		inner, err := m.Lock(outer)
		require.NoError(t, err)
		on.Store(true)
		require.Error(t, m.Unlock(inner))
		require.ErrorContains(t, m.Unlock(outer), "expires within its lease")
		select {
		case <-outer.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("the outer level's context did not end at its failed last Unlock")
		}
		awaitCond(t, 10*time.Second, "the lock to expire, no longer renewed", func() bool { return !exists(t, raw, m.Key()) })
	})
}
