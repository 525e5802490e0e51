package rlock_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/rlock"
	"github.com/latchkey/latchkey/watchdog"
)

// TestExtremeOptionValues: durations at the int64 limits are rejected with
// ErrInvalidOptions, not accepted to overflow later (a WatchdogTimeout sent
// as a negative PEXPIRE, a spin backoff doubling past MaxInt64); the largest
// documented values are accepted.
func TestExtremeOptionValues(t *testing.T) {
	const huge = time.Duration(math.MaxInt64)
	for name, tc := range map[string]struct {
		opts rlock.Options
		ok   bool
	}{
		"overflowing watchdog timeout":  {rlock.Options{WatchdogTimeout: huge}, false},
		"watchdog timeout past limit":   {rlock.Options{WatchdogTimeout: rlock.MaxLease + 1}, false},
		"watchdog timeout at limit":     {rlock.Options{WatchdogTimeout: rlock.MaxLease}, true},
		"overflowing watchdog interval": {rlock.Options{WatchdogInterval: huge}, false},
		"most negative timeout":         {rlock.Options{WatchdogTimeout: math.MinInt64}, false},
		"overflowing spin max":          {rlock.Options{SpinBackoffMax: huge}, false},
		"spin max at limit":             {rlock.Options{SpinBackoffMax: rlock.MaxLease}, true},
		"overflowing spin min":          {rlock.Options{SpinBackoffMin: huge}, false},
		"most negative spin min":        {rlock.Options{SpinBackoffMin: math.MinInt64}, false},
		"overflowing release timeout":   {rlock.Options{ReleaseTimeout: huge}, true},
		"huge batch":                    {rlock.Options{RenewBatchSize: math.MaxInt}, false},
		"batch at limit":                {rlock.Options{RenewBatchSize: watchdog.MaxBatchSize}, true},
		"most negative batch":           {rlock.Options{RenewBatchSize: math.MinInt}, false},
	} {
		t.Run(name, func(t *testing.T) {
			c, err := rlock.NewClient(&noIO{}, tc.opts)
			if !tc.ok {
				require.ErrorIs(t, err, rlock.ErrInvalidOptions)
				return
			}
			require.NoError(t, err)
			require.NoError(t, c.Close())
		})
	}
}

// TestExtremeLockDurations complements TestLockOptionsAreCheckedBeforeIO
// for Lock and for the int64 limits.
func TestExtremeLockDurations(t *testing.T) {
	c, _ := newNoIO(t)
	ctx := context.Background()
	for _, m := range []*rlock.Mutex{c.Mutex("ok"), c.SpinMutex("ok")} {
		for _, lease := range []time.Duration{math.MaxInt64, math.MinInt64, 0, -1} {
			_, err := m.Lock(ctx, rlock.WithLease(lease))
			require.ErrorIs(t, err, rlock.ErrInvalidArgument, "Lock with lease %v", lease)
		}
		for _, wait := range []time.Duration{-1, math.MinInt64} {
			_, _, err := m.TryLock(ctx, rlock.WithWait(wait))
			require.ErrorIs(t, err, rlock.ErrInvalidArgument, "TryLock with wait %v", wait)
		}
	}
}
