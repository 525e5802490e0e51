package rlock

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

// evictCheckTimeout bounds NewClient's CONFIG GET calls: a slow Redis must
// not delay a program's start for a warning.
const evictCheckTimeout = 500 * time.Millisecond

// warnIfEvicting logs a Warn for every maxmemory-policy of rc's nodes other
// than noeviction (evictionRisk says why). It reads the policy only when
// there is a logger to tell, and ignores every error: a user without
// CONFIG, a managed Redis that renames it, or a Redis that is down is not
// worth failing NewClient for.
func warnIfEvicting(rc rueidis.Client, log *slog.Logger) {
	if log == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), evictCheckTimeout)
	defer cancel()
	nodes := rc.Nodes() // every Cluster node; the one server otherwise
	addrs := make([]string, 0, len(nodes))
	for addr := range nodes {
		addrs = append(addrs, addr)
	}
	slices.Sort(addrs)
	byPolicy := map[string][]string{}
	for _, addr := range addrs {
		n := nodes[addr]
		kv, err := n.Do(ctx, n.B().ConfigGet().Parameter("maxmemory-policy").Build()).AsStrMap()
		if policy := kv["maxmemory-policy"]; err == nil && policy != "" && policy != "noeviction" {
			byPolicy[policy] = append(byPolicy[policy], addr)
		}
	}
	for policy, at := range byPolicy {
		log.Warn("latchkey: Redis maxmemory-policy "+policy+" may evict lock keys; set noeviction",
			"maxmemory-policy", policy, "nodes", strings.Join(at, ","),
			"risk", evictionRisk(policy))
	}
}

// evictionRisk says what a policy can do to latchkey's keys.
func evictionRisk(policy string) string {
	if strings.HasPrefix(policy, "volatile-") {
		return "lock keys have a TTL and are evicted first: a lock can be granted to two holders"
	}
	return "any key may be evicted: a lock can be granted twice, and a fence counter lost, so fencing tokens start again"
}
