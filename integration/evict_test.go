package integration

import (
	"context"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/rlock"
)

// setPolicy sets maxmemory-policy on the node at addr.
func setPolicy(t *testing.T, addr, policy string) {
	t.Helper()
	admin := nodeClient(t, addr)
	require.NoError(t, admin.Do(context.Background(), admin.B().ConfigSet().ParameterValue().ParameterValue("maxmemory-policy", policy).Build()).Error())
}

// TestEvictionPolicyWarned (issue 21, defect 14): every lock key has a TTL,
// so a volatile-* policy evicts locks first and an allkeys-* one can evict
// the fence counters. NewClient with a Logger reads maxmemory-policy and
// warns, naming the policy, unless it is noeviction; a user that may not
// run CONFIG gets no record and no error.
func TestEvictionPolicyWarned(t *testing.T) {
	srv := ownServer(t) // this test changes the server's configuration
	tp := topology{name: "standalone", addrs: []string{srv.Addr}}
	for _, tc := range []struct {
		policy string
		warn   bool
	}{{"noeviction", false}, {"volatile-lru", true}, {"allkeys-lfu", true}} {
		t.Run(tc.policy, func(t *testing.T) {
			setPolicy(t, srv.Addr, tc.policy)
			logs := &logCapture{}
			lockClient(t, tp, rlock.Options{Logger: slog.New(logs)})
			if tc.warn {
				require.True(t, logs.saw(slog.LevelWarn, "maxmemory-policy "+tc.policy), "no Warn naming %s: %v", tc.policy, logs.all())
			} else {
				require.Empty(t, logs.all())
			}
		})
	}

	t.Run("no CONFIG permission", func(t *testing.T) {
		setPolicy(t, srv.Addr, "volatile-lru")
		admin := nodeClient(t, srv.Addr)
		user := tp
		user.user, user.password = "latchkey-evict-test", "evict-test-secret"
		require.NoError(t, admin.Do(context.Background(), admin.B().Arbitrary(aclSetUser(user.user, user.password, rlock.DefaultPrefix)...).Build()).Error())
		logs := &logCapture{}
		lockClient(t, user, rlock.Options{Logger: slog.New(logs)})
		require.Empty(t, logs.all(), "a refused CONFIG GET is not worth a record")
	})

	t.Run("cluster", func(t *testing.T) {
		// One node of the shared Cluster; maxmemory is 0 there, so the
		// policy changes nothing for the other tests before it is restored.
		addr := topologies()[1].addrs[0]
		setPolicy(t, addr, "volatile-ttl")
		t.Cleanup(func() { setPolicy(t, addr, "noeviction") })
		logs := &logCapture{}
		lockClient(t, topologies()[1], rlock.Options{Logger: slog.New(logs)})
		require.True(t, logs.saw(slog.LevelWarn, "maxmemory-policy volatile-ttl"), "no Warn for the Cluster node: %v", logs.all())
	})
}
