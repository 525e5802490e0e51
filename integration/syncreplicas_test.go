package integration

import (
	"context"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/internal/redistest"
	"github.com/latchkey/latchkey/rlock"
)

// Options.SyncReplicas: WAIT after grants, renewals and releases.

// primaryWithReplica starts a redis-server and a replica of it, both
// private to the test, and returns the primary's topology and the
// replica's process id (to pause it).
func primaryWithReplica(t *testing.T) (topology, int) {
	t.Helper()
	ctx := context.Background()
	primary, err := redistest.StartProcess(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { primary.Close() })
	host, port, err := net.SplitHostPort(primary.Addr)
	require.NoError(t, err)
	replica, err := redistest.StartProcess(ctx, "--replicaof", host, port)
	require.NoError(t, err)
	t.Cleanup(func() { replica.Close() })
	tp := topology{name: "primary+replica", addrs: []string{primary.Addr}}
	rc := redisClient(t, tp)
	awaitCond(t, 20*time.Second, "the replica to be in sync", func() bool {
		info, err := rc.Do(ctx, rc.B().Info().Section("replication").Build()).ToString()
		require.NoError(t, err)
		return strings.Contains(info, "connected_slaves:1") && strings.Contains(info, "state=online")
	})
	rrc := redisClient(t, topology{addrs: []string{replica.Addr}})
	pid, err := redistest.ProcessID(ctx, rrc)
	require.NoError(t, err)
	return tp, pid
}

// TestSyncReplicasRefusedWithoutReplicas: asking for a replica that does
// not exist, every acquire is given back and fails with ErrNotReplicated;
// nothing is left held.
func TestSyncReplicasRefusedWithoutReplicas(t *testing.T) {
	ctx := context.Background()
	tp := topologies()[0]
	c := lockClient(t, tp, rlock.Options{SyncReplicas: rlock.SyncReplicas{Replicas: 1, Timeout: 50 * time.Millisecond}})
	name := lockName(t)
	m := c.Mutex(name)
	_, err := m.Lock(ctx)
	require.ErrorIs(t, err, rlock.ErrNotReplicated)
	_, _, err = m.TryLock(ctx)
	require.ErrorIs(t, err, rlock.ErrNotReplicated)
	_, err = c.RWMutex(name).Lock(ctx)
	require.ErrorIs(t, err, rlock.ErrNotReplicated)
	_, err = c.RWMutex(name).RLock(ctx)
	require.ErrorIs(t, err, rlock.ErrNotReplicated)
	_, err = c.Semaphore(name, 2).Acquire(ctx, 1)
	require.ErrorIs(t, err, rlock.ErrNotReplicated)
	requireNoLeftovers(t, tp, name)

	_, err = rlock.NewClient(redisClient(t, tp), rlock.Options{SyncReplicas: rlock.SyncReplicas{Replicas: -1}})
	require.ErrorIs(t, err, rlock.ErrInvalidOptions)
	_, err = rlock.NewClient(redisClient(t, tp), rlock.Options{WatchdogTimeout: time.Second, SyncReplicas: rlock.SyncReplicas{Replicas: 1, Timeout: time.Second}})
	require.ErrorIs(t, err, rlock.ErrInvalidOptions, "a sync timeout longer than the renewal interval")
}

// TestSyncReplicas: with a live replica every primitive works as without
// the option, and renewals are acknowledged. With the replica paused, a
// new acquire fails with ErrNotReplicated (given back), a held lock's
// renewals count as failed until it is lost, and a release still
// releases but reports ErrNotReplicated.
func TestSyncReplicas(t *testing.T) {
	ctx := context.Background()
	tp, replicaPID := primaryWithReplica(t)
	opts := rlock.Options{WatchdogTimeout: 900 * time.Millisecond, WatchdogInterval: 300 * time.Millisecond,
		SyncReplicas: rlock.SyncReplicas{Replicas: 1, Timeout: 100 * time.Millisecond}}
	c := lockClient(t, tp, opts)
	rc := redisClient(t, tp)
	name := lockName(t)

	m := c.Mutex(name)
	lctx, err := m.Lock(ctx)
	require.NoError(t, err)
	renewed := c.WatchdogStats().Renewed
	awaitCond(t, 5*time.Second, "two acknowledged renewals", func() bool { return c.WatchdogStats().Renewed >= renewed+2 })
	require.NoError(t, lctx.Err())
	rw := c.RWMutex(name)
	rctx, err := rw.RLock(ctx)
	require.NoError(t, err)
	require.NoError(t, rw.RUnlock(rctx))
	sem := c.Semaphore(name, 2)
	pctx, err := sem.Acquire(ctx, 2)
	require.NoError(t, err)
	require.NoError(t, sem.Release(pctx))

	// The replica stops acknowledging.
	failedBefore := c.WatchdogStats().Errors
	require.NoError(t, syscall.Kill(replicaPID, syscall.SIGSTOP))
	t.Cleanup(func() { syscall.Kill(replicaPID, syscall.SIGCONT) })
	_, err = c.Mutex(name + "-other").Lock(ctx)
	require.ErrorIs(t, err, rlock.ErrNotReplicated)
	require.False(t, exists(t, rc, "latchkey:{"+name+"-other}"), "a grant not acknowledged was kept")
	requireLost(t, lctx, 5*time.Second, "the lock whose renewals were not acknowledged")
	require.Greater(t, c.WatchdogStats().Errors, failedBefore, "renewals not acknowledged must count as failed")
	require.ErrorIs(t, m.Unlock(lctx), rlock.ErrNotHeld)

	// A release not acknowledged: it released, and says so.
	require.NoError(t, syscall.Kill(replicaPID, syscall.SIGCONT))
	l2, err := m.Lock(ctx, rlock.WithLease(10*time.Second))
	require.NoError(t, err)
	require.NoError(t, syscall.Kill(replicaPID, syscall.SIGSTOP))
	require.ErrorIs(t, m.Unlock(l2), rlock.ErrNotReplicated)
	require.False(t, exists(t, rc, m.Key()), "the release did not run")
	require.NoError(t, syscall.Kill(replicaPID, syscall.SIGCONT))
	requireNoLeftovers(t, tp, name)
}
