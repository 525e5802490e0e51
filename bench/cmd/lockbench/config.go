package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/latchkey/latchkey/bench/internal/locks"
)

// Defaults of the flags. The Makefile's BENCHFLAGS repeats the suite's, with
// the arithmetic of how long they take.
const (
	DefaultProcs    = 1
	DefaultG        = 1
	DefaultKeys     = 1
	DefaultDur      = 2 * time.Second
	DefaultSweepDur = 2 * time.Second
	DefaultIdleDur  = 4 * time.Second
	DefaultReps     = 5
	// DefaultFleetDur and DefaultFleetReps are scenario (g)'s: fewer
	// repetitions than the others', since a fleet of 64 worker processes
	// takes seconds to start (see the Makefile's budget).
	DefaultFleetDur = 2 * time.Second
	// DefaultFleetRamp is (g)'s ramp: the fleet starts with every process
	// asking at once, each one's first wait subscribing (a busy period's
	// start). Half a second takes 64 processes past their first turns
	// (64 × 5.7 ms ≈ 0.37 s) and keeps make bench within its budget.
	DefaultFleetRamp = 500 * time.Millisecond
	DefaultFleetReps = 1
	DefaultLease     = locks.DefaultLease
	DefaultTimeout   = 10 * time.Second
	// DefaultSweep are the retry settings the sweep tries.
	DefaultSweep = "2ms,8ms,32ms,128ms"
	// DefaultFleet are scenario (g)'s fleet sizes, in processes.
	DefaultFleet = "4,16,64"
	// suiteParts are the parts of the suite -scenarios may choose.
	suiteParts = "a,b,c,d,e,f,g,watchdog"
)

// ErrUsage reports bad flags; -h lists them.
var ErrUsage = errors.New("bad usage (see lockbench -h)")

// config is the parsed command line.
type config struct {
	addr       string
	procs, g   int
	keys       int
	cs, dur    time.Duration
	lease      time.Duration
	timeout    time.Duration // per-acquire deadline
	libs       []string
	reps       int
	backoff    time.Duration   // retry setting of the polling libraries, not in the suite
	sweep      []time.Duration // the sweep's retry settings
	sweepDur   time.Duration
	idleDur    time.Duration
	fleet      []int // scenario (g)'s fleet sizes, ascending
	fleetDur   time.Duration
	fleetRamp  time.Duration
	fleetReps  int
	parts      []string // the suite's parts to run
	jsonOut    bool
	out        string // results file for benchdoc
	suite      bool
	watchdog   bool // the watchdog scale only
	name       string
	command    string // the command line, for the report
	redisLabel string // how Redis runs, filled in once it does
}

func parseFlags(args []string) (config, error) {
	var cfg config
	var libs, sweep, parts, fleet string
	fs := flag.NewFlagSet("lockbench", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&cfg.addr, "addr", "", "use this Redis (host:port, loopback only; it is FLUSHALLed) instead of starting a redis-server process")
	fs.IntVar(&cfg.procs, "procs", DefaultProcs, "worker processes")
	fs.IntVar(&cfg.g, "g", DefaultG, "goroutines per process")
	fs.IntVar(&cfg.keys, "keys", DefaultKeys, "lock keys; goroutine i (counting across processes) uses key i%keys")
	fs.DurationVar(&cfg.cs, "cs", 0, "critical section: how long each holder keeps the lock (0: release at once)")
	fs.DurationVar(&cfg.dur, "dur", DefaultDur, "measured duration of each run")
	fs.IntVar(&cfg.reps, "reps", DefaultReps, "repetitions; the report gives medians over them")
	fs.DurationVar(&cfg.lease, "lease", DefaultLease, "lease (time to live) of every lock, for every library")
	fs.DurationVar(&cfg.timeout, "timeout", DefaultTimeout, "deadline of each acquire (capped by the end of the run)")
	fs.StringVar(&libs, "libs", strings.Join(locks.All, ","), "comma-separated libraries: "+strings.Join(locks.All, ", "))
	fs.DurationVar(&cfg.backoff, "backoff", 0, "retry setting of the polling libraries ("+strings.Join(locks.Polling, ", ")+"): backoff cap or fixed retry delay; 0 keeps each one's default. Not with -suite, which sweeps them")
	fs.StringVar(&sweep, "sweep", DefaultSweep, "-suite: the retry settings the polling libraries also run with in scenarios "+strings.Join(sweepScenarios, ", ")+" (\"\" for none)")
	fs.DurationVar(&cfg.sweepDur, "sweepdur", DefaultSweepDur, "-suite: measured duration of each run of the sweep")
	fs.DurationVar(&cfg.idleDur, "idledur", DefaultIdleDur, "-suite: measured duration of each run of scenario f (idle waiting, holds of 2s)")
	fs.StringVar(&fleet, "fleet", DefaultFleet, "-suite: scenario g's fleet sizes, in processes of one goroutine each")
	fs.DurationVar(&cfg.fleetDur, "fleetdur", DefaultFleetDur, "-suite: measured duration of each run of scenario g (the fleet)")
	fs.DurationVar(&cfg.fleetRamp, "fleetramp", DefaultFleetRamp, "-suite: how long scenario g runs before its measured duration, left out of the counts, CPU and commands; a wait that began in it counts whole (0: none)")
	fs.IntVar(&cfg.fleetReps, "fleetreps", DefaultFleetReps, "-suite: repetitions of scenario g (the fleet); -reps is the other scenarios'")
	fs.StringVar(&parts, "scenarios", suiteParts, "-suite: the parts of the suite to run")
	fs.BoolVar(&cfg.jsonOut, "json", false, "print one JSON object per library per scenario instead of a table")
	fs.StringVar(&cfg.out, "out", "", "also write the results, with the machine and the command, to this file (benchdoc's input)")
	fs.BoolVar(&cfg.suite, "suite", false, "run the standard scenarios a-e with the sweep, f, g and the watchdog scale (ignores -procs, -g, -keys, -cs)")
	fs.BoolVar(&cfg.watchdog, "watchdog", false, "run only the watchdog scale")
	fs.StringVar(&cfg.name, "name", "custom", "scenario name for a run that is not -suite")
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
	var err error
	if cfg.libs, err = locks.ParseList(libs); err != nil {
		return cfg, fmt.Errorf("%w: -libs: %w", ErrUsage, err)
	}
	if cfg.sweep, err = parseDurations(sweep); err != nil {
		return cfg, fmt.Errorf("%w: -sweep: %w", ErrUsage, err)
	}
	if cfg.parts, err = parseParts(parts); err != nil {
		return cfg, fmt.Errorf("%w: -scenarios: %w", ErrUsage, err)
	}
	if cfg.fleet, err = parseSizes(fleet); err != nil {
		return cfg, fmt.Errorf("%w: -fleet: %w", ErrUsage, err)
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	for _, name := range []string{"sweep", "sweepdur", "idledur", "fleet", "fleetdur", "fleetreps", "scenarios"} {
		if given[name] && !cfg.suite {
			return cfg, fmt.Errorf("%w: -%s is for -suite", ErrUsage, name)
		}
	}
	cfg.command = strings.TrimSpace("go run ./cmd/lockbench " + strings.Join(args, " "))
	// locks.HandoversEnv changes latchkey's MaxLocalHandovers in every
	// worker, for experiments on the handover bound; the suite's results
	// (the page's) record nothing of it, so they would publish latchkey at
	// a setting they do not name.
	if v := os.Getenv(locks.HandoversEnv); cfg.suite && v != "" {
		return cfg, fmt.Errorf("%w: %s=%q is set: it overrides latchkey's MaxLocalHandovers, for experiments only, and -suite writes the published results, which would not record it; unset it for -suite", ErrUsage, locks.HandoversEnv, v)
	}
	return cfg, cfg.validate()
}

func (c config) validate() error {
	switch {
	case c.procs < 1 || c.g < 1 || c.keys < 1:
		return fmt.Errorf("%w: -procs, -g and -keys must be at least 1", ErrUsage)
	case c.cs < 0:
		return fmt.Errorf("%w: -cs must not be negative", ErrUsage)
	case c.dur <= 0 || c.reps < 1:
		return fmt.Errorf("%w: -dur must be positive and -reps at least 1", ErrUsage)
	case c.lease <= c.cs:
		return fmt.Errorf("%w: -lease %v must be longer than -cs %v, or locks expire while held", ErrUsage, c.lease, c.cs)
	case c.timeout <= 0:
		return fmt.Errorf("%w: -timeout must be positive", ErrUsage)
	case c.suite && c.watchdog:
		return fmt.Errorf("%w: -suite already includes -watchdog; give one of them", ErrUsage)
	case c.backoff < 0 || c.suite && c.backoff != 0:
		return fmt.Errorf("%w: -backoff must not be negative, and -suite runs the defaults and sweeps the rest", ErrUsage)
	case c.sweepDur <= 0 || c.idleDur <= 0 || c.fleetDur <= 0 || c.fleetRamp < 0:
		return fmt.Errorf("%w: -sweepdur, -idledur and -fleetdur must be positive", ErrUsage)
	case c.fleetReps < 1:
		return fmt.Errorf("%w: -fleetreps must be at least 1", ErrUsage)
	}
	return nil
}

// parseList parses each item of a comma-separated list with parse, in the
// order given, leaving out empty items and repeats.
func parseList[T comparable](s string, parse func(string) (T, error)) ([]T, error) {
	var xs []T
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		x, err := parse(f)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(xs, x) {
			xs = append(xs, x)
		}
	}
	return xs, nil
}

// parseDurations splits a comma-separated list of durations of at least a
// millisecond (the backoffs' start), dropping repeats.
func parseDurations(s string) ([]time.Duration, error) {
	return parseList(s, func(f string) (time.Duration, error) {
		d, err := time.ParseDuration(f)
		if err == nil && d < time.Millisecond {
			err = fmt.Errorf("%v is below 1ms, where the backoffs start", d)
		}
		return d, err
	})
}

// parseSizes splits a comma-separated list of fleet sizes, each at least
// one process, into ascending order without repeats.
func parseSizes(s string) ([]int, error) {
	sizes, err := parseList(s, func(f string) (int, error) {
		n, err := strconv.Atoi(f)
		if err == nil && n < 1 {
			err = fmt.Errorf("a fleet of %d processes", n)
		}
		return n, err
	})
	if err == nil && len(sizes) == 0 {
		err = fmt.Errorf("%q names no fleet size", s)
	}
	slices.Sort(sizes)
	return sizes, err
}

// parseParts splits a comma-separated list of the suite's parts.
func parseParts(s string) ([]string, error) {
	var parts []string
	for p := range strings.SplitSeq(s, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		if !slices.Contains(strings.Split(suiteParts, ","), p) {
			return nil, fmt.Errorf("no part %q: choose from %s", p, suiteParts)
		}
		parts = append(parts, p)
	}
	if len(parts) == 0 {
		return nil, fmt.Errorf("%q names no part: choose from %s", s, suiteParts)
	}
	return parts, nil
}

// runs tells whether the suite runs the part called name.
func (c config) runs(name string) bool { return slices.Contains(c.parts, name) }
