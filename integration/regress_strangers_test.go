package integration

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/rlock"
)

// Regression tests of issue 21's defects ("ready for strangers") in the
// library: each failed on the code before its fix.

// TestStrangersOptionsBounded (defect 11): options that would make the
// client spin, fail every Unlock or block a free lock for a year are
// refused with ErrInvalidOptions, and the message names the bound.
func TestStrangersOptionsBounded(t *testing.T) {
	rc := redisClient(t, topologies()[0])
	for name, tc := range map[string]struct {
		opts  rlock.Options
		bound string
	}{
		"1ns watchdog interval": {rlock.Options{WatchdogInterval: time.Nanosecond}, "MinInterval"},
		"1ns release timeout":   {rlock.Options{ReleaseTimeout: time.Nanosecond}, "MinReleaseTimeout"},
		"year handoff window":   {rlock.Options{HandoffWindow: rlock.MaxLease}, "MaxHandoffWindow"},
		"huge renew batch":      {rlock.Options{RenewBatchSize: 1 << 30}, "MaxBatchSize"},
		"long prefix":           {rlock.Options{Prefix: strings.Repeat("p", 257)}, "MaxPrefixLen"},
		"invalid UTF-8 prefix":  {rlock.Options{Prefix: "app\xff"}, "UTF-8"},
	} {
		t.Run(name, func(t *testing.T) {
			c, err := rlock.NewClient(rc, tc.opts)
			if err == nil {
				c.Close()
			}
			require.ErrorIs(t, err, rlock.ErrInvalidOptions)
			require.Contains(t, err.Error(), tc.bound)
		})
	}
}
