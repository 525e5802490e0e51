// Command latchkey-demo shows latchkey's locks under contention: a fleet of
// worker processes, by default 32 of one goroutine each, take one lock in a
// loop (critical section 5ms), first with the pub/sub Mutex and then with
// the polling SpinMutex, 6s each, and the demo compares their throughput,
// wait latency and the load they put on Redis. Its verdict says, figure by
// figure, where pub/sub wins and where it pays: throughput, p99 wait, Redis
// CPU and commands per acquisition, each with pub/sub's figure as a ratio of
// spin's, and the SUBSCRIBE and UNSUBSCRIBE calls per acquisition. A
// pub/sub waiter's subscription lingers between its waits, so those are
// about one pair per worker process per phase (SUBSCRIBE at its first wait,
// UNSUBSCRIBE at its Close), not one per wait; spin makes none.
// Each worker records latchkey's OpenTelemetry metrics through the SDK and
// serves them to Prometheus on a loopback port (-metrics; the URLs are
// printed as the phase starts); half-way through a phase the demo takes a
// `latchkey list` of who holds the lock and how many clients queue for it,
// and after the phase it prints both, with a summary of the metrics read
// back (wait p50/p99 from the histogram, locks lost, wake-ups).
//
// Usage (from cmd/latchkey-demo, a module of its own: the OTel SDK and
// Prometheus stay out of the library's go.mod):
//
//	go run . [-addr 127.0.0.1:6379 -flush] [-procs 32] [-g 1] [-dur 6s] [-cs 5ms] [-lock demo] [-metrics 127.0.0.1:0]
//
// Without -addr it starts a redis-server process of its own on loopback
// and stops it at the end. Each phase begins with FLUSHALL and CONFIG
// RESETSTAT, so a Redis given with -addr must be on loopback and the demo
// refuses it unless -flush says that it may empty it and reset its
// statistics: never point it at data you keep.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/rueidis"

	"github.com/latchkey/latchkey/internal/childproc"
	"github.com/latchkey/latchkey/internal/redisinfo"
	"github.com/latchkey/latchkey/internal/redistest"
	"github.com/latchkey/latchkey/rlock"
)

// Keys of one phase besides the lock itself. FLUSHALL clears them between phases.
const (
	counterKey = "latchkey-demo:counter" // the unprotected read-modify-write target
	readyKey   = "latchkey-demo:ready"   // each worker RPUSHes once it is connected
	goKey      = "latchkey-demo:go"      // the parent RPUSHes the start time, once per worker
)

var phases = []string{"pubsub", "spin"}

type config struct {
	addr, lock string
	flush      bool // -addr may be FLUSHALLed
	procs, g   int
	dur, cs    time.Duration
	metrics    string    // where worker 1 serves /metrics; the others on the ports after it
	out        io.Writer // the report
}

func main() {
	if childproc.Role() == workerRole {
		os.Exit(workerMain())
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is main without os.Exit, so that deferred clean-up (children, Redis)
// runs: the report goes to stdout, errors and usage to stderr.
func run(args []string, stdout, stderr io.Writer) int {
	cfg := config{out: stdout}
	fs := flag.NewFlagSet("latchkey-demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.addr, "addr", "", "use this Redis (host:port, loopback only) instead of starting one; needs -flush")
	fs.BoolVar(&cfg.flush, "flush", false, "with -addr: let the demo FLUSHALL that Redis and reset its statistics (CONFIG RESETSTAT) before each phase")
	fs.IntVar(&cfg.procs, "procs", 32, "worker processes")
	fs.IntVar(&cfg.g, "g", 1, "goroutines per worker process")
	fs.DurationVar(&cfg.dur, "dur", 6*time.Second, "duration of each phase")
	fs.DurationVar(&cfg.cs, "cs", 5*time.Millisecond, "critical section: how long each holder sleeps inside the lock")
	fs.StringVar(&cfg.lock, "lock", "demo", "lock name")
	fs.StringVar(&cfg.metrics, "metrics", "127.0.0.1:0", "where worker 1 serves its OpenTelemetry metrics at /metrics (loopback only), worker n on the port n-1 after it; port 0: each a free port, printed")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if cfg.procs < 1 || cfg.g < 1 || cfg.dur <= 0 || cfg.cs < 0 || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "latchkey-demo: need -procs >= 1, -g >= 1, -dur > 0, -cs >= 0 and no arguments")
		fs.Usage()
		return 2
	}
	if err := checkMetricsAddr(cfg.metrics, cfg.procs); err != nil {
		fmt.Fprintln(stderr, "latchkey-demo:", err)
		return 2
	}
	if err := checkFlush(cfg.addr, cfg.flush); err != nil {
		fmt.Fprintln(stderr, "latchkey-demo:", err)
		return 2
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	addr, closeRedis, err := getRedis(ctx, cfg.addr, stdout, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "latchkey-demo:", err)
		return 1
	}
	defer closeRedis()
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	if err != nil {
		fmt.Fprintf(stderr, "latchkey-demo: connecting to Redis at %s: %v\n", addr, err)
		return 1
	}
	defer rc.Close()

	goroutines := "goroutines"
	if cfg.g == 1 {
		goroutines = "goroutine"
	}
	fmt.Fprintf(stdout, "%d processes × %d %s on lock %q, critical section %v, %v per phase\n\n", cfg.procs, cfg.g, goroutines, cfg.lock, cfg.cs, cfg.dur)
	results := make([]*phaseResult, 0, len(phases))
	for _, mode := range phases {
		res, err := runPhase(ctx, rc, addr, cfg, mode)
		if err != nil {
			if ctx.Err() != nil {
				fmt.Fprintln(stderr, "\nlatchkey-demo: interrupted")
				return 130
			}
			fmt.Fprintf(stderr, "\nlatchkey-demo: phase %s: %v\n", mode, err)
			return 1
		}
		printPhaseEnd(stdout, res)
		results = append(results, res)
	}
	printSummary(stdout, cfg, results[0], results[1])
	for _, r := range results {
		if !r.ok() {
			return 1
		}
	}
	return 0
}

// loopback checks that addr is host:port with a loopback host. Names
// other than localhost are not resolved, since DNS could point them
// anywhere.
func loopback(flagName, addr, why string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("-%s %q is not host:port: %w", flagName, addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("-%s %q is not a loopback address: %s, so it only uses 127.0.0.1, ::1 or localhost", flagName, addr, why)
	}
	return nil
}

// checkMetricsAddr checks -metrics: on loopback (nothing off this machine
// needs the demo's metrics), with a port for each of procs workers.
func checkMetricsAddr(addr string, procs int) error {
	if err := loopback("metrics", addr, "the workers serve their metrics unauthenticated"); err != nil {
		return err
	}
	last, err := workerMetricsAddr(addr, procs)
	if err != nil {
		return fmt.Errorf("-metrics %q: %w", addr, err)
	}
	_, port, _ := net.SplitHostPort(last)
	if p, _ := strconv.Atoi(port); p < 0 || p > 65535 {
		return fmt.Errorf("-metrics %q: %d workers need the ports up to %s", addr, procs, port)
	}
	return nil
}

// checkFlush refuses a Redis of the user's (-addr) unless -flush allows the
// demo to empty it, and -flush without one: the demo only ever FLUSHALLs a
// Redis it started itself or one it was told it may.
func checkFlush(addr string, flush bool) error {
	switch {
	case addr != "" && !flush:
		return fmt.Errorf("-addr %s: each phase FLUSHALLs the Redis and resets its statistics; give -flush as well if it holds nothing you keep, or leave -addr out and the demo starts a redis-server of its own", addr)
	case addr == "" && flush:
		return errors.New("-flush is for a Redis given with -addr; the one the demo starts is its own")
	}
	return nil
}

// getRedis returns the address of the Redis to use and how to let go of it.
func getRedis(ctx context.Context, addr string, stdout, stderr io.Writer) (string, func(), error) {
	if addr != "" {
		// The demo runs FLUSHALL and CONFIG RESETSTAT: refuse anything that
		// could be a shared server, -flush or not.
		if err := loopback("addr", addr, "the demo flushes the server"); err != nil {
			return "", nil, err
		}
		fmt.Fprintf(stdout, "redis: %s (from -addr, -flush)\n", addr)
		return addr, func() {}, nil
	}
	// A redis-server process of its own, never REDIS_ADDR as redistest.Start
	// would take: that is someone else's server, and the demo flushes it.
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	srv, err := redistest.StartProcess(sctx)
	if err != nil {
		return "", nil, err
	}
	fmt.Fprintf(stdout, "redis: %s (%s)\n", srv.Addr, srv.Kind)
	return srv.Addr, func() {
		if err := srv.Close(); err != nil {
			fmt.Fprintln(stderr, "latchkey-demo: stopping Redis:", err)
		}
	}, nil
}

// child is one worker process.
type child struct {
	id  int
	err error // why it failed, with its stderr; written before its goroutine ends
}

// runPhase runs one phase end to end. Every path out of it waits for all
// children to exit: a failure cancels ctx, which kills them.
func runPhase(ctx context.Context, rc rueidis.Client, addr string, cfg config, mode string) (*phaseResult, error) {
	if err := rc.Do(ctx, rc.B().Flushall().Build()).Error(); err != nil {
		return nil, fmt.Errorf("FLUSHALL: %w", err)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	children, reports := spawn(ctx, cancel, cfg, workerParams{Addr: addr, Lock: cfg.lock, Mode: mode, Goroutines: cfg.g, Dur: cfg.dur, CS: cfg.cs})

	res, err := drive(ctx, rc, cfg, mode, reports)
	if err != nil {
		cancel(err)
	}
	for range reports { // closed once every child has exited
	}
	for _, c := range children {
		if c.err != nil {
			return nil, c.err
		}
	}
	if err != nil {
		return nil, err
	}
	return res, finish(ctx, rc, res)
}

// spawn starts cfg.procs workers by re-executing this binary. Their reports
// arrive on the channel, which is closed once all of them have exited. The
// first child to fail cancels ctx, which kills the others.
func spawn(ctx context.Context, cancel context.CancelCauseFunc, cfg config, p workerParams) ([]*child, <-chan report) {
	reports := make(chan report, cfg.procs)
	var children []*child
	var wg sync.WaitGroup
	for i := range cfg.procs {
		c := &child{id: i + 1}
		children = append(children, c)
		p.ID = c.id
		p.Metrics, _ = workerMetricsAddr(cfg.metrics, c.id) // checked by run
		// The child reads its stdin until EOF, which comes when we exit
		// however we die (even SIGKILL): it then stops instead of lingering.
		proc, err := childproc.Start(ctx, childproc.Config{Role: workerRole, Params: p, Name: fmt.Sprintf("worker %d", c.id)})
		if err != nil {
			c.err = err
			cancel(err)
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			dec := json.NewDecoder(proc.Stdout)
			var derr error
			for {
				var r report
				if derr = dec.Decode(&r); derr != nil {
					break
				}
				reports <- r // the parent drains reports until closed
			}
			var err error
			if errors.Is(derr, io.EOF) {
				err = proc.Wait()
			} else {
				err = proc.Fail("reading its reports", derr)
			}
			// A child killed because we cancelled did not fail by itself.
			if err != nil && ctx.Err() == nil {
				c.err = err
				cancel(fmt.Errorf("worker %d failed", c.id))
			}
		}()
	}
	go func() {
		wg.Wait()
		close(reports)
	}()
	return children, reports
}

// drive releases the workers together and aggregates their reports, one
// live line per second, until they have all exited.
func drive(ctx context.Context, rc rueidis.Client, cfg config, mode string, reports <-chan report) (*phaseResult, error) {
	// Barrier: every worker is connected before any starts, so that they
	// contend from the first acquisition. BLPOP with a short timeout keeps
	// checking ctx, which a failing child cancels. Each worker says it is
	// ready with the URL of its /metrics.
	deadline := time.Now().Add(time.Minute)
	var urls []string
	for len(urls) < cfg.procs {
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("only %d of %d workers got ready within a minute", len(urls), cfg.procs)
		}
		v, err := rc.Do(ctx, rc.B().Blpop().Key(readyKey).Timeout(0.2).Build()).AsStrSlice()
		switch {
		case ctx.Err() != nil:
			return nil, context.Cause(ctx)
		case err == nil && len(v) == 2:
			urls = append(urls, v[1])
		case err != nil && !rueidis.IsRedisNil(err):
			return nil, fmt.Errorf("waiting for workers: %w", err)
		}
	}
	slices.Sort(urls)
	fmt.Fprintf(cfg.out, "%s: the workers serve their OpenTelemetry metrics during the phase at %s\n", mode, strings.Join(urls, " "))
	// Reset just before the start so that the phase's statistics are its own.
	if err := rc.Do(ctx, rc.B().ConfigResetstat().Build()).Error(); err != nil {
		return nil, fmt.Errorf("CONFIG RESETSTAT: %w", err)
	}
	res := &phaseResult{mode: mode, dur: cfg.dur}
	var err error
	if res.cpu0, err = redisinfo.CPU(ctx, rc); err != nil {
		return nil, err
	}
	agg := newAggregator(cfg.out, isTerminal(cfg.out), res, cfg.procs, func() (int64, error) { return totalCommands(ctx, rc) })
	if err := agg.start(); err != nil {
		return nil, err
	}
	// Every worker gets the same start instant and so the same end.
	start := strconv.FormatInt(time.Now().UnixNano(), 10)
	if err := rc.Do(ctx, rc.B().Rpush().Key(goKey).Element(slices.Repeat([]string{start}, cfg.procs)...).Build()).Error(); err != nil {
		return nil, fmt.Errorf("releasing the workers: %w", err)
	}
	// What `latchkey list` shows while they contend, taken half-way.
	locks, err := rlock.NewClient(rc, rlock.Options{})
	if err != nil {
		return nil, err
	}
	defer locks.Close()
	for r := range reports {
		if err := agg.add(r); err != nil {
			return nil, err
		}
		if res.listing == "" && agg.next > (len(agg.secs)+1)/2 {
			if res.listing, err = listing(ctx, locks); err != nil {
				return nil, err
			}
		}
	}
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	if !agg.complete() {
		return nil, errors.New("workers exited without reporting every second")
	}
	return res, nil
}

// finish reads what the phase left in Redis: the counter and the statistics.
func finish(ctx context.Context, rc rueidis.Client, res *phaseResult) error {
	n, err := rc.Do(ctx, rc.B().Get().Key(counterKey).Build()).AsInt64()
	if err != nil && !rueidis.IsRedisNil(err) {
		return fmt.Errorf("reading the counter: %w", err)
	}
	res.counter = n
	if res.cmdstats, err = redisinfo.Commands(ctx, rc); err != nil {
		return err
	}
	// The lock's commands, scripts' included, and the demo's GET and SET of
	// its counter (two per acquisition, in both phases); not the harness's
	// INFO and CONFIG, nor connection handshakes, as in lockbench.
	res.commands = redisinfo.LockCommands(res.cmdstats)
	cpu, err := redisinfo.CPU(ctx, rc)
	res.cpuSeconds = cpu - res.cpu0
	return err
}
