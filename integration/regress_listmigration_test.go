package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/internal/redistest"
	"github.com/latchkey/latchkey/rlock"
)

// TestRegressListDuringMigration: List sent its describe scripts in one
// pipeline without the TRYAGAIN retry Inspect has, so while a held lock's
// slot was half-migrated (keys moved, slot still MIGRATING/IMPORTING; the
// lock's queue key missing on the importing master) it failed outright
// with TRYAGAIN. It must wait out the migration, as Inspect does, and
// list the lock. The Cluster is the test's own: it moves a slot.
func TestRegressListDuringMigration(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := redistest.StartCluster(ctx, 3)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, cl.Close()) })
	tp := topology{name: "cluster-migration", addrs: cl.Addrs, cluster: true}

	name := lockName(t)
	c := lockClient(t, tp, rlock.Options{})
	m := c.Mutex(name)
	lctx := mustLock(t, ctx, m, rlock.WithLease(time.Minute))

	slot := redistest.SlotOf(rlock.DefaultPrefix + ":{" + name + "}")
	_, to, err := cl.OtherMaster(ctx, slot)
	require.NoError(t, err)
	mig, err := cl.BeginMigration(ctx, slot, to)
	require.NoError(t, err)
	moved, err := mig.MoveKeys(ctx, 0)
	require.NoError(t, err)
	require.Positive(t, moved)

	type listed struct {
		infos []rlock.LockInfo
		err   error
	}
	done := make(chan listed, 1)
	go func() {
		infos, err := c.List(ctx, name)
		done <- listed{infos, err}
	}()
	var got listed
	select {
	case got = <-done: // answered while the slot is half-moved
	case <-time.After(300 * time.Millisecond):
		require.NoError(t, mig.Finish(ctx))
		mig = nil
		select {
		case got = <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("List did not return after the migration finished")
		}
	}
	if mig != nil {
		require.NoError(t, mig.Finish(ctx))
	}
	require.NoError(t, got.err, "List during a slot migration")
	require.Len(t, got.infos, 1)
	require.Equal(t, name, got.infos[0].Name)
	require.True(t, got.infos[0].Held())
	require.NoError(t, m.Unlock(lctx))
}
