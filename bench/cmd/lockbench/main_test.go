package main

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain doubles as the worker: the end-to-end test's lockbench
// re-executes this test binary, with workerEnv set, as its workers.
func TestMain(m *testing.M) {
	if p := os.Getenv(workerEnv); p != "" {
		os.Exit(workerMain(p))
	}
	goleak.VerifyTestMain(m)
}
