package integration

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/internal/redistest"
	"github.com/latchkey/latchkey/rlock"
)

// TestRegressWatchdogSlowNode: on a Cluster, a master that stops answering
// delays the renewals of the locks it serves, not those of the locks the
// other masters serve. The watchdog sent a chunk's calls, which mix slots
// of every master, as one request that returned when the slowest node had
// answered, judged every reply by that time and held one of its few
// chunk tokens meanwhile: the locks on healthy masters were lost as late.
// Enough locks are held for a tick to be more chunks than may be out at
// once. Without and with SyncReplicas, whose calls take another path. On
// a Cluster only: a standalone server that stops answering holds every
// lock, and there is nothing to spare.
func TestRegressWatchdogSlowNode(t *testing.T) {
	for _, sync := range []bool{false, true} {
		t.Run(fmt.Sprintf("sync=%v", sync), func(t *testing.T) {
			cl, tp := cluster, topologies()[1]
			opts := rlock.Options{WatchdogTimeout: time.Second}
			if sync {
				cl, tp = replicatedCluster(t)
				opts.SyncReplicas = rlock.SyncReplicas{Replicas: 1, Timeout: 100 * time.Millisecond}
			}
			requireSlowNodeSpared(t, cl, tp, opts)
		})
	}
}

// requireSlowNodeSpared holds locks on every master of cl, pauses the
// writes of one master for a few leases, and requires the locks of the
// others to stay held throughout, and the paused master's to be lost.
func requireSlowNodeSpared(t *testing.T, cl *redistest.Cluster, tp topology, opts rlock.Options) {
	const (
		locks = 400 // over 4 chunks of 64 calls: one lock is one slot, mostly
		pause = 3 * time.Second
	)
	ctx := context.Background()
	shards, err := cl.Shards(ctx)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(shards), 2)
	slow := shards[0].Master
	c := lockClient(t, tp, opts)
	base := lockName(t)
	type held struct {
		m    *rlock.Mutex
		lctx context.Context
	}
	var onSlow, elsewhere []held
	for i := range locks {
		m := c.Mutex(fmt.Sprintf("%s-%d", base, i))
		h := held{m, mustLock(t, ctx, m)}
		if slices.ContainsFunc(shards[0].Slots, func(r redistest.SlotRange) bool { return r.Contains(redistest.SlotOf(m.Key())) }) {
			onSlow = append(onSlow, h)
		} else {
			elsewhere = append(elsewhere, h)
		}
	}
	require.NotEmpty(t, onSlow)
	require.NotEmpty(t, elsewhere)
	// CLIENT PAUSE WRITE holds every script call the master gets until the
	// pause ends, on every connection, as a master that stopped answering
	// would; it still answers the Cluster's own traffic.
	admin, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{slow}, ForceSingleClient: true, DisableCache: true})
	require.NoError(t, err)
	t.Cleanup(admin.Close)
	t.Cleanup(func() { _ = admin.Do(context.Background(), admin.B().ClientUnpause().Build()).Error() })
	require.NoError(t, admin.Do(ctx, admin.B().ClientPause().Timeout(pause.Milliseconds()).Write().Build()).Error())
	paused, unpaused := context.WithTimeout(ctx, pause)
	defer unpaused()

	// Each paused lock's lease runs out while its renewals are held.
	for _, h := range onSlow {
		requireLost(t, h.lctx, pause, "a lock on the paused master to be lost")
	}
	// Over the whole pause (the fault has no end to await but its own),
	// every other lock stays held.
	var wg sync.WaitGroup
	lost := make(chan string, len(elsewhere))
	for _, h := range elsewhere {
		wg.Go(func() {
			select {
			case <-h.lctx.Done():
				lost <- fmt.Sprintf("%s: %v", h.m.Name(), context.Cause(h.lctx))
			case <-paused.Done():
			}
		})
	}
	wg.Wait()
	close(lost)
	var names []string
	for l := range lost {
		names = append(names, l)
	}
	require.Empty(t, names[:min(len(names), 2)], "%d of %d locks on the masters not paused were lost while one master was paused", len(names), len(elsewhere))

	for _, h := range elsewhere {
		require.NoError(t, h.m.Unlock(h.lctx))
	}
	// The lost holds are released in the background once the pause ends.
	rc := redisClient(t, tp)
	for _, h := range onSlow {
		awaitCond(t, 10*time.Second, "the lost lock "+h.m.Name()+" to be released", func() bool { return !exists(t, rc, h.m.Key()) })
	}
}
