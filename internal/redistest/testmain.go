package redistest

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"go.uber.org/goleak"
)

// Env is what RunTests started for a test package.
type Env struct {
	Standalone *Server
	Cluster    *Cluster // nil unless asked for
}

// RunTests is the body of a test package's TestMain: it starts a standalone
// Redis (and a 3-master Cluster when withCluster), hands them to setup, runs
// the tests, closes the servers, and only then checks for leaked goroutines
// (goleak.VerifyTestMain would exit before deferred closes could run). check,
// when not nil, runs after the tests pass and before the servers close, for
// package-specific leak checks on the servers. A fuzzing worker (a child of
// `go test -fuzz`) gets no servers, so fuzz targets must not need Redis.
// It returns the exit code:
//
//	func TestMain(m *testing.M) {
//		os.Exit(redistest.RunTests(m, "notify", true, func(e redistest.Env) { env = e }, nil))
//	}
func RunTests(m *testing.M, pkg string, withCluster bool, setup func(Env), check func(Env) error) int {
	flag.Parse()
	if !testing.Verbose() {
		Logf = func(string, ...any) {}
	}
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, pkg+" tests: "+format+"\n", args...)
		return 1
	}
	if isFuzzWorker() {
		// `go test -fuzz` re-runs the binary as worker processes that run
		// only the fuzz target, again whenever one restarts. latchkey's fuzz
		// targets need no Redis, and a Redis (or Cluster) per worker would
		// cost more than the fuzzing.
		code := m.Run()
		if err := findLeaks(); err != nil {
			code = fail("goroutine leak: %v", err)
		}
		return code
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var env Env
	var err error
	if env.Standalone, err = Start(ctx); err != nil {
		return fail("starting Redis: %v", err)
	}
	defer env.Standalone.Close()
	if withCluster {
		if env.Cluster, err = StartCluster(ctx, 3); err != nil {
			return fail("starting Redis Cluster: %v", err)
		}
		defer env.Cluster.Close()
	}
	if setup != nil {
		setup(env)
	}

	code := m.Run()
	if code == 0 && check != nil {
		if err := check(env); err != nil {
			code = fail("%v", err)
		}
	}
	if env.Cluster != nil {
		if err := env.Cluster.Close(); err != nil {
			code = fail("closing the cluster: %v", err)
		}
	}
	if err := env.Standalone.Close(); err != nil {
		code = fail("closing Redis: %v", err)
	}
	if err := findLeaks(); err != nil {
		code = fail("goroutine leak: %v", err)
	}
	return code
}

// isFuzzWorker reports whether this test binary runs as a fuzzing worker.
func isFuzzWorker() bool {
	f := flag.Lookup("test.fuzzworker")
	return f != nil && f.Value.String() == "true"
}

// leakGrace is how long goroutines may take to end after everything was
// closed. rueidis' cluster client can outlive Close briefly: when one of its
// connections ends with an error other than its own closing (the cluster's
// nodes being killed while the client's asynchronous close runs), it
// schedules a topology refresh, (*call).DelayDo.func1, that sleeps up to 1 s
// before running. That is not a leak, but it outlasts goleak's own retries;
// waiting for it, rather than ignoring the function, still catches a
// goroutine that never ends.
const leakGrace = 5 * time.Second

// findLeaks is goleak.Find with GoleakIgnores, retried until no goroutine is
// left or leakGrace has passed.
func findLeaks() error {
	deadline := time.Now().Add(leakGrace)
	for {
		err := goleak.Find(GoleakIgnores...)
		if err == nil || time.Now().After(deadline) {
			return err
		}
	}
}

// ProcessID asks the server behind c for its process id (INFO server), so a
// test can stop or kill a Redis it started as a process.
func ProcessID(ctx context.Context, c rueidis.Client) (int, error) {
	info, err := c.Do(ctx, c.B().Info().Section("server").Build()).ToString()
	if err != nil {
		return 0, err
	}
	return parseProcessID(info)
}

func parseProcessID(info string) (int, error) {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			return strconv.Atoi(v)
		}
	}
	return 0, fmt.Errorf("redistest: no process_id in INFO server")
}
