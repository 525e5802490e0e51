package main

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// TestMain doubles as a burner: the run below re-executes this test binary
// with burnEnv set.
func TestMain(m *testing.M) {
	if os.Getenv(burnEnv) != "" {
		burn()
	}
	goleak.VerifyTestMain(m)
}

// TestRunKeepsEveryLock: a small run, with a short watchdog and one burner,
// starts and stops everything it uses and finds every lock kept.
func TestRunKeepsEveryLock(t *testing.T) {
	o := options{n: 2000, ticks: 2, burners: 1, lockers: 16, batch: 100, timeout: 1500 * time.Millisecond, interval: 500 * time.Millisecond}
	require.NoError(t, run(t.Context(), o))
}
