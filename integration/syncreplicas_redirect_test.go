package integration

import (
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/internal/redistest"
	"github.com/latchkey/latchkey/rlock"
)

// TestRegressSyncReplicasFollowsRedirects: SyncReplicas' WAIT must run on
// the node that ran the script, also when the script was redirected.
// rueidis follows -MOVED and -ASK by sending the one redirected command
// to the new node, so a WAIT sent with it in the same pipeline stayed on
// the old node, which acknowledged at once what it never had. Here the
// new node's replica is paused: every change made there must be reported
// as not replicated.
//
// "moved": the lock's slot has moved and the client's slot map does not
// know yet; a grant made through -MOVED used to succeed.
// "ask": the held lock's keys moved, the slot is still migrating, so
// renewals run on the importing node through -ASK; they used to be
// acknowledged by the old node, and the hold outlived a replica that had
// never seen its renewals.
func TestRegressSyncReplicasFollowsRedirects(t *testing.T) {
	for _, ask := range []bool{false, true} {
		t.Run(map[bool]string{false: "moved", true: "ask"}[ask], func(t *testing.T) {
			ctx := t.Context()
			cl, tp := replicatedCluster(t)
			c := lockClient(t, tp, rlock.Options{WatchdogTimeout: 900 * time.Millisecond, WatchdogInterval: 300 * time.Millisecond,
				SyncReplicas: rlock.SyncReplicas{Replicas: 1, Timeout: 100 * time.Millisecond}})
			name := lockName(t)
			m := c.Mutex(name)
			slot := redistest.SlotOf(m.Key())
			from, to, err := cl.OtherMaster(ctx, slot)
			require.NoError(t, err)
			replicas, err := cl.ReplicasOf(ctx, to)
			require.NoError(t, err)
			require.Len(t, replicas, 1)
			pid, err := redistest.ProcessID(ctx, nodeClient(t, replicas[0]))
			require.NoError(t, err)
			pause := func() { require.NoError(t, syscall.Kill(pid, syscall.SIGSTOP)) }
			resume := func() { require.NoError(t, syscall.Kill(pid, syscall.SIGCONT)) }
			t.Cleanup(func() { syscall.Kill(pid, syscall.SIGCONT) })

			if !ask {
				require.NoError(t, cl.MigrateSlot(ctx, slot, to))
				pause()
				_, err = m.Lock(ctx)
				require.ErrorIs(t, err, rlock.ErrNotReplicated, "a grant on %s acknowledged by %s", to, from)
				resume()
				held, err := m.Lock(ctx)
				require.NoError(t, err, "with the replica back, grants are acknowledged")
				require.NoError(t, m.Unlock(held))
				requireNoLeftovers(t, tp, name)
				return
			}
			held, err := m.Lock(ctx)
			require.NoError(t, err)
			mig, err := cl.BeginMigration(ctx, slot, to)
			require.NoError(t, err)
			_, err = mig.MoveKeys(ctx, 0)
			require.NoError(t, err)
			pause()
			requireLost(t, held, 5*time.Second, "the lock whose renewals on the importing node were not acknowledged")
			resume()
			require.NoError(t, mig.Finish(ctx))
			requireNoLeftovers(t, tp, name)
		})
	}
}
