package fenced_test

import (
	"os"
	"testing"

	"github.com/latchkey/latchkey/internal/redistest"
)

// The Redis servers the tests and examples use, started by TestMain; in your
// program it is wherever your Redis is.
var (
	redisAddr    string
	clusterAddrs []string
)

// TestMain starts the servers; RunTests ends with a goleak check once they
// are closed.
func TestMain(m *testing.M) {
	os.Exit(redistest.RunTests(m, "fenced", true, func(e redistest.Env) {
		redisAddr, clusterAddrs = e.Standalone.Addr, e.Cluster.Addrs
	}, nil))
}
