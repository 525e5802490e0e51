package rlock_test

import (
	"os"
	"testing"

	"github.com/latchkey/latchkey/internal/redistest"
)

// redisAddr is the Redis the examples talk to, started by TestMain. In your
// program it is wherever your Redis is.
var redisAddr string

// TestMain gets a real Redis from the harness; RunTests checks for leaked
// goroutines with goleak once it is closed.
func TestMain(m *testing.M) {
	os.Exit(redistest.RunTests(m, "rlock", false, func(e redistest.Env) { redisAddr = e.Standalone.Addr }, nil))
}
