// Command latchkey-demo shows latchkey's locks under contention: several
// worker processes, each running several goroutines, take one lock in a loop,
// first with the pub/sub Mutex and then with the polling SpinMutex, and the
// demo compares their throughput, wait latency and the load they put on Redis.
// Each worker records latchkey's OpenTelemetry metrics through the SDK and
// serves them to Prometheus on a loopback port it prints; half-way through a
// phase the demo takes a `latchkey list` of who holds the lock and how many
// clients queue for it, and after it prints both.
//
// Usage (from the cmd module):
//
//	go run ./latchkey-demo [-addr 127.0.0.1:6379] [-procs 4] [-g 4] [-dur 10s] [-cs 1ms] [-lock demo]
//
// Without -addr it starts a throw-away Redis (REDIS_ADDR, or a redis-server
// process; see internal/redistest). A Redis given with -addr
// must be on loopback and is FLUSHALLed: never point it at data you keep.
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
	procs, g   int
	dur, cs    time.Duration
}

func main() {
	if childproc.Role() == workerRole {
		os.Exit(workerMain())
	}
	os.Exit(run())
}

// run is main without os.Exit, so that deferred clean-up (children, Redis) runs.
func run() int {
	var cfg config
	flag.StringVar(&cfg.addr, "addr", "", "use this Redis (host:port, loopback only; it is FLUSHALLed) instead of starting one")
	flag.IntVar(&cfg.procs, "procs", 4, "worker processes")
	flag.IntVar(&cfg.g, "g", 4, "goroutines per worker process")
	flag.DurationVar(&cfg.dur, "dur", 10*time.Second, "duration of each phase")
	flag.DurationVar(&cfg.cs, "cs", time.Millisecond, "critical section: how long each holder sleeps inside the lock")
	flag.StringVar(&cfg.lock, "lock", "demo", "lock name")
	flag.Parse()
	if cfg.procs < 1 || cfg.g < 1 || cfg.dur <= 0 || cfg.cs < 0 || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "latchkey-demo: need -procs >= 1, -g >= 1, -dur > 0, -cs >= 0 and no arguments")
		flag.Usage()
		return 2
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	addr, closeRedis, err := getRedis(ctx, cfg.addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "latchkey-demo:", err)
		return 1
	}
	defer closeRedis()
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	if err != nil {
		fmt.Fprintf(os.Stderr, "latchkey-demo: connecting to Redis at %s: %v\n", addr, err)
		return 1
	}
	defer rc.Close()

	fmt.Printf("%d processes × %d goroutines on lock %q, critical section %v, %v per phase\n\n", cfg.procs, cfg.g, cfg.lock, cfg.cs, cfg.dur)
	results := make([]*phaseResult, 0, len(phases))
	for _, mode := range phases {
		res, err := runPhase(ctx, rc, addr, cfg, mode)
		if err != nil {
			if ctx.Err() != nil {
				fmt.Fprintln(os.Stderr, "\nlatchkey-demo: interrupted")
				return 130
			}
			fmt.Fprintf(os.Stderr, "\nlatchkey-demo: phase %s: %v\n", mode, err)
			return 1
		}
		printPhaseEnd(os.Stdout, res)
		results = append(results, res)
	}
	printSummary(os.Stdout, cfg, results[0], results[1])
	for _, r := range results {
		if !r.ok() {
			return 1
		}
	}
	return 0
}

// getRedis returns the address of the Redis to use and how to let go of it.
func getRedis(ctx context.Context, addr string) (string, func(), error) {
	if addr != "" {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return "", nil, fmt.Errorf("-addr %q is not host:port: %w", addr, err)
		}
		// The demo runs FLUSHALL and CONFIG RESETSTAT: refuse anything that
		// could be a shared server. Names other than localhost are not
		// resolved, since DNS could point them anywhere.
		if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return "", nil, fmt.Errorf("-addr %q is not a loopback address: the demo flushes the server, so it only uses a Redis on 127.0.0.1, ::1 or localhost", addr)
		}
		fmt.Printf("redis: %s (from -addr)\n", addr)
		return addr, func() {}, nil
	}
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	srv, err := redistest.Start(sctx)
	if err != nil {
		return "", nil, err
	}
	fmt.Printf("redis: %s (%s)\n", srv.Addr, srv.Kind)
	return srv.Addr, func() {
		if err := srv.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "latchkey-demo: stopping Redis:", err)
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
	// checking ctx, which a failing child cancels.
	deadline := time.Now().Add(time.Minute)
	for ready := 0; ready < cfg.procs; {
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("only %d of %d workers got ready within a minute", ready, cfg.procs)
		}
		v, err := rc.Do(ctx, rc.B().Blpop().Key(readyKey).Timeout(0.2).Build()).AsStrSlice()
		switch {
		case ctx.Err() != nil:
			return nil, context.Cause(ctx)
		case err == nil && len(v) == 2:
			ready++
		case err != nil && !rueidis.IsRedisNil(err):
			return nil, fmt.Errorf("waiting for workers: %w", err)
		}
	}
	// Reset just before the start so that the phase's statistics are its own.
	if err := rc.Do(ctx, rc.B().ConfigResetstat().Build()).Error(); err != nil {
		return nil, fmt.Errorf("CONFIG RESETSTAT: %w", err)
	}
	res := &phaseResult{mode: mode, dur: cfg.dur}
	var err error
	if res.cpu0, err = redisinfo.CPU(ctx, rc); err != nil {
		return nil, err
	}
	agg := newAggregator(os.Stdout, isTerminal(os.Stdout), res, cfg.procs, func() (int64, error) { return totalCommands(ctx, rc) })
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
	if res.commands, err = totalCommands(ctx, rc); err != nil {
		return err
	}
	if res.cmdstats, err = redisinfo.Commands(ctx, rc); err != nil {
		return err
	}
	cpu, err := redisinfo.CPU(ctx, rc)
	res.cpuSeconds = cpu - res.cpu0
	return err
}
