package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Cluster is a Redis Cluster of redis-server processes on 127.0.0.1, for
// testing lock behaviour across slots and sharded pub/sub.
type Cluster struct {
	// Addrs has one "127.0.0.1:port" per master, in slot order: Addrs[i]
	// serves the i-th contiguous n-th of the slot space. Any of them works as
	// a cluster client's seed address.
	Addrs []string
	// ReplicaAddrs[i] holds the replicas Addrs[i] was started with
	// (StartClusterWith); nil for StartCluster. Failovers change who is
	// master: see Shards for the current map.
	ReplicaAddrs [][]string

	// mu guards procs and dead, which KillMaster and Restart change.
	mu    sync.Mutex
	procs []*redisProcess
	dead  map[string]bool // addrs of nodes killed and not restarted
	// nodeArgs are the extra options every node was started with, for
	// Restart (StartClusterWith's timeouts and failover settings).
	nodeArgs []string
	// nodeTimeout is cluster-node-timeout (0 for StartCluster), and
	// elections when a failover of each shard (by its slots) last ended:
	// see awaitVoteWindow.
	nodeTimeout time.Duration
	elections   map[string]time.Time

	closeOnce sync.Once
	closeErr  error
}

// Close kills every node and removes their directories. It is safe to call
// more than once and returns the first result every time.
func (c *Cluster) Close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		var errs []error
		for _, p := range c.procs {
			if err := p.close(); err != nil {
				errs = append(errs, err)
			}
		}
		c.closeErr = errors.Join(errs...)
	})
	return c.closeErr
}

// clusterReadyTimeout bounds the wait for the gossip to converge. Redis holds
// a fresh master out of cluster_state:ok for about 2 s after start-up, and
// gossip takes a few more heartbeats; the rest is slack for loaded CI.
const clusterReadyTimeout = 30 * time.Second

// clusterPollInterval keeps convergence detection quick without hammering
// the nodes.
const clusterPollInterval = 200 * time.Millisecond

// totalSlots is fixed by the Redis Cluster protocol.
const totalSlots = 16384

// busPortOffset is Redis's default distance between a node's client port and
// its cluster-bus port, used when cluster-port is not set.
const busPortOffset = 10000

// StartCluster starts a Redis Cluster of n masters without replicas, each a
// redis-server process on 127.0.0.1, with the 16384 slots split evenly. It
// returns once every node reports cluster_state:ok and sees all n masters
// connected, so the first client command cannot hit a half-formed cluster.
//
// Processes rather than containers are used because cluster nodes tell
// clients their own address; containers would announce ports that only exist
// inside Docker. ctx bounds start-up only.
func StartCluster(ctx context.Context, n int) (*Cluster, error) {
	if n < 1 || n > 1000 {
		return nil, fmt.Errorf("redistest: StartCluster needs 1..1000 masters, got %d", n)
	}
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	ports, err := clusterPorts(n)
	if err != nil {
		return nil, err
	}
	c := &Cluster{}
	ok := false
	defer func() {
		if !ok {
			c.Close()
		}
	}()

	for i := range n {
		p, err := startClusterNode(ctx, bin, ports[i])
		if err != nil {
			return nil, err
		}
		c.procs = append(c.procs, p)
		c.Addrs = append(c.Addrs, p.addr)
	}

	for i, addr := range c.Addrs {
		lo, hi := i*totalSlots/n, (i+1)*totalSlots/n-1
		if _, err := command(ctx, addr, "CLUSTER", "ADDSLOTSRANGE", strconv.Itoa(lo), strconv.Itoa(hi)); err != nil {
			return nil, fmt.Errorf("redistest: assigning slots %d-%d to %s (needs Redis >= 7.0): %w", lo, hi, addr, err)
		}
		// Distinct epochs up front spare the nodes the epoch-collision
		// resolution dance, which would delay convergence.
		if _, err := command(ctx, addr, "CLUSTER", "SET-CONFIG-EPOCH", strconv.Itoa(i+1)); err != nil {
			return nil, fmt.Errorf("redistest: setting config epoch on %s: %w", addr, err)
		}
	}
	for _, addr := range c.Addrs[1:] {
		host, port, _ := net.SplitHostPort(addr)
		if _, err := command(ctx, c.Addrs[0], "CLUSTER", "MEET", host, port); err != nil {
			return nil, fmt.Errorf("redistest: CLUSTER MEET %s from %s: %w", addr, c.Addrs[0], err)
		}
	}
	if err := waitClusterReady(ctx, c.Addrs); err != nil {
		return nil, err
	}
	ok = true
	return c, nil
}

// startClusterNode starts one cluster-enabled node, moving to another port
// pair if the chosen one was taken in the meantime.
func startClusterNode(ctx context.Context, bin string, port int, extraArgs ...string) (*redisProcess, error) {
	var lastErr error
	for range maxPortAttempts {
		p, err := startRedisProcess(ctx, bin, port, nil, clusterNodeArgs(extraArgs))
		if err == nil {
			return p, nil
		}
		lastErr = err
		if !errors.Is(err, ErrPortInUse) || ctx.Err() != nil {
			break
		}
		ps, err := clusterPorts(1)
		if err != nil {
			return nil, err
		}
		port = ps[0]
	}
	return nil, lastErr
}

// clusterNodeArgs are the options of a cluster node, then extraArgs.
func clusterNodeArgs(extraArgs []string) []string {
	args := []string{
		"--cluster-enabled", "yes",
		// Relative to --dir, i.e. the node's own temp dir, so nodes and
		// concurrent test binaries never share a state file.
		"--cluster-config-file", "nodes.conf",
		// Pinned so nodes never advertise a non-loopback interface that
		// clients or other nodes could not (or must not) use.
		"--cluster-announce-ip", "127.0.0.1",
	}
	return append(args, extraArgs...)
}

// clusterPorts finds n distinct client ports whose bus ports are free too.
// All candidates stay bound until the end so the same port cannot be handed
// out twice.
func clusterPorts(n int) ([]int, error) {
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	var ports []int
	for tries := 0; len(ports) < n; tries++ {
		if tries > 50*n {
			return nil, fmt.Errorf("redistest: could not find %d free loopback port pairs (port and port+%d); free some ports or widen net.ipv4.ip_local_port_range", n, busPortOffset)
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("redistest: cannot find a free loopback port (is the loopback interface up?): %w", err)
		}
		held = append(held, l)
		port := l.Addr().(*net.TCPAddr).Port
		if port+busPortOffset > 65535 {
			continue
		}
		bus, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port+busPortOffset)))
		if err != nil {
			continue
		}
		held = append(held, bus)
		ports = append(ports, port)
	}
	return ports, nil
}

// waitClusterReady polls every node until all agree the cluster is healthy.
func waitClusterReady(ctx context.Context, addrs []string) error {
	ctx, cancel := context.WithTimeout(ctx, clusterReadyTimeout)
	defer cancel()
	tick := time.NewTicker(clusterPollInterval)
	defer tick.Stop()
	for {
		problem := clusterProblem(ctx, addrs)
		if problem == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("redistest: cluster %v not ready within %s (%s); check the node logs or raise the timeout: %w",
				addrs, clusterReadyTimeout, problem, ctx.Err())
		case <-tick.C:
		}
	}
}

// clusterProblem returns why the cluster is not ready yet, or "" if it is.
func clusterProblem(ctx context.Context, addrs []string) string {
	for _, addr := range addrs {
		v, err := command(ctx, addr, "CLUSTER", "INFO")
		if err != nil {
			return fmt.Sprintf("%s: CLUSTER INFO: %v", addr, err)
		}
		info := parseInfo(fmt.Sprint(v))
		if info["cluster_state"] != "ok" {
			return fmt.Sprintf("%s: cluster_state:%s", addr, info["cluster_state"])
		}
		if info["cluster_slots_ok"] != strconv.Itoa(totalSlots) {
			return fmt.Sprintf("%s: cluster_slots_ok:%s", addr, info["cluster_slots_ok"])
		}
		v, err = command(ctx, addr, "CLUSTER", "NODES")
		if err != nil {
			return fmt.Sprintf("%s: CLUSTER NODES: %v", addr, err)
		}
		if got := connectedMasters(fmt.Sprint(v)); got != len(addrs) {
			return fmt.Sprintf("%s: sees %d of %d masters connected", addr, got, len(addrs))
		}
	}
	return ""
}

// parseInfo parses "key:value" lines as returned by INFO and CLUSTER INFO.
func parseInfo(s string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			m[k] = v
		}
	}
	return m
}

// connectedMasters counts healthy masters in CLUSTER NODES output. Nodes
// still in handshake or suspected failing do not count: a client routed to
// them would get errors.
func connectedMasters(nodes string) int {
	count := 0
	for _, line := range strings.Split(nodes, "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		flags := strings.Split(f[2], ",")
		master, bad := false, false
		for _, fl := range flags {
			switch fl {
			case "master":
				master = true
			case "fail", "fail?", "handshake", "noaddr":
				bad = true
			}
		}
		if master && !bad && f[7] == "connected" {
			count++
		}
	}
	return count
}
