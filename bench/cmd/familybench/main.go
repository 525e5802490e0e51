// Command familybench measures latchkey's primitives besides Mutex against
// their spin variants and against a plain Mutex (issue 11):
//
//   - rw: an RWMutex under 95 % reads (-reads), against SpinRWMutex and
//     against a Mutex that every operation takes exclusively. Readers' and
//     writers' throughput and waits are reported apart.
//   - semaphore: a Semaphore of 8 permits (-size) with 64 contenders, each
//     taking one permit, against SpinSemaphore.
//
// Every goroutine loops: draw the operation's kind, acquire (bounded by
// -timeout and by the end of the run), hold for -cs with a nanosleep (no
// spinning, so that many concurrent readers leave the CPU to Redis),
// release. The goroutines are spread over -clients latchkey clients, each on
// its own rueidis client, as separate processes would be; they all run in
// this process.
//
// Each repetition runs every variant of every scenario once, the variants'
// order rotated from one repetition to the next, each run preceded by
// FLUSHALL and followed by reading Redis' CPU time and command counts over
// it: Redis CPU per acquisition and commands per acquisition.
//
// Usage (from bench/; `make bench` runs it):
//
//	familybench [-addr host:port] [-reps 5] [-dur 2s] [-scenarios rw,semaphore] [-out results/family.json]
//
// Without -addr it starts a redis-server process on a free 127.0.0.1 port
// and kills it at the end. A Redis given with -addr must be on loopback, and
// is flushed.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Defaults of the flags; the Makefile's FAMILYFLAGS repeats them with the
// arithmetic of how long they take.
const (
	DefaultReps    = 5
	DefaultDur     = 2 * time.Second
	DefaultClients = 4
	DefaultRWG     = 8  // 4 × 8 = 32 goroutines on the RWMutex
	DefaultSemG    = 16 // 4 × 16 = 64 contenders on the Semaphore
	DefaultSize    = 8
	DefaultReads   = 0.95
	DefaultCS      = 100 * time.Microsecond
	DefaultLease   = 10 * time.Second
	DefaultTimeout = 10 * time.Second
	DefaultSeed    = 1
	allScenarios   = "rw,semaphore"
)

// ErrUsage reports bad flags; -h lists them.
var ErrUsage = errors.New("bad usage (see familybench -h)")

type config struct {
	addr           string
	reps           int
	dur, cs        time.Duration
	clients        int
	rwG, semG      int
	size           int64
	reads          float64
	lease, timeout time.Duration
	seed           uint64
	scenarios      []string
	out            string
	command        string
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is the whole tool without os.Exit, so that its deferred clean-up
// (the Redis it started) always runs.
func run(ctx context.Context, args []string, out, progress io.Writer) int {
	cfg, err := parseFlags(args)
	if err != nil {
		fmt.Fprintln(os.Stderr, "familybench:", err)
		return 2
	}
	if err := execute(ctx, cfg, out, progress); err != nil {
		fmt.Fprintln(os.Stderr, "familybench:", err)
		if ctx.Err() != nil {
			return 130
		}
		return 1
	}
	return 0
}

func parseFlags(args []string) (config, error) {
	var cfg config
	var scenarios string
	fs := flag.NewFlagSet("familybench", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&cfg.addr, "addr", "", "use this Redis (host:port, loopback only; it is FLUSHALLed) instead of starting a redis-server process")
	fs.IntVar(&cfg.reps, "reps", DefaultReps, "repetitions; each runs every variant once, in a rotated order")
	fs.DurationVar(&cfg.dur, "dur", DefaultDur, "measured duration of each run")
	fs.DurationVar(&cfg.cs, "cs", DefaultCS, "hold: how long each acquisition is kept (a nanosleep)")
	fs.IntVar(&cfg.clients, "clients", DefaultClients, "latchkey clients, each on its own rueidis client")
	fs.IntVar(&cfg.rwG, "g", DefaultRWG, "rw: goroutines per client")
	fs.IntVar(&cfg.semG, "semg", DefaultSemG, "semaphore: contenders per client")
	fs.Int64Var(&cfg.size, "size", DefaultSize, "semaphore: permits")
	fs.Float64Var(&cfg.reads, "reads", DefaultReads, "rw: share of the operations that read")
	fs.DurationVar(&cfg.lease, "lease", DefaultLease, "lease of every hold (longer than a run, so no renewal is measured)")
	fs.DurationVar(&cfg.timeout, "timeout", DefaultTimeout, "deadline of each acquire (capped by the end of the run)")
	fs.Uint64Var(&cfg.seed, "seed", DefaultSeed, "seed of the goroutines' draws of read or write (the same for every variant)")
	fs.StringVar(&scenarios, "scenarios", allScenarios, "scenarios to run: "+allScenarios)
	fs.StringVar(&cfg.out, "out", "", "also write the results to this file (benchdoc's -family input)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(nil)
			fs.Usage()
		}
		return cfg, fmt.Errorf("%w: %w", ErrUsage, err)
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("%w: unexpected arguments %q", ErrUsage, fs.Args())
	}
	for s := range strings.SplitSeq(scenarios, ",") {
		if s = strings.TrimSpace(s); s == "" || slices.Contains(cfg.scenarios, s) {
			continue
		}
		if !slices.Contains(strings.Split(allScenarios, ","), s) {
			return cfg, fmt.Errorf("%w: -scenarios: no scenario %q: choose from %s", ErrUsage, s, allScenarios)
		}
		cfg.scenarios = append(cfg.scenarios, s)
	}
	cfg.command = strings.TrimSpace("go run ./cmd/familybench " + strings.Join(args, " "))
	switch {
	case len(cfg.scenarios) == 0:
		return cfg, fmt.Errorf("%w: -scenarios names none of %s", ErrUsage, allScenarios)
	case cfg.reps < 1 || cfg.dur <= 0 || cfg.cs < 0:
		return cfg, fmt.Errorf("%w: -reps must be at least 1, -dur positive and -cs not negative", ErrUsage)
	case cfg.clients < 1 || cfg.rwG < 1 || cfg.semG < 1 || cfg.size < 1:
		return cfg, fmt.Errorf("%w: -clients, -g, -semg and -size must be at least 1", ErrUsage)
	case !(cfg.reads >= 0 && cfg.reads <= 1):
		return cfg, fmt.Errorf("%w: -reads must be within [0, 1]", ErrUsage)
	case cfg.lease <= cfg.cs || cfg.timeout <= 0:
		return cfg, fmt.Errorf("%w: -lease must be longer than -cs, and -timeout positive", ErrUsage)
	}
	return cfg, nil
}
