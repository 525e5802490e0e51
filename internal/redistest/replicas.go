package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// DefaultNodeTimeout is cluster-node-timeout for StartClusterWith's nodes
// (the Redis default is 15 s). A killed master is suspected (PFAIL) after
// one node timeout, marked FAIL once a majority of masters agree through
// gossip, and its replica starts an election 0.5-1 s later: about 3-4 s from
// kill -9 to a promoted replica. Lower would be quicker but lets a node
// stalled by a loaded 2-core machine running -race tests be failed over
// by mistake; 2 s keeps that out of reach.
const DefaultNodeTimeout = 2 * time.Second

// haTimeout bounds each wait of the replica, failover, migration and
// Sentinel helpers: several node timeouts and elections, with slack for a
// loaded machine.
const haTimeout = 45 * time.Second

// haPollInterval is how often those waits look again; shorter than the
// cluster's own 200 ms so measured failover times are not mostly polling.
const haPollInterval = 50 * time.Millisecond

// ClusterOptions describes a Cluster for StartClusterWith.
type ClusterOptions struct {
	// Masters is how many masters split the 16384 slots evenly (1..100).
	Masters int
	// ReplicasPerMaster is how many replicas each master gets (0..10).
	ReplicasPerMaster int
	// NodeTimeout is cluster-node-timeout; 0 means DefaultNodeTimeout.
	NodeTimeout time.Duration
}

// StartClusterWithReplicas is StartClusterWith with the default node
// timeout: masters masters with the slots split evenly, each with
// replicasPerMaster replicas.
func StartClusterWithReplicas(ctx context.Context, masters, replicasPerMaster int) (*Cluster, error) {
	return StartClusterWith(ctx, ClusterOptions{Masters: masters, ReplicasPerMaster: replicasPerMaster})
}

// StartClusterWith starts a Redis Cluster of redis-server processes on
// 127.0.0.1 with replicas, for failover and slot-migration tests. Addrs
// holds the masters at start-up, in slot order, and ReplicaAddrs their
// replicas; after a failover or migration ask Shards, MasterOf or
// ReplicasOf for the current map.
//
// It returns once every node reports cluster_state:ok, all nodes agree on
// who serves which slots and replicates whom, and every replica's link to
// its master is up (the initial sync is done).
//
// Besides the node timeout, nodes run with:
//   - cluster-replica-validity-factor 0: a replica may always be promoted,
//     however long it was cut off, so forced failovers are never refused;
//   - cluster-allow-replica-migration no: replicas stay with the master
//     they were given, so the map only changes when a test changes it;
//   - repl-diskless-sync with no delay: a (re)attached replica syncs at
//     once instead of after Redis's default 5 s delay.
//
// ctx bounds start-up only.
func StartClusterWith(ctx context.Context, opts ClusterOptions) (*Cluster, error) {
	if opts.Masters < 1 || opts.Masters > 100 {
		return nil, fmt.Errorf("redistest: StartClusterWith needs 1..100 masters, got %d", opts.Masters)
	}
	if opts.ReplicasPerMaster < 0 || opts.ReplicasPerMaster > 10 {
		return nil, fmt.Errorf("redistest: StartClusterWith needs 0..10 replicas per master, got %d", opts.ReplicasPerMaster)
	}
	if opts.NodeTimeout == 0 {
		opts.NodeTimeout = DefaultNodeTimeout
	}
	if opts.NodeTimeout < 100*time.Millisecond {
		return nil, fmt.Errorf("redistest: NodeTimeout %s is too small (at least 100ms)", opts.NodeTimeout)
	}
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	total := opts.Masters * (1 + opts.ReplicasPerMaster)
	ports, err := clusterPorts(total)
	if err != nil {
		return nil, err
	}
	c := &Cluster{
		dead:        map[string]bool{},
		nodeTimeout: opts.NodeTimeout,
		nodeArgs: []string{
			"--cluster-node-timeout", strconv.FormatInt(opts.NodeTimeout.Milliseconds(), 10),
			"--cluster-replica-validity-factor", "0",
			"--cluster-allow-replica-migration", "no",
			"--repl-diskless-sync", "yes",
			"--repl-diskless-sync-delay", "0",
		},
	}
	ok := false
	defer func() {
		if !ok {
			c.Close()
		}
	}()
	for i := range total {
		p, err := startClusterNode(ctx, bin, ports[i], c.nodeArgs...)
		if err != nil {
			return nil, err
		}
		c.procs = append(c.procs, p)
	}
	all := c.allAddrs()
	c.Addrs = all[:opts.Masters]
	for i := range opts.Masters {
		var rs []string
		for r := range opts.ReplicasPerMaster {
			rs = append(rs, all[opts.Masters+i*opts.ReplicasPerMaster+r])
		}
		c.ReplicaAddrs = append(c.ReplicaAddrs, rs)
	}

	for i, addr := range c.Addrs {
		lo, hi := i*totalSlots/opts.Masters, (i+1)*totalSlots/opts.Masters-1
		if _, err := command(ctx, addr, "CLUSTER", "ADDSLOTSRANGE", strconv.Itoa(lo), strconv.Itoa(hi)); err != nil {
			return nil, fmt.Errorf("redistest: assigning slots %d-%d to %s (needs Redis >= 7.0): %w", lo, hi, addr, err)
		}
	}
	// Distinct epochs up front, as in StartCluster.
	for i, addr := range all {
		if _, err := command(ctx, addr, "CLUSTER", "SET-CONFIG-EPOCH", strconv.Itoa(i+1)); err != nil {
			return nil, fmt.Errorf("redistest: setting config epoch on %s: %w", addr, err)
		}
	}
	for _, addr := range all[1:] {
		host, port, _ := net.SplitHostPort(addr)
		if _, err := command(ctx, all[0], "CLUSTER", "MEET", host, port); err != nil {
			return nil, fmt.Errorf("redistest: CLUSTER MEET %s from %s: %w", addr, all[0], err)
		}
	}
	for i, master := range c.Addrs {
		id, err := nodeID(ctx, master)
		if err != nil {
			return nil, err
		}
		for _, r := range c.ReplicaAddrs[i] {
			if err := replicate(ctx, r, id); err != nil {
				return nil, err
			}
		}
	}
	err = c.settle(ctx, "start-up", func(view []nodeEntry) string {
		for i, m := range c.Addrs {
			me, _ := byAddr(view, m)
			for _, r := range c.ReplicaAddrs[i] {
				if e, _ := byAddr(view, r); e.masterID != me.id {
					return fmt.Sprintf("%s is not yet a replica of %s", r, m)
				}
			}
		}
		return ""
	})
	if err != nil {
		return nil, err
	}
	ok = true
	return c, nil
}

// nodeID returns a node's cluster id.
func nodeID(ctx context.Context, addr string) (string, error) {
	v, err := command(ctx, addr, "CLUSTER", "MYID")
	if err != nil {
		return "", fmt.Errorf("redistest: CLUSTER MYID on %s: %w", addr, err)
	}
	s, _ := v.(string)
	return s, nil
}

// replicate makes addr a replica of the master with id, retrying while addr
// has not heard of that master through the gossip yet.
func replicate(ctx context.Context, addr, id string) error {
	return poll(ctx, fmt.Sprintf("%s to replicate %s", addr, id), func() (string, error) {
		_, err := command(ctx, addr, "CLUSTER", "REPLICATE", id)
		var re redisError
		if errors.As(err, &re) && strings.Contains(string(re), "Unknown node") {
			return err.Error(), nil
		}
		return "", err
	})
}

// poll calls check every haPollInterval until it reports no problem ("")
// or an error, for at most haTimeout. what names the wait in the error.
func poll(ctx context.Context, what string, check func() (problem string, err error)) error {
	ctx, cancel := context.WithTimeout(ctx, haTimeout)
	defer cancel()
	tick := time.NewTicker(haPollInterval)
	defer tick.Stop()
	for {
		problem, err := check()
		if err != nil {
			return err
		}
		if problem == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("redistest: waiting for %s: still %s: %w", what, problem, ctx.Err())
		case <-tick.C:
		}
	}
}

// allAddrs lists every node started, dead or alive, in start order.
func (c *Cluster) allAddrs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, len(c.procs))
	for i, p := range c.procs {
		out[i] = p.addr
	}
	return out
}

// NodeAddrs lists every node that is running, masters and replicas, in
// start order: the most robust seed list for a cluster client.
func (c *Cluster) NodeAddrs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return running(c.procs, c.dead)
}

// running lists the addresses of procs that are not dead.
func running(procs []*redisProcess, dead map[string]bool) []string {
	var out []string
	for _, p := range procs {
		if !dead[p.addr] {
			out = append(out, p.addr)
		}
	}
	return out
}

// proc returns the process serving addr.
func (c *Cluster) proc(addr string) (*redisProcess, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.procs {
		if p.addr == addr {
			return p, nil
		}
	}
	return nil, fmt.Errorf("redistest: %s is not a node of this cluster", addr)
}

// settle waits until the live nodes agree and are healthy (see
// settledProblem) and extra, given the first live node's view, reports no
// problem either.
func (c *Cluster) settle(ctx context.Context, what string, extra func(view []nodeEntry) string) error {
	err := poll(ctx, "the cluster to settle after "+what, func() (string, error) {
		view, problem := c.settledProblem(ctx)
		if problem == "" && extra != nil {
			problem = extra(view)
		}
		return problem, nil
	})
	if err != nil {
		return fmt.Errorf("%w\n%s", err, c.failoverLog())
	}
	return nil
}

// failoverLog quotes what each node logged last about failures and
// elections, to explain a failover that did not happen.
func (c *Cluster) failoverLog() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b strings.Builder
	for _, p := range c.procs {
		log, _ := os.ReadFile(p.logPath)
		var lines []string
		for _, l := range strings.Split(string(log), "\n") {
			if strings.Contains(l, "ailover") || strings.Contains(l, "FAIL") || strings.Contains(l, "lection") {
				lines = append(lines, l)
			}
		}
		fmt.Fprintf(&b, "%s (dead: %v):\n  %s\n", p.addr, c.dead[p.addr], strings.Join(lines[max(0, len(lines)-6):], "\n  "))
	}
	return b.String()
}

// Settle waits until every running node reports cluster_state:ok, all of
// them agree on the masters, their slots and their replicas, the live
// masters serve all 16384 slots, and every replica's link to its master is
// up. The failover and migration helpers end with it; call it after
// changing the cluster by other means.
func (c *Cluster) Settle(ctx context.Context) error {
	return c.settle(ctx, "Settle", nil)
}

// settledProblem returns why the cluster is not settled, or "" and the
// first live node's view.
func (c *Cluster) settledProblem(ctx context.Context) ([]nodeEntry, string) {
	live := c.NodeAddrs()
	var first []nodeEntry
	var firstSig string
	for _, addr := range live {
		v, err := command(ctx, addr, "CLUSTER", "INFO")
		if err != nil {
			return nil, fmt.Sprintf("%s: CLUSTER INFO: %v", addr, err)
		}
		info := parseInfo(fmt.Sprint(v))
		if info["cluster_state"] != "ok" {
			return nil, fmt.Sprintf("%s: cluster_state:%s", addr, info["cluster_state"])
		}
		view, err := clusterNodes(ctx, addr)
		if err != nil {
			return nil, err.Error()
		}
		sig, problem := viewSignature(view, live)
		if problem != "" {
			return nil, fmt.Sprintf("%s sees %s", addr, problem)
		}
		if first == nil {
			first, firstSig = view, sig
		} else if sig != firstSig {
			return nil, fmt.Sprintf("%s and %s disagree:\n%s\nvs\n%s", live[0], addr, firstSig, sig)
		}
		if problem := replicaLinkProblem(ctx, addr, view); problem != "" {
			return nil, problem
		}
	}
	return first, ""
}

// viewSignature summarises what a view says of the live nodes (role,
// master, slots) so views can be compared, and checks the view is
// healthy: every live node known and connected, all slots on live masters.
func viewSignature(view []nodeEntry, live []string) (string, string) {
	var lines []string
	served := 0
	for _, addr := range live {
		e, ok := byAddr(view, addr)
		if !ok {
			return "", "no node " + addr
		}
		if !e.healthy() {
			return "", fmt.Sprintf("%s as %v, link connected=%v", addr, e.flags, e.linkUp)
		}
		role := "master"
		if !e.master() {
			m, ok := byID(view, e.masterID)
			if !ok {
				return "", fmt.Sprintf("%s replicating unknown %s", addr, e.masterID)
			}
			role = "replica of " + m.addr
		}
		var slots []string
		for _, r := range e.slots {
			slots = append(slots, r.String())
			served += r.End - r.Start + 1
		}
		lines = append(lines, fmt.Sprintf("%s %s %s", addr, role, strings.Join(slots, ",")))
	}
	if served != totalSlots {
		return "", fmt.Sprintf("%d of %d slots on live masters", served, totalSlots)
	}
	return strings.Join(lines, "\n"), ""
}

// replicaLinkProblem checks that the node at addr agrees with view on its
// role and, as a replica, on its master, and that its replication link is
// up.
func replicaLinkProblem(ctx context.Context, addr string, view []nodeEntry) string {
	me, _ := byAddr(view, addr)
	if !me.master() {
		m, _ := byID(view, me.masterID)
		return replicaProblem(ctx, addr, m.addr)
	}
	v, err := command(ctx, addr, "INFO", "replication")
	if err != nil {
		return fmt.Sprintf("%s: INFO replication: %v", addr, err)
	}
	if role := parseInfo(fmt.Sprint(v))["role"]; role != "master" {
		return fmt.Sprintf("%s: role:%s", addr, role)
	}
	return ""
}

// replicaProblem returns "" when the node at addr says it replicates
// master with the link up, else what it says instead.
func replicaProblem(ctx context.Context, addr, master string) string {
	v, err := command(ctx, addr, "INFO", "replication")
	if err != nil {
		return fmt.Sprintf("%s: INFO replication: %v", addr, err)
	}
	info := parseInfo(fmt.Sprint(v))
	if got := net.JoinHostPort(info["master_host"], info["master_port"]); info["role"] != "slave" || got != master {
		return fmt.Sprintf("%s: role:%s of %s, want a replica of %s", addr, info["role"], got, master)
	}
	if info["master_link_status"] != "up" {
		return fmt.Sprintf("%s: master_link_status:%s", addr, info["master_link_status"])
	}
	return ""
}

// Shards returns the masters, their slots and their replicas as a running
// node sees them, sorted by first slot. After a helper of this package
// returned, every node sees the same.
func (c *Cluster) Shards(ctx context.Context) ([]Shard, error) {
	var errs []error
	for _, addr := range c.NodeAddrs() {
		view, err := clusterNodes(ctx, addr)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		return shardsOf(view), nil
	}
	return nil, fmt.Errorf("redistest: no node answered: %w", errors.Join(errs...))
}

// MasterOf returns the address of the master serving slot.
func (c *Cluster) MasterOf(ctx context.Context, slot int) (string, error) {
	shards, err := c.Shards(ctx)
	if err != nil {
		return "", err
	}
	for _, sh := range shards {
		if slices.ContainsFunc(sh.Slots, func(r SlotRange) bool { return r.Contains(slot) }) {
			return sh.Master, nil
		}
	}
	return "", fmt.Errorf("redistest: no master serves slot %d", slot)
}

// OtherMaster returns the master serving slot and another master, to move
// the slot to.
func (c *Cluster) OtherMaster(ctx context.Context, slot int) (from, to string, err error) {
	if from, err = c.MasterOf(ctx, slot); err != nil {
		return "", "", err
	}
	for _, addr := range c.Addrs {
		if addr != from {
			return from, addr, nil
		}
	}
	return "", "", fmt.Errorf("redistest: no master but %s", from)
}

// MasterOfKey returns the address of the master serving key's slot.
func (c *Cluster) MasterOfKey(ctx context.Context, key string) (string, error) {
	return c.MasterOf(ctx, SlotOf(key))
}

// ReplicasOf returns the replicas of the master at masterAddr, sorted.
func (c *Cluster) ReplicasOf(ctx context.Context, masterAddr string) ([]string, error) {
	shard, err := c.shardOf(ctx, masterAddr)
	if err != nil {
		return nil, err
	}
	return shard.Replicas, nil
}

// shardOf returns the shard whose master is masterAddr.
func (c *Cluster) shardOf(ctx context.Context, masterAddr string) (Shard, error) {
	shards, err := c.Shards(ctx)
	if err != nil {
		return Shard{}, err
	}
	for _, sh := range shards {
		if sh.Master == masterAddr {
			return sh, nil
		}
	}
	return Shard{}, fmt.Errorf("redistest: %s is not a master of the cluster (masters: %v)", masterAddr, shards)
}
