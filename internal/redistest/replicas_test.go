package redistest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"
)

// startReplicated starts 3 masters with a replica each, closed at the end
// of the test.
func startReplicated(t *testing.T, ctx context.Context) *Cluster {
	t.Helper()
	start := time.Now()
	cl, err := StartClusterWithReplicas(ctx, 3, 1)
	require.NoError(t, err)
	t.Logf("StartClusterWithReplicas(3, 1) took %s", time.Since(start))
	t.Cleanup(func() { require.NoError(t, cl.Close()) })
	return cl
}

// rawGet runs GET on one node, without following redirections.
func rawGet(ctx context.Context, addr, key string) (any, error) {
	return command(ctx, addr, "GET", key)
}

// setAcked writes key on the master serving it and waits (WAIT 1) until a
// replica has it, so a forced failover cannot lose it.
func setAcked(t *testing.T, ctx context.Context, cl *Cluster, key, value string) string {
	t.Helper()
	master, err := cl.MasterOfKey(ctx, key)
	require.NoError(t, err)
	rc, err := dialRESP(ctx, master, nil)
	require.NoError(t, err)
	defer rc.Close()
	_, err = rc.do(ctx, "SET", key, value)
	require.NoError(t, err)
	n, err := rc.do(ctx, "WAIT", "1", "5000")
	require.NoError(t, err)
	require.Equal(t, int64(1), n, "no replica acknowledged %s", key)
	return master
}

// eventuallyGet reads key through a cluster client, retrying while the
// client catches up with a changed topology.
func eventuallyGet(t *testing.T, ctx context.Context, c rueidis.Client, key string) string {
	t.Helper()
	var got string
	var err error
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if got, err = c.Do(ctx, c.B().Get().Key(key).Build()).ToString(); err == nil {
			return got
		}
		time.Sleep(100 * time.Millisecond)
	}
	require.NoError(t, err, "GET %s through the cluster client", key)
	return got
}

func TestSlotOf(t *testing.T) {
	ctx := context.Background()
	s, err := StartProcess(ctx, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf")
	require.NoError(t, err)
	defer s.Close()
	for _, k := range []string{"", "a", "foo", "123456789", "{user1000}.following", "foo{}{bar}", "foo{{bar}}zap", "{}x", "latchkey:{lock}:fence", "ü"} {
		want, err := command(ctx, s.Addr, "CLUSTER", "KEYSLOT", k)
		require.NoError(t, err)
		require.Equal(t, want, int64(SlotOf(k)), "slot of %q", k)
	}
	require.Equal(t, 12739, SlotOf("123456789")%totalSlots) // CRC16/XMODEM check value 0x31C3
}

func TestClusterWithReplicas(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cl := startReplicated(t, ctx)

	require.Len(t, cl.Addrs, 3)
	require.Len(t, cl.ReplicaAddrs, 3)
	require.Len(t, cl.NodeAddrs(), 6)
	shards, err := cl.Shards(ctx)
	require.NoError(t, err)
	require.Len(t, shards, 3)
	for i, sh := range shards {
		require.Equal(t, cl.Addrs[i], sh.Master)
		require.Equal(t, cl.ReplicaAddrs[i], sh.Replicas)
		require.Equal(t, []SlotRange{{i * totalSlots / 3, (i+1)*totalSlots/3 - 1}}, sh.Slots)
		for _, r := range sh.Replicas {
			v, err := command(ctx, r, "ROLE")
			require.NoError(t, err)
			role := v.([]any)
			require.Equal(t, "slave", role[0])
			require.Equal(t, "connected", role[3], "replica %s link", r)
		}
	}
	got, err := cl.MasterOf(ctx, 0)
	require.NoError(t, err)
	require.Equal(t, cl.Addrs[0], got)
	got, err = cl.MasterOf(ctx, totalSlots-1)
	require.NoError(t, err)
	require.Equal(t, cl.Addrs[2], got)

	c := newClient(t, cl.NodeAddrs()...)
	defer c.Close()

	t.Run("FailoverForce", func(t *testing.T) {
		const key = "before-force"
		old := setAcked(t, ctx, cl, key, "kept")
		start := time.Now()
		promoted, err := cl.FailoverForce(ctx, old)
		require.NoError(t, err)
		t.Logf("FailoverForce took %s", time.Since(start))
		require.NotEqual(t, old, promoted)

		v, err := rawGet(ctx, promoted, key)
		require.NoError(t, err)
		require.Equal(t, "kept", v)
		replicas, err := cl.ReplicasOf(ctx, promoted)
		require.NoError(t, err)
		require.Equal(t, []string{old}, replicas, "the old master follows the new one")
		require.Equal(t, "kept", eventuallyGet(t, ctx, c, key))

		start = time.Now()
		back, err := cl.FailoverGraceful(ctx, promoted)
		require.NoError(t, err)
		t.Logf("FailoverGraceful took %s", time.Since(start))
		require.Equal(t, old, back)
		v, err = rawGet(ctx, old, key)
		require.NoError(t, err)
		require.Equal(t, "kept", v)
	})

	t.Run("MigrateSlot", func(t *testing.T) {
		const key = "{migrate-me}k"
		slot := SlotOf(key)
		require.NoError(t, c.Do(ctx, c.B().Set().Key(key).Value("moved").Build()).Error())
		require.Equal(t, "moved", eventuallyGet(t, ctx, c, key)) // the client now routes slot to from
		from, err := cl.MasterOf(ctx, slot)
		require.NoError(t, err)
		to := otherMaster(t, ctx, cl, from)

		start := time.Now()
		require.NoError(t, cl.MigrateSlot(ctx, slot, to))
		t.Logf("MigrateSlot (1 key) took %s", time.Since(start))
		got, err := cl.MasterOf(ctx, slot)
		require.NoError(t, err)
		require.Equal(t, to, got)
		_, err = rawGet(ctx, from, key)
		require.ErrorContains(t, err, fmt.Sprintf("MOVED %d %s", slot, to))
		// The client's slot map is stale: it gets MOVED and follows it.
		got, err = c.Do(ctx, c.B().Get().Key(key).Build()).ToString()
		require.NoError(t, err)
		require.Equal(t, "moved", got)
	})

	t.Run("BeginMigration", func(t *testing.T) {
		keys := []string{"{half}a", "{half}b", "{half}c"}
		slot := SlotOf(keys[0])
		for _, k := range keys {
			require.NoError(t, c.Do(ctx, c.B().Set().Key(k).Value(k).Build()).Error())
		}
		from, err := cl.MasterOf(ctx, slot)
		require.NoError(t, err)
		to := otherMaster(t, ctx, cl, from)

		m, err := cl.BeginMigration(ctx, slot, to)
		require.NoError(t, err)
		require.Equal(t, Migration{Slot: slot, From: from, To: to}, Migration{Slot: m.Slot, From: m.From, To: m.To})
		n, err := m.MoveKeys(ctx, 1)
		require.NoError(t, err)
		require.Equal(t, 1, n)

		var movedKey string
		for _, k := range keys {
			v, err := rawGet(ctx, from, k)
			if err != nil {
				require.ErrorContains(t, err, fmt.Sprintf("ASK %d %s", slot, to))
				movedKey = k
				continue
			}
			require.Equal(t, k, v, "a key not moved yet is still served by the source")
		}
		require.NotEmpty(t, movedKey)
		// The slot is still the source's: the target redirects plain
		// commands back to it.
		_, err = rawGet(ctx, to, movedKey)
		require.ErrorContains(t, err, "MOVED")
		got, err := cl.MasterOf(ctx, slot)
		require.NoError(t, err)
		require.Equal(t, from, got)
		// A cluster client follows -ASK to the target.
		for _, k := range keys {
			require.Equal(t, k, eventuallyGet(t, ctx, c, k))
		}

		start := time.Now()
		require.NoError(t, m.Finish(ctx))
		t.Logf("Migration.Finish (2 keys) took %s", time.Since(start))
		got, err = cl.MasterOf(ctx, slot)
		require.NoError(t, err)
		require.Equal(t, to, got)
		for _, k := range keys {
			require.Equal(t, k, eventuallyGet(t, ctx, c, k))
		}
	})

	t.Run("KillMaster", func(t *testing.T) {
		const key = "before-kill"
		old := setAcked(t, ctx, cl, key, "survives")
		start := time.Now()
		promoted, err := cl.KillMaster(ctx, old)
		require.NoError(t, err)
		t.Logf("KillMaster (kill -9 to promotion, settled) took %s", time.Since(start))
		require.NotEqual(t, old, promoted)
		require.NotContains(t, cl.NodeAddrs(), old)
		_, err = rawGet(ctx, old, key)
		require.Error(t, err, "the killed master stays dead")
		v, err := rawGet(ctx, promoted, key)
		require.NoError(t, err)
		require.Equal(t, "survives", v)
		require.Equal(t, "survives", eventuallyGet(t, ctx, c, key))

		start = time.Now()
		require.NoError(t, cl.Restart(ctx, old))
		t.Logf("Restart of the killed master took %s", time.Since(start))
		replicas, err := cl.ReplicasOf(ctx, promoted)
		require.NoError(t, err)
		require.Equal(t, []string{old}, replicas, "the restarted master rejoins as a replica")
		v, err = rawGet(ctx, promoted, key)
		require.NoError(t, err)
		require.Equal(t, "survives", v)
	})
}

// otherMaster returns a master other than not.
func otherMaster(t *testing.T, ctx context.Context, cl *Cluster, not string) string {
	t.Helper()
	shards, err := cl.Shards(ctx)
	require.NoError(t, err)
	i := slices.IndexFunc(shards, func(sh Shard) bool { return sh.Master != not })
	require.GreaterOrEqual(t, i, 0)
	return shards[i].Master
}

func TestClusterWithReplicasRejectsBadOptions(t *testing.T) {
	ctx := context.Background()
	for _, o := range []ClusterOptions{{Masters: 0}, {Masters: 3, ReplicasPerMaster: -1}, {Masters: 3, NodeTimeout: time.Millisecond}} {
		_, err := StartClusterWith(ctx, o)
		require.Error(t, err, "%+v", o)
	}
	require.Empty(t, redisChildren(t))
}

func TestParseNodes(t *testing.T) {
	out := strings.Join([]string{
		"aaa 127.0.0.1:7001@17001 myself,master - 0 0 1 connected 0-100 200 [300->-bbb]",
		"bbb 127.0.0.1:7002@17002,host master - 0 0 2 connected 101-199 [300-<-aaa]",
		"ccc 127.0.0.1:7003@17003 slave,fail aaa 0 0 1 disconnected",
		"",
	}, "\n")
	view := parseNodes(out)
	require.Len(t, view, 3)
	require.Equal(t, []SlotRange{{0, 100}, {200, 200}}, view[0].slots)
	require.Equal(t, "127.0.0.1:7002", view[1].addr)
	require.Equal(t, "aaa", view[2].masterID)
	require.False(t, view[2].healthy())
	shards := shardsOf(view)
	require.Equal(t, []Shard{
		{Master: "127.0.0.1:7001", MasterID: "aaa", Slots: []SlotRange{{0, 100}, {200, 200}}},
		{Master: "127.0.0.1:7002", MasterID: "bbb", Slots: []SlotRange{{101, 199}}},
	}, shards)
}

// The kill and restart helpers work on a StartCluster cluster too: a
// master back within the node timeout keeps its slots, without its data.
func TestKillNodeAndRestartWithoutReplicas(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := StartCluster(ctx, 2)
	require.NoError(t, err)
	defer cl.Close()
	const key = "gone-after-restart"
	master, err := cl.MasterOfKey(ctx, key)
	require.NoError(t, err)
	_, err = command(ctx, master, "SET", key, "1")
	require.NoError(t, err)

	require.NoError(t, cl.KillNode(master))
	require.Len(t, cl.NodeAddrs(), 1)
	require.Error(t, cl.Restart(ctx, cl.NodeAddrs()[0]), "a running node cannot be restarted")
	require.NoError(t, cl.Restart(ctx, master))
	require.Len(t, cl.NodeAddrs(), 2)
	got, err := cl.MasterOfKey(ctx, key)
	require.NoError(t, err)
	require.Equal(t, master, got)
	v, err := rawGet(ctx, master, key)
	require.NoError(t, err)
	require.Nil(t, v)
	require.NoError(t, cl.Close())
	require.Empty(t, redisChildren(t))
}
