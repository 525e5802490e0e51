package integration

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/rlock"
)

// TestRegressSyncTimeoutUnderReleaseTimeout: SyncReplicas' WAIT fits in
// ReleaseTimeout, which bounds a release and its WAIT together. The default
// WAIT was 1 s whatever ReleaseTimeout, so with a replica that did not
// acknowledge, a release of 300 ms ran out mid-WAIT: Unlock returned
// "context deadline exceeded" instead of ErrNotReplicated (it had
// released), and the outer Unlock of a re-entered hold failed settling the
// inner one and left the lock held until the watchdog gave up.
func TestRegressSyncTimeoutUnderReleaseTimeout(t *testing.T) {
	ctx := context.Background()
	tp, replicaPID := primaryWithReplica(t)
	c := lockClient(t, tp, rlock.Options{ReleaseTimeout: 300 * time.Millisecond, SyncReplicas: rlock.SyncReplicas{Replicas: 1}})
	rc := redisClient(t, tp)
	m := c.Mutex(lockName(t))
	// A server's first release spends a round on NOSCRIPT, WAIT included,
	// before the script's: too much for this ReleaseTimeout whatever the
	// WAIT's. Not this test's matter: load the release script first.
	warm, err := m.Lock(ctx)
	require.NoError(t, err)
	require.NoError(t, m.Unlock(warm))

	outer, err := m.Lock(ctx)
	require.NoError(t, err)
	inner, err := m.Lock(outer)
	require.NoError(t, err)
	require.NoError(t, syscall.Kill(replicaPID, syscall.SIGSTOP))
	t.Cleanup(func() { syscall.Kill(replicaPID, syscall.SIGCONT) })
	assert.ErrorIs(t, m.Unlock(inner), rlock.ErrNotReplicated, "the inner Unlock")
	require.ErrorIs(t, m.Unlock(outer), rlock.ErrNotReplicated, "the outer Unlock")
	require.False(t, exists(t, rc, m.Key()), "the lock was not released")
	require.NoError(t, syscall.Kill(replicaPID, syscall.SIGCONT))
}

// TestRegressSyncFirstReleaseInTime: with SyncReplicas, a server's first
// release (its script not loaded: NOSCRIPT, then EVAL) still ends within
// ReleaseTimeout, as ErrNotReplicated when the replica does not answer.
// Each round's WAIT took the whole SyncReplicas.Timeout (and Redis ends a
// WAIT up to 100ms late), so the EVAL's round outlived ReleaseTimeout and
// Unlock returned the context's deadline, not the replication verdict.
func TestRegressSyncFirstReleaseInTime(t *testing.T) {
	ctx := context.Background()
	tp, replicaPID := primaryWithReplica(t)
	c := lockClient(t, tp, rlock.Options{ReleaseTimeout: 600 * time.Millisecond, SyncReplicas: rlock.SyncReplicas{Replicas: 1, Timeout: 300 * time.Millisecond}})
	rc := redisClient(t, tp)
	m := c.Mutex(lockName(t))
	outer, err := m.Lock(ctx)
	require.NoError(t, err)
	inner, err := m.Lock(outer)
	require.NoError(t, err)
	require.NoError(t, syscall.Kill(replicaPID, syscall.SIGSTOP))
	t.Cleanup(func() { syscall.Kill(replicaPID, syscall.SIGCONT) })
	require.NoError(t, rc.Do(ctx, rc.B().ScriptFlush().Build()).Error())
	assert.ErrorIs(t, m.Unlock(inner), rlock.ErrNotReplicated, "the inner Unlock")
	require.ErrorIs(t, m.Unlock(outer), rlock.ErrNotReplicated, "the outer Unlock")
	require.False(t, exists(t, rc, m.Key()), "the lock was not released")
	require.NoError(t, syscall.Kill(replicaPID, syscall.SIGCONT))
}

// TestRegressSyncTryWithinDeadline: with SyncReplicas and a replica that
// does not acknowledge, a TryLock ends near its context's deadline, whether
// it was refused or granted (the grant is given back). Each try's WAIT took
// the whole SyncReplicas.Timeout (1s), since the call is awaited past the
// caller's end: a TryLock given 300ms returned after more than a second.
func TestRegressSyncTryWithinDeadline(t *testing.T) {
	const (
		timeout = time.Second // SyncReplicas.Timeout's default
		given   = 300 * time.Millisecond
	)
	tp := topologies()[0] // standalone, no replica
	holder := lockClient(t, tp, rlock.Options{})
	c := lockClient(t, tp, rlock.Options{SyncReplicas: rlock.SyncReplicas{Replicas: 1, Timeout: timeout}})
	name := lockName(t)
	try := func() (bool, error, time.Duration) {
		ctx, cancel := context.WithTimeout(context.Background(), given)
		defer cancel()
		start := time.Now()
		lctx, ok, err := c.Mutex(name).TryLock(ctx)
		if ok {
			require.NoError(t, c.Mutex(name).Unlock(lctx))
		}
		return ok, err, time.Since(start)
	}
	held, err := holder.Mutex(name).Lock(context.Background())
	require.NoError(t, err)
	ok, err, took := try()
	require.NoError(t, err)
	require.False(t, ok)
	// A bound, not a timing claim: the call used to take the whole timeout.
	require.Less(t, took, timeout, "a refused TryLock given %v", given)
	require.NoError(t, holder.Mutex(name).Unlock(held))

	ok, err, took = try()
	require.False(t, ok, "granted with no replica to acknowledge")
	require.Error(t, err)
	require.Less(t, took, timeout, "a granted, unacknowledged TryLock given %v (%v)", given, err)
	require.False(t, exists(t, redisClient(t, tp), c.Mutex(name).Key()), "the unacknowledged grant was not given back")
}

// TestRegressRedissonShardedRefusedByNewClient: ProtocolRedisson with
// PubSubSharded off a Cluster, where Redisson publishes with PUBLISH, is
// refused by NewClient. It was accepted, and then every Mutex, Inspect and
// ForceUnlock call of the Client failed with ErrInvalidOptions.
func TestRegressRedissonShardedRefusedByNewClient(t *testing.T) {
	c, err := rlock.NewClient(redisClient(t, topologies()[0]), rlock.Options{Protocol: rlock.ProtocolRedisson, PubSub: rlock.PubSubSharded})
	if err == nil {
		require.NoError(t, c.Close())
	}
	require.ErrorIs(t, err, rlock.ErrInvalidOptions)
}

// TestRegressShortWatchdogTimeoutNamed: a WatchdogTimeout below
// 3 × watchdog.MinInterval, with no WatchdogInterval, is refused naming
// WatchdogTimeout. The refusal named only the default interval
// ("Interval 6.666ms must be at least MinInterval"), a field never set.
func TestRegressShortWatchdogTimeoutNamed(t *testing.T) {
	c, err := rlock.NewClient(redisClient(t, topologies()[0]), rlock.Options{WatchdogTimeout: 20 * time.Millisecond})
	if err == nil {
		require.NoError(t, c.Close())
	}
	require.ErrorIs(t, err, rlock.ErrInvalidOptions)
	require.ErrorContains(t, err, "WatchdogTimeout 20ms")
	require.ErrorContains(t, err, "unless WatchdogInterval is set")
}
