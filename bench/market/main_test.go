package main

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// testAddr is the redis-server that TestMain starts for the package.
var testAddr string

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

// testMain stops the server before goleak looks, so that its reaper
// goroutine has ended (goleak.VerifyTestMain would exit before deferred
// clean-up could run).
func testMain(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv, err := startRedis(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "market tests:", err)
		return 1
	}
	testAddr = srv.addr
	code := m.Run()
	if err := srv.close(); err != nil {
		fmt.Fprintln(os.Stderr, "market tests:", err)
		code = 1
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "market tests: goroutine leak:", err)
			code = 1
		}
	}
	return code
}

// newTestClient connects to the package's Redis and closes the client when
// the test ends.
func newTestClient(t *testing.T) rueidis.Client {
	t.Helper()
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{testAddr}, DisableCache: true})
	require.NoError(t, err)
	t.Cleanup(rc.Close)
	return rc
}
