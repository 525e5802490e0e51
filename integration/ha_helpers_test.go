package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/internal/redistest"
	"github.com/latchkey/latchkey/rlock"
)

// The topologies for failover and slot-migration tests are started per
// test, not in TestMain: each costs a few seconds, and a test that fails a
// master over leaves the topology changed for whoever comes next.

// replicatedCluster starts a Cluster of 3 masters with a replica each for
// t alone, closed when t ends, and its topology (seeded with every node,
// so a client still finds the cluster after a master was killed).
func replicatedCluster(t *testing.T) (*redistest.Cluster, topology) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := redistest.StartClusterWithReplicas(ctx, 3, 1)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, cl.Close()) })
	return cl, topology{name: "cluster-replicas", addrs: cl.NodeAddrs(), cluster: true}
}

// sentinelSetup starts a master, 2 replicas and 3 Sentinels for t alone,
// closed when t ends, and its topology (clients go through the Sentinels).
func sentinelSetup(t *testing.T) (*redistest.SentinelSetup, topology) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := redistest.StartSentinel(ctx, 2, 3)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s, topology{name: "sentinel", addrs: s.SentinelAddrs, masterSet: s.MasterName}
}

// TestHATopologies proves the helpers above give working topologies: a
// lock is taken and released through each.
func TestHATopologies(t *testing.T) {
	for name, start := range map[string]func(*testing.T) topology{
		"cluster-replicas": func(t *testing.T) topology { _, tp := replicatedCluster(t); return tp },
		"sentinel":         func(t *testing.T) topology { _, tp := sentinelSetup(t); return tp },
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			m := lockClient(t, start(t), rlock.Options{}).Mutex(lockName(t))
			held, err := m.Lock(ctx)
			require.NoError(t, err)
			require.NoError(t, m.Unlock(held))
		})
	}
}
