package redistest

import (
	"context"
	"fmt"
	"log"
	"net"
	"os"
	"sync"

	"go.uber.org/goleak"
)

// Values of Server.Kind, so callers can report or skip by how Redis was
// obtained (e.g. tests that kill the server only make sense for a process).
const (
	KindEnv     = "env"
	KindDocker  = "docker"
	KindProcess = "process"
)

// Logf reports why a preferred way of starting Redis was skipped (docker
// unreachable, image build failed, ...). Those are not errors because Start
// falls back, but a developer wondering why tests are slow needs to see them.
// Tests may replace it (e.g. with a no-op) before calling Start; it must not
// be changed concurrently with Start.
var Logf func(format string, args ...any) = log.Printf

// GoleakIgnores holds the goleak options that callers checking for leaks
// with go.uber.org/goleak must pass (e.g. goleak.VerifyTestMain(m,
// redistest.GoleakIgnores...)).
//
// This package itself runs no goroutine once Start, StartProcess or
// StartCluster has returned, so goleak may check even while servers are
// still up: bring-up uses short-lived raw connections, the Docker client
// runs with keep-alives disabled and drops idle connections, and child
// processes are watched through /proc and reaped synchronously by Close.
//
// The one entry is for rueidis v1.0.79, which tests pair with StartCluster:
// when a cluster topology refresh replaces connections, its
// (*clusterClient)._refresh spawns a goroutine that sleeps 5 s before closing
// the old ones, and it is not stopped by Client.Close. goleak's retries last
// well under 5 s, so without this a test binary ending shortly after using a
// cluster client fails spuriously. The name ("func2") is tied to that rueidis
// version; re-check it when upgrading.
var GoleakIgnores = []goleak.Option{
	goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*clusterClient)._refresh.func2"),
}

// Docker, when set, starts a Redis container for Start; see
// integration/dockerredis. Set it before the first Start.
var Docker func(ctx context.Context) (*Server, error)

// NewServer is a Server at addr, obtained as kind, whose Close runs stop;
// id names its container (KindDocker) for diagnostics. For starters that
// live outside this package, such as Docker's.
func NewServer(addr, kind, id string, stop func() error) *Server {
	return &Server{Addr: addr, Kind: kind, containerID: id, stop: stop}
}

// ContainerID is the container of a KindDocker server, else "".
func (s *Server) ContainerID() string { return s.containerID }

// WaitPing polls until addr answers PING, about 15 s pass, ctx ends, or
// alive (if not nil) reports that the server died.
func WaitPing(ctx context.Context, addr string, alive func() error) error {
	return waitPing(ctx, addr, alive)
}

// Server is one standalone Redis reachable on loopback.
type Server struct {
	// Addr is "host:port" on loopback, ready for a client's InitAddress.
	Addr string
	// Kind tells how the server was obtained: KindEnv, KindDocker or
	// KindProcess.
	Kind string

	pid         int    // child pid for KindProcess, for diagnostics and tests
	containerID string // container for KindDocker, for diagnostics and tests
	stop        func() error
	closeOnce   sync.Once
	closeErr    error
}

// Close stops what Start started and releases its resources; for a server
// taken from REDIS_ADDR it does nothing, because we do not own it. It is safe
// to call more than once and returns the first result every time.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		if s.stop != nil {
			s.closeErr = s.stop()
		}
	})
	return s.closeErr
}

// Start returns a running Redis, trying in order:
//
//  1. REDIS_ADDR if set. It must be a loopback address: tests flush and
//     reconfigure the server, which must never happen to a shared one.
//  2. Docker, when a Docker starter is set (the integration module's
//     dockerredis.Register sets one): skipped when LATCHKEY_NO_DOCKER=1; a
//     failure is reported through Logf and falls through. The library's own
//     tests, the demo and the CLI's tests leave it unset, so that Docker's
//     client is no requirement of the library module.
//  3. A redis-server child process, see StartProcess.
//
// It returns only once the server answers PING (bounded to about 15 s).
// ctx bounds start-up only; the server runs until Close.
func Start(ctx context.Context) (*Server, error) {
	if addr, ok := os.LookupEnv("REDIS_ADDR"); ok && addr != "" {
		return fromEnv(ctx, addr)
	}
	switch {
	case Docker == nil:
	case os.Getenv("LATCHKEY_NO_DOCKER") == "1":
		Logf("redistest: LATCHKEY_NO_DOCKER=1, using a redis-server process")
	default:
		s, err := Docker(ctx)
		if err == nil {
			return s, nil
		}
		Logf("redistest: docker unavailable, falling back to a redis-server process: %v", err)
	}
	s, err := StartProcess(ctx)
	if err != nil {
		return nil, fmt.Errorf("redistest: no Redis available (set REDIS_ADDR to a loopback Redis, make docker reachable, or `apt-get install redis-server`): %w", err)
	}
	return s, nil
}

// fromEnv validates and waits for a caller-provided Redis.
func fromEnv(ctx context.Context, addr string) (*Server, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("redistest: REDIS_ADDR=%q is not host:port (e.g. 127.0.0.1:6379): %w", addr, err)
	}
	if !isLoopbackHost(host) {
		return nil, fmt.Errorf("redistest: REDIS_ADDR=%q is not a loopback address; tests flush and reconfigure the server, so point REDIS_ADDR at a Redis on 127.0.0.1 or ::1, or unset it", addr)
	}
	if err := waitPing(ctx, addr, nil); err != nil {
		return nil, fmt.Errorf("redistest: REDIS_ADDR=%q does not answer; start Redis there or unset REDIS_ADDR: %w", addr, err)
	}
	return &Server{Addr: addr, Kind: KindEnv}, nil
}

// isLoopbackHost accepts loopback IP literals and "localhost". Other names
// are rejected rather than resolved, since DNS could point them anywhere.
func isLoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
