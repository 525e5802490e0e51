package main

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestVariantsKeepInvariants runs every variant briefly with two sellers
// and two buyers, so that buyers race for listings, and checks that the
// market stays consistent and trade happens.
func TestVariantsKeepInvariants(t *testing.T) {
	rc := newTestClient(t)
	const dur = 300 * time.Millisecond
	for _, name := range variantNames() {
		t.Run(name, func(t *testing.T) {
			cfg, err := config{dur: dur, loads: []load{{2, 2}}}.withDefaults()
			require.NoError(t, err)
			v, _ := variantByName(name)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()

			r, err := runOnce(ctx, rc, cfg, v, load{2, 2})
			require.NoError(t, err)

			assert.Zero(t, r.Errors, "problems: %q", r.Problems)
			assert.Positive(t, r.Bought)
			assert.GreaterOrEqual(t, r.Listed, r.Bought)
			assert.GreaterOrEqual(t, r.DurationS, dur.Seconds())
			// A waiter whose wake-up was lost sleeps out the holder's lease
			// (10s) and holds the run up: the run must end well before.
			assert.Less(t, r.DurationS, 5.0, "a lost wake-up kept a waiter until its TTL")
			assert.Positive(t, r.P50BuyUS)
			assert.GreaterOrEqual(t, r.P99BuyUS, r.P50BuyUS)
			assert.Equal(t, name, r.Variant)
		})
	}
}

// TestRunPrintsJSON goes through the command's own entry point: flags, an
// existing Redis via -addr, and -json output with one object per load.
func TestRunPrintsJSON(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run([]string{"-addr", testAddr, "-dur", "100ms", "-variants", "latchkey-item", "-json"}, &stdout, &stderr)
	require.Equal(t, 0, code, "stderr: %s", stderr.String())

	var got []result
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &got), "stdout: %s", stdout.String())
	require.Len(t, got, len(defaultLoads))
	for i, r := range got {
		assert.Equal(t, "latchkey-item", r.Variant)
		assert.Equal(t, defaultLoads[i], load{r.Sellers, r.Buyers})
		assert.Zero(t, r.Errors)
	}
}

func TestRunRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-variants", "optimistic"},
		{"-dur", "0s"},
		{"-pick", "0"},
		{"extra"},
	} {
		var stdout, stderr bytes.Buffer
		assert.Equal(t, 2, run(args, &stdout, &stderr), "args %q", args)
		assert.Contains(t, stderr.String(), "bad configuration", "args %q", args)
		assert.Empty(t, stdout.String())
	}
	var stdout, stderr bytes.Buffer
	assert.Equal(t, 1, run([]string{"-addr", "10.1.2.3:6379"}, &stdout, &stderr))
	assert.Contains(t, stderr.String(), "loopback")
}
