package redistest

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"time"
)

// FailoverForce promotes a replica of the master at masterAddr with
// CLUSTER FAILOVER FORCE: the replica does not wait for the master to
// agree or for replication to catch up, so writes the replica had not
// received are lost (a test that needs a key to survive writes it with
// WAIT first). It returns the promoted replica's address once every node
// agrees it serves the old master's slots, the old master has become its
// replica, and the cluster has settled (see Settle).
func (c *Cluster) FailoverForce(ctx context.Context, masterAddr string) (string, error) {
	return c.failover(ctx, masterAddr, "FORCE")
}

// FailoverGraceful is FailoverForce with a plain CLUSTER FAILOVER: the
// master stops taking writes, the replica catches up with it and only then
// takes over, so no acknowledged write is lost.
func (c *Cluster) FailoverGraceful(ctx context.Context, masterAddr string) (string, error) {
	return c.failover(ctx, masterAddr, "")
}

func (c *Cluster) failover(ctx context.Context, masterAddr, mode string) (string, error) {
	shard, err := c.shardOf(ctx, masterAddr)
	if err != nil {
		return "", err
	}
	replica, err := c.liveReplica(shard)
	if err != nil {
		return "", err
	}
	if err := c.awaitVoteWindow(ctx, shard); err != nil {
		return "", err
	}
	args := []string{"CLUSTER", "FAILOVER"}
	if mode != "" {
		args = append(args, mode)
	}
	if _, err := command(ctx, replica, args...); err != nil {
		return "", fmt.Errorf("redistest: %v on %s: %w", args, replica, err)
	}
	err = c.settle(ctx, fmt.Sprintf("%v on %s", args, replica), func(view []nodeEntry) string {
		if problem := servesShard(view, replica, shard); problem != "" {
			return problem
		}
		if old, _ := byAddr(view, masterAddr); old.master() {
			return masterAddr + " is still a master"
		}
		return ""
	})
	if err != nil {
		return "", err
	}
	c.electionEnded(shard)
	return replica, nil
}

// awaitVoteWindow waits until two node timeouts have passed since the
// last failover of shard ended. A master votes for the replicas of one
// master at most once in that window, so a failover right after another of
// the same shard (a test failing a master over and then killing the one
// promoted) can find no majority, and the cluster then stayed down longer
// than the helpers wait (seen once on CI).
func (c *Cluster) awaitVoteWindow(ctx context.Context, shard Shard) error {
	c.mu.Lock()
	until := c.elections[fmt.Sprint(shard.Slots)].Add(2*c.nodeTimeout + 500*time.Millisecond)
	c.mu.Unlock()
	d := time.Until(until)
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *Cluster) electionEnded(shard Shard) {
	c.mu.Lock()
	if c.elections == nil {
		c.elections = make(map[string]time.Time)
	}
	c.elections[fmt.Sprint(shard.Slots)] = time.Now()
	c.mu.Unlock()
}

// servesShard reports how view differs from addr being a master with
// shard's slots, "" if it does not.
func servesShard(view []nodeEntry, addr string, shard Shard) string {
	e, _ := byAddr(view, addr)
	if !e.master() || !slices.Equal(e.slots, shard.Slots) {
		return fmt.Sprintf("%s not yet master of %v (flags %v, slots %v)", addr, shard.Slots, e.flags, e.slots)
	}
	return ""
}

// liveReplica picks the first running replica of shard.
func (c *Cluster) liveReplica(shard Shard) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range shard.Replicas {
		if !c.dead[r] {
			return r, nil
		}
	}
	return "", fmt.Errorf("redistest: master %s has no running replica to promote", shard.Master)
}

// KillMaster kills the master at masterAddr with SIGKILL, as kill -9 would,
// and waits until the cluster has promoted one of its replicas (about one
// node timeout, then a majority of masters agreeing on the failure, then
// an election: see DefaultNodeTimeout) and settled without it. It returns
// the promoted replica's address. The old master stays dead: its address
// refuses connections until Restart. Writes its replica had not received
// are lost.
func (c *Cluster) KillMaster(ctx context.Context, masterAddr string) (string, error) {
	shard, err := c.shardOf(ctx, masterAddr)
	if err != nil {
		return "", err
	}
	if _, err := c.liveReplica(shard); err != nil {
		return "", err
	}
	if err := c.awaitVoteWindow(ctx, shard); err != nil {
		return "", err
	}
	if err := c.KillNode(masterAddr); err != nil {
		return "", err
	}
	var promoted string
	err = c.settle(ctx, "kill -9 of "+masterAddr, func(view []nodeEntry) string {
		for _, r := range shard.Replicas {
			if servesShard(view, r, shard) == "" {
				promoted = r
				return ""
			}
		}
		return fmt.Sprintf("no replica of %s serves %v yet", masterAddr, shard.Slots)
	})
	if err != nil {
		return "", err
	}
	c.electionEnded(shard)
	return promoted, nil
}

// KillNode kills the node at addr with SIGKILL and returns without waiting
// for the cluster to react; the helpers that wait (Settle among them) then
// leave it out. Its directory, with nodes.conf, stays for Restart.
func (c *Cluster) KillNode(addr string) error {
	p, err := c.proc(addr)
	if err != nil {
		return err
	}
	if err := p.kill(); err != nil {
		return err
	}
	c.mu.Lock()
	if c.dead == nil { // a cluster from StartCluster
		c.dead = map[string]bool{}
	}
	c.dead[addr] = true
	c.mu.Unlock()
	return nil
}

// Restart starts a killed node again on its old address and with its old
// nodes.conf, as after a crash: it rejoins with its old identity and, if
// it was a master that was failed over, learns of the newer configuration
// and becomes a replica of the master that took its slots. It has none of
// its old data (there is no persistence) until it syncs from its master.
// It returns once the cluster has settled with the node in it.
func (c *Cluster) Restart(ctx context.Context, addr string) error {
	c.mu.Lock()
	dead := c.dead[addr]
	c.mu.Unlock()
	if !dead {
		return fmt.Errorf("redistest: %s is running; KillNode or KillMaster it first", addr)
	}
	old, err := c.proc(addr)
	if err != nil {
		return err
	}
	bin, err := Binary()
	if err != nil {
		return err
	}
	_, portStr, _ := net.SplitHostPort(addr)
	port, _ := strconv.Atoi(portStr)
	p, err := startRedisProcessIn(ctx, bin, port, procSetup{dir: old.dir}, clusterNodeArgs(c.nodeArgs))
	c.mu.Lock()
	if err == nil {
		delete(c.dead, addr)
		c.procs[slices.Index(c.procs, old)] = p
	} else {
		// The failed start removed the directory, which Close would
		// otherwise remove.
		c.procs = slices.DeleteFunc(c.procs, func(q *redisProcess) bool { return q == old })
	}
	c.mu.Unlock()
	if err != nil {
		return err
	}
	return c.settle(ctx, "restart of "+addr, nil)
}
