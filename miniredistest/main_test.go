package miniredistest

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if a test leaves a goroutine behind: a Client that
// was not closed, or a miniredis server that was not stopped.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
