package integration

import (
	"context"
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
