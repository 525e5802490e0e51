package main

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/latchkey/latchkey/internal/childproc"
)

// TestMain doubles as the worker: the end-to-end test's lockbench
// re-executes this test binary, in workerRole, as its workers.
func TestMain(m *testing.M) {
	if childproc.Role() == workerRole {
		os.Exit(workerMain())
	}
	goleak.VerifyTestMain(m)
}
