package watchdog_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/internal/redistest"
	"github.com/latchkey/latchkey/watchdog"
)

// TestWatchdogHalfMovedSlotKeepsLeases: two one-key hash leases in one
// Cluster slot are renewed in one script call. While the slot is
// half-migrated, one key moved and the other not yet, Redis refuses that
// call with TRYAGAIN on both masters, tick after tick, although each key
// alone can be renewed (on the old master, or through -ASK on the new one).
// The watchdog recorded the error for both and lost both with ErrExpired
// unless the second key moved within the local deadline. It must renew
// each on its own and keep both, with and without Sync. The Cluster is the
// test's own (with a replica per master, for Sync): it moves slots.
func TestWatchdogHalfMovedSlotKeepsLeases(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := redistest.StartClusterWithReplicas(ctx, 3, 1)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, cl.Close()) })

	for _, tc := range []struct {
		name string
		sync watchdog.Sync
	}{
		{"plain", watchdog.Sync{}},
		{"sync", watchdog.Sync{Replicas: 1, Timeout: interval / 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(t, rueidis.ClientOption{InitAddress: cl.Addrs})
			w := newWatchdog(t, c, watchdog.Options{Timeout: timeout, Interval: interval, Sync: tc.sync})
			const owner = "owner-half-moved"
			tag := fmt.Sprintf("{%s-%d-%d}", t.Name(), runID, seq.Add(1))
			keys := []string{tag + ":a", tag + ":b"}
			lost := newLostLog()
			for _, k := range keys {
				sent := time.Now()
				for _, r := range c.DoMulti(ctx,
					c.B().Hset().Key(k).FieldValue().FieldValue(owner, "1").Build(),
					c.B().Pexpire().Key(k).Milliseconds(timeout.Milliseconds()).Build()) {
					require.NoError(t, r.Error())
				}
				w.Add(k, owner, sent, lost.onLost)
			}
			// Both renewed together at least once before the migration.
			awaitTicks(t, w, 2)

			slot := redistest.SlotOf(keys[0])
			_, to, err := cl.OtherMaster(ctx, slot)
			require.NoError(t, err)
			m, err := cl.BeginMigration(ctx, slot, to)
			require.NoError(t, err)
			finished := false
			t.Cleanup(func() {
				if !finished {
					assert.NoError(t, m.Finish(ctx))
				}
			})
			moved, err := m.MoveKeys(ctx, 1)
			require.NoError(t, err)
			require.Equal(t, 1, moved)
			before := w.Stats()

			// Several timeouts half-moved: a loss would come within one.
			select {
			case cause := <-lost.causes:
				t.Fatalf("a lease was lost while its slot was half-moved: %v (stats %+v)", cause, w.Stats())
			case <-time.After(4 * timeout):
			}
			requireAllAlive(t, c, keys)
			during := w.Stats()
			require.NoError(t, m.Finish(ctx))
			finished = true

			assert.Zero(t, lost.calls.Load(), "leases lost")
			// Each lease lived four timeouts on renewals alone: at least
			// four each, all while the slot was half-moved.
			assert.GreaterOrEqual(t, during.Renewed-before.Renewed, uint64(4*len(keys)), "renewals while half-moved (stats %+v)", during)
			awaitTicks(t, w, 2)
			requireAllAlive(t, c, keys)
			for _, k := range keys {
				assert.Greater(t, pttl(t, c, k), timeout/2, "%s renewed", k)
			}
			assert.Zero(t, lost.calls.Load(), "leases lost")
		})
	}
}
