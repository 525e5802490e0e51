package integration

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/rlock"
	"github.com/latchkey/latchkey/watchdog"
)

// TestRegressSyncReplicasRenewalFindsGone: with SyncReplicas, a renewal
// that finds the lock gone reports it gone (watchdog.ErrGone) at once,
// whether or not its WAIT was acknowledged, and a lock lost to renewals
// the replicas did not acknowledge says so (ErrNotReplicated in its
// cause). Before the fix a failed WAIT failed the whole renew call, so
// the deletion was noticed only at the local deadline, as ErrExpired, and
// that cause only quoted the NotReplicatedError, so it matched nothing.
func TestRegressSyncReplicasRenewalFindsGone(t *testing.T) {
	ctx := context.Background()
	tp, replicaPID := primaryWithReplica(t)
	const interval = 300 * time.Millisecond
	c := lockClient(t, tp, rlock.Options{WatchdogTimeout: 3 * time.Second, WatchdogInterval: interval,
		SyncReplicas: rlock.SyncReplicas{Replicas: 1, Timeout: 100 * time.Millisecond}})
	rc := redisClient(t, tp)
	t.Cleanup(func() { syscall.Kill(replicaPID, syscall.SIGCONT) })

	// Deleted while the replica is paused: gone at the next renewal.
	m := c.Mutex(lockName(t))
	lctx, err := m.Lock(ctx)
	require.NoError(t, err)
	renewed := c.WatchdogStats().Renewed
	awaitCond(t, 5*time.Second, "an acknowledged renewal", func() bool { return c.WatchdogStats().Renewed > renewed })
	require.NoError(t, syscall.Kill(replicaPID, syscall.SIGSTOP))
	require.NoError(t, rc.Do(ctx, rc.B().Del().Key(m.Key()).Build()).Error())
	deleted := time.Now()
	requireLost(t, lctx, 5*time.Second, "the lock deleted while the replica was paused")
	took := time.Since(deleted)
	require.ErrorIs(t, context.Cause(lctx), watchdog.ErrGone, "after %v", took)
	require.Less(t, took, 3*interval, "the loss waited for the local deadline")
	require.ErrorIs(t, m.Unlock(lctx), rlock.ErrNotHeld)
	require.NoError(t, syscall.Kill(replicaPID, syscall.SIGCONT))

	// Renewals not acknowledged until the local deadline: ErrNotReplicated.
	m2 := c.Mutex(lockName(t) + "-unacked")
	awaitCond(t, 20*time.Second, "a grant the replica acknowledges", func() bool {
		lctx, err = m2.Lock(ctx)
		return err == nil
	})
	require.NoError(t, syscall.Kill(replicaPID, syscall.SIGSTOP))
	requireLost(t, lctx, 10*time.Second, "the lock whose renewals were not acknowledged")
	require.ErrorIs(t, context.Cause(lctx), watchdog.ErrExpired)
	require.ErrorIs(t, context.Cause(lctx), rlock.ErrNotReplicated)
	require.ErrorIs(t, m2.Unlock(lctx), rlock.ErrNotHeld)
	require.NoError(t, syscall.Kill(replicaPID, syscall.SIGCONT))
}
