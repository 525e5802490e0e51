package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/latchkey/latchkey/bench/internal/locks"
)

// Defaults of the flags. The suite's defaults (5 libraries × 5 scenarios ×
// 3 repetitions × 5s, plus the watchdog scale) take about 8 minutes.
const (
	DefaultProcs   = 1
	DefaultG       = 1
	DefaultKeys    = 1
	DefaultDur     = 5 * time.Second
	DefaultReps    = 3
	DefaultLease   = locks.DefaultLease
	DefaultTimeout = 10 * time.Second
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
	var libs string
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
	fs.BoolVar(&cfg.jsonOut, "json", false, "print one JSON object per library per scenario instead of a table")
	fs.StringVar(&cfg.out, "out", "", "also write the results, with the machine and the command, to this file (benchdoc's input)")
	fs.BoolVar(&cfg.suite, "suite", false, "run the standard scenarios a-e and the watchdog scale (ignores -procs, -g, -keys, -cs)")
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
	cfg.command = strings.TrimSpace("go run ./cmd/lockbench " + strings.Join(args, " "))
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
	}
	return nil
}
