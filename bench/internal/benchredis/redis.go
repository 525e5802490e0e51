// Package benchredis is the Redis the benchmark commands run against: a
// redis-server process they start on loopback, or a loopback -addr, and the
// window over which they read Redis' CPU time and command counts.
package benchredis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/redis/rueidis"

	"github.com/latchkey/latchkey/internal/redistest"
)

// startTimeout bounds starting the redis-server process.
const startTimeout = time.Minute

// ErrNotLoopback reports an -addr that could be someone's real server.
var ErrNotLoopback = errors.New("not a loopback address")

// Get returns the address of the Redis to use, a description of it,
// and how to let go of it: the -addr server, or a redis-server process it
// starts on 127.0.0.1 without persistence.
func Get(ctx context.Context, addr string) (string, string, func() error, error) {
	if addr != "" {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return "", "", nil, fmt.Errorf("-addr %q is not host:port: %w", addr, err)
		}
		// The benchmarks run FLUSHALL and CONFIG RESETSTAT: refuse anything
		// that could be a shared server. Names other than localhost are
		// not resolved, since DNS could point them anywhere.
		if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return "", "", nil, fmt.Errorf("-addr %q: %w; the benchmark flushes the server, so it only uses a Redis on 127.0.0.1, ::1 or localhost", addr, ErrNotLoopback)
		}
		return addr, "Redis at " + addr + " (-addr)", func() error { return nil }, nil
	}
	sctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	srv, err := redistest.StartProcess(sctx)
	if err != nil {
		return "", "", nil, fmt.Errorf("starting redis-server: %w", err)
	}
	return srv.Addr, "redis-server process on loopback (--save \"\" --appendonly no)", srv.Close, nil
}

// Connect opens the harness's own connection, used for FLUSHALL, CONFIG
// RESETSTAT and INFO only.
func Connect(addr string) (rueidis.Client, error) {
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	if err != nil {
		return nil, fmt.Errorf("connecting to Redis at %s: %w", addr, err)
	}
	return rc, nil
}

// Flush empties the server, so that a run starts from no keys.
func Flush(ctx context.Context, rc rueidis.Client) error {
	if err := rc.Do(ctx, rc.B().Flushall().Build()).Error(); err != nil {
		return fmt.Errorf("FLUSHALL: %w", err)
	}
	return nil
}
