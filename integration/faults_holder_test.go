package integration

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/rlock"
)

// Faults of the lock holder's process: paused past its lease, killed.

// faultLease is the watchdog timeout of the fault tests' locks: short, so a
// lease runs out within the test, with renewals every third of it.
const faultLease = time.Second

// faultRunTimeout bounds a fault test's workload.
const faultRunTimeout = time.Minute

// faultCtx is the context of a fault test's workload: it ends with the test,
// or after faultRunTimeout.
func faultCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), faultRunTimeout)
	t.Cleanup(cancel)
	return ctx
}

// TestFaultHolderPaused: a holder stopped (SIGSTOP) past its lease loses the
// lock to others while it cannot know it. When it runs again, the write it
// was about to make is rejected by the fence, its context is cancelled with
// ErrLockLost within a renewal period, and its Unlock reports ErrNotHeld
// without touching the new holder's lock.
func TestFaultHolderPaused(t *testing.T) {
	ctx := faultCtx(t)
	tp := topologies()[0]
	rc := redisClient(t, tp)
	name := lockName(t)
	set := newLockSet(t)
	c1, workers := contenders(t, tp, name, rlock.Options{WatchdogTimeout: faultLease})
	key := c1.Mutex(name).Key()

	h, claimed := startHolder(t, holderConfig{LockAddr: tp.addrs[0], StoreAddr: standalone.Addr, Lock: name, Store: set.name,
		WatchdogTimeout: faultLease, Element: "paused"})
	h.signal(t, syscall.SIGSTOP)
	stopped := time.Now()
	// Its watchdog cannot renew: the lock expires within one lease.
	require.Eventually(t, func() bool { return !exists(t, rc, key) }, 10*faultLease, 5*time.Millisecond, "the paused holder's lock to expire")
	set.run(ctx, workers, 5)
	nextHolder := set.snapshot().FirstAcquired.Sub(stopped)

	// A new holder holds the lock while the paused one wakes up.
	m := c1.Mutex(name)
	lctx := mustLock(t, ctx, m)
	token, err := m.Token(lctx)
	require.NoError(t, err)
	require.Greater(t, token, claimed.Token)
	before := hgetall(t, rc, key)
	h.goAhead(t)
	resumed := time.Now()
	h.signal(t, syscall.SIGCONT)
	done := h.next(t, "done")

	if done.WriteAcked {
		set.ack("paused")
	}
	if done.WriteStale {
		set.record(func(st *lockSetStats) { st.StaleRejected++ })
	}
	require.True(t, done.WriteStale, "the paused holder's late write must be rejected as stale, got %q", done.WriteErr)
	require.True(t, done.LossIsLockLost, "loss cause %q", done.LossCause)
	require.NotZero(t, done.LostAtUnixNano, "no loss signal within %v of resuming", holderLossWait)
	lossSignal := time.Unix(0, done.LostAtUnixNano).Sub(resumed)
	require.Less(t, lossSignal, faultLease/3+time.Second, "the loss signal must come within a renewal period of resuming (plus slack)")
	require.True(t, done.UnlockNotHeld, "Unlock after the loss must report ErrNotHeld, got %q", done.UnlockErr)
	require.Equal(t, before, hgetall(t, rc, key), "the late Unlock changed the new holder's lock")
	require.Equal(t, 1, holdCount(t, lctx, m))
	require.NoError(t, m.Unlock(lctx))

	r := set.report(t, "holder-sigstop")
	r.lossSignal, r.nextHolder = lossSignal, nextHolder
	r.extra = fmt.Sprintf("paused_token=%d new_token=%d loss_cause=%s", claimed.Token, token, lossKind(done))
	r.check(t)
}

// TestFaultHolderKilled: a holder killed with SIGKILL never unlocks; its
// lock expires and a waiter gets in within the lease plus one renewal
// period of the kill (the last renewal was at most a period before it).
func TestFaultHolderKilled(t *testing.T) {
	ctx := faultCtx(t)
	tp := topologies()[0]
	name := lockName(t)
	set := newLockSet(t)
	att := newAttempts()
	_, workers := contenders(t, tp, name, att.options(rlock.Options{WatchdogTimeout: faultLease}))

	h, claimed := startHolder(t, holderConfig{LockAddr: tp.addrs[0], StoreAddr: standalone.Addr, Lock: name, Store: set.name,
		WatchdogTimeout: faultLease, Element: "killed"})
	finished := set.start(ctx, workers, 3)
	// Each worker waits: one per client after finding the lock held, the
	// other behind it in its client's gate.
	await(t, att.reached(waitKey(name), len(workers)), 10*time.Second, "every worker to wait")
	h.signal(t, syscall.SIGKILL)
	killed := time.Now()
	await(t, finished, faultRunTimeout, "the workers to finish")

	nextHolder := set.snapshot().FirstAcquired.Sub(killed)
	require.Positive(t, nextHolder, "a worker got in while the killed holder held the lock")
	require.Less(t, nextHolder, faultLease+faultLease/3+time.Second, "the next holder must get in within a lease and a renewal period of the kill (plus slack)")
	r := set.report(t, "holder-sigkill")
	r.nextHolder = nextHolder
	r.extra = fmt.Sprintf("killed_token=%d", claimed.Token)
	r.check(t)
	require.Equal(t, len(workers)*3, r.stats.Acquisitions)
}

func lossKind(ev holderEvent) string {
	switch {
	case ev.LossIsExpired:
		return "expired"
	case ev.LossIsGone:
		return "gone"
	}
	return "other"
}

func hgetall(t testing.TB, rc rueidis.Client, key string) map[string]string {
	t.Helper()
	m, err := rc.Do(context.Background(), rc.B().Hgetall().Key(key).Build()).AsStrMap()
	require.NoError(t, err)
	return m
}

// lockOwners is a lock hash's {owner -> hold count}: its fields but those
// starting with '#' (the holder record, "#rec").
func lockOwners(t testing.TB, rc rueidis.Client, key string) map[string]string {
	t.Helper()
	m := hgetall(t, rc, key)
	for f := range m {
		if strings.HasPrefix(f, "#") {
			delete(m, f)
		}
	}
	return m
}
