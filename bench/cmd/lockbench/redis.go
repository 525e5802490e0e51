package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/redis/rueidis"

	"github.com/latchkey/latchkey/integration/redistest"
)

// redisStartTimeout bounds starting the redis-server process.
const redisStartTimeout = time.Minute

// ErrNotLoopback reports an -addr that could be someone's real server.
var ErrNotLoopback = errors.New("not a loopback address")

// getRedis returns the address of the Redis to use, a description of it,
// and how to let go of it: the -addr server, or a redis-server process it
// starts on 127.0.0.1 without persistence.
func getRedis(ctx context.Context, addr string) (string, string, func() error, error) {
	if addr != "" {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return "", "", nil, fmt.Errorf("-addr %q is not host:port: %w", addr, err)
		}
		// lockbench runs FLUSHALL and CONFIG RESETSTAT: refuse anything
		// that could be a shared server. Names other than localhost are
		// not resolved, since DNS could point them anywhere.
		if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return "", "", nil, fmt.Errorf("-addr %q: %w; lockbench flushes the server, so it only uses a Redis on 127.0.0.1, ::1 or localhost", addr, ErrNotLoopback)
		}
		return addr, "Redis at " + addr + " (-addr)", func() error { return nil }, nil
	}
	sctx, cancel := context.WithTimeout(ctx, redisStartTimeout)
	defer cancel()
	srv, err := redistest.StartProcess(sctx)
	if err != nil {
		return "", "", nil, fmt.Errorf("starting redis-server: %w", err)
	}
	return srv.Addr, "redis-server process on loopback (--save \"\" --appendonly no)", srv.Close, nil
}

// connect opens the parent's own connection, used for FLUSHALL, CONFIG
// RESETSTAT and INFO only.
func connect(addr string) (rueidis.Client, error) {
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	if err != nil {
		return nil, fmt.Errorf("connecting to Redis at %s: %w", addr, err)
	}
	return rc, nil
}

// flush empties the server, so that a run starts from no keys.
func flush(ctx context.Context, rc rueidis.Client) error {
	if err := rc.Do(ctx, rc.B().Flushall().Build()).Error(); err != nil {
		return fmt.Errorf("FLUSHALL: %w", err)
	}
	return nil
}
