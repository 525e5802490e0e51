package integration

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/rlock"
)

// Regression tests of the instruments of several Clients sharing one
// MeterProvider, as the Clients of one process do (2026-12 metrics review).

// TestRegressWatchdogCountersMonotonic: latchkey.watchdog.renewals never
// goes back when one of the Clients recording it closes. It was an
// observable counter read from each Client's watchdog totals, so closing a
// Client took its renewals out of the sum, and Prometheus read the drop as
// a counter reset (rate() of the "Renewals failing" alert can then fire
// with no failure).
func TestRegressWatchdogCountersMonotonic(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tp := topologies()[0]
	r, _, observed := observe(t)
	opts := observed(rlock.Options{WatchdogTimeout: 600 * time.Millisecond, WatchdogInterval: 200 * time.Millisecond})
	a := lockClient(t, tp, opts)
	lockClient(t, tp, opts) // b: records on the same provider, and stays open

	m := a.Mutex(lockName(t))
	lctx := mustLock(t, ctx, m)
	awaitCond(t, 10*time.Second, "two renewals", func() bool { return a.WatchdogStats().Renewed >= 2 })
	require.NoError(t, m.Unlock(lctx))
	before := r.value("latchkey.watchdog.renewals")
	require.GreaterOrEqual(t, before, int64(2))
	failures := r.value("latchkey.watchdog.renewal.failures")

	require.NoError(t, a.Close())
	require.GreaterOrEqual(t, r.value("latchkey.watchdog.renewals"), before, "renewals after a's Close")
	require.GreaterOrEqual(t, r.value("latchkey.watchdog.renewal.failures"), failures, "renewal failures after a's Close")
}

// TestRegressSubscriptionsGaugeTwoClients: latchkey.notify.subscriptions
// counts the channels of every Client recording on the provider, as it
// promises the channels "this process" has. It was an observable gauge,
// of which the SDK keeps one observation per attribute set: two Clients,
// each with a waiter on a lock of its own, read 1.
func TestRegressSubscriptionsGaugeTwoClients(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		r, _, observed := observe(t)
		holder := lockClient(t, tp, rlock.Options{})
		attA, attB := newAttempts(), newAttempts()
		a := lockClient(t, tp, attA.options(observed(rlock.Options{})))
		b := lockClient(t, tp, attB.options(observed(rlock.Options{})))
		nameA, nameB := lockName(t), lockName(t)

		// Each Client holds a lock, and waits on another one.
		ha := mustLock(t, ctx, a.Mutex(nameA+"-own"))
		hb := mustLock(t, ctx, b.Mutex(nameB+"-own"))
		require.EqualValues(t, 2, r.value("latchkey.watchdog.leases"), "a's lease and b's")

		heldA := mustLock(t, ctx, holder.Mutex(nameA))
		heldB := mustLock(t, ctx, holder.Mutex(nameB))
		// The waiters report on errs, read once they are done; should the
		// test fail first, they are cancelled and awaited, not left behind.
		var wg sync.WaitGroup
		defer func() { cancel(); wg.Wait() }()
		errs := make(chan error, 2)
		waiter := func(c *rlock.Client, name string) func() {
			return func() {
				lctx, err := c.Mutex(name).Lock(ctx)
				if err == nil {
					err = c.Mutex(name).Unlock(lctx)
				}
				errs <- err
			}
		}
		blockWaiters(t, attA, nameA, 1, &wg, waiter(a, nameA))
		blockWaiters(t, attB, nameB, 1, &wg, waiter(b, nameB))
		require.EqualValues(t, 2, r.value("latchkey.notify.subscriptions"), "a's channel and b's")
		require.Zero(t, r.value("latchkey.notify.lingering"))

		require.NoError(t, holder.Mutex(nameA).Unlock(heldA))
		require.NoError(t, holder.Mutex(nameB).Unlock(heldB))
		wg.Wait()
		require.NoError(t, <-errs)
		require.NoError(t, <-errs)
		// Both channels linger (5 s) with no waiter left.
		require.EqualValues(t, 2, r.value("latchkey.notify.lingering"), "a's channel and b's, lingering")
		require.NoError(t, a.Mutex(nameA+"-own").Unlock(ha))
		require.NoError(t, b.Mutex(nameB+"-own").Unlock(hb))
		requireNoLeftovers(t, tp, nameA, nameB, nameA+"-own", nameB+"-own")
	})
}
