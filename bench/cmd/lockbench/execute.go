package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/latchkey/latchkey/bench/internal/benchredis"
	"github.com/latchkey/latchkey/bench/internal/locks"
	"github.com/latchkey/latchkey/bench/internal/results"
	"github.com/latchkey/latchkey/internal/redisinfo"
)

// execute runs what cfg asks for, prints the results to out and a line per
// run to progress.
func execute(ctx context.Context, cfg config, out, progress io.Writer) (err error) {
	addr, label, closeRedis, err := benchredis.Get(ctx, cfg.addr)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, closeRedis()) }()
	admin, err := benchredis.Connect(addr)
	if err != nil {
		return err
	}
	defer admin.Close()
	cfg.redisLabel = label
	b := &bench{cfg: cfg, addr: addr, admin: admin, progress: progress}

	f := &results.File{}
	if f.Meta, err = b.meta(ctx); err != nil {
		return err
	}
	if !cfg.watchdog {
		scenarios := []results.Scenario{cfg.custom()}
		if cfg.suite {
			scenarios = cfg.suiteScenarios()
		}
		f.Meta.Scenarios = scenarios
		if f.Results, f.Sweep, err = b.scenarios(ctx, scenarios); err != nil {
			return err
		}
	}
	if cfg.suite && cfg.runs("d") && slices.Contains(cfg.libs, locks.Latchkey) {
		if f.Floor, err = b.floor(ctx); err != nil {
			return err
		}
	}
	if cfg.suite && cfg.runs(idleScenario.Name) {
		if f.Idle, err = b.idle(ctx, idleScenario); err != nil {
			return err
		}
	}
	if cfg.suite && cfg.runs(fleetName) {
		if f.Fleet, err = b.fleet(ctx); err != nil {
			return err
		}
	}
	if cfg.suite && cfg.runs("watchdog") || cfg.watchdog {
		if f.Watchdog, err = b.watchdogScale(ctx); err != nil {
			return fmt.Errorf("watchdog scale: %w", err)
		}
	}
	if err := benchredis.Flush(ctx, admin); err != nil {
		return err
	}
	if err := printResults(out, cfg.jsonOut, f); err != nil {
		return err
	}
	if cfg.out != "" {
		return results.Write(cfg.out, f)
	}
	return nil
}

// scenarios runs every scenario cfg.reps times, the runs (libraries and
// settings) interleaved within each repetition, and summarizes each run
// per scenario: the libraries at their defaults, and the sweep's points.
func (b *bench) scenarios(ctx context.Context, scenarios []results.Scenario) (defaults, sweep []results.Result, err error) {
	for _, sc := range scenarios {
		runs := b.cfg.runsFor(sc)
		samples, err := b.repeat(ctx, sc.Name, sc, runs, b.cfg.reps)
		if err != nil {
			return nil, nil, err
		}
		for i, run := range runs {
			if r := summarize(run, sc, samples[i]); run.isSweep(b.cfg) {
				sweep = append(sweep, r)
			} else {
				defaults = append(defaults, r)
			}
		}
	}
	return defaults, sweep, nil
}

// repeat runs every one of runs in sc reps times, interleaved within each
// repetition in runOrder's rotated order, and returns each run's samples
// (samples[i] are runs[i]'s, in the order of the repetitions). tag names sc
// in errors and in the progress lines.
func (b *bench) repeat(ctx context.Context, tag string, sc results.Scenario, runs []runSpec, reps int) ([][]*sample, error) {
	samples := make([][]*sample, len(runs))
	for rep := range reps {
		for _, i := range runOrder(len(runs), rep) {
			run := runs[i]
			s, err := b.runOnce(ctx, run, sc)
			if err != nil {
				return nil, fmt.Errorf("scenario %s, %s, repetition %d: %w", tag, run, rep+1, err)
			}
			fmt.Fprintf(b.progress, "%s rep %d/%d %-18s %s\n", tag, rep+1, reps, run, s.describe())
			samples[i] = append(samples[i], s)
		}
	}
	return samples, nil
}

// runOrder is the order in which repetition rep (from 0) runs n runs: the
// first shifts by one each repetition (A B C, B C A, C A B, ...), as in
// familybench, so that no run always goes first or follows the same one.
func runOrder(n, rep int) []int {
	order := make([]int, n)
	for j := range order {
		order[j] = (j + rep) % n
	}
	return order
}

// floor runs latchkey alone in floorScenario, cfg.reps times.
func (b *bench) floor(ctx context.Context) (*results.Result, error) {
	run := runSpec{lib: locks.Latchkey, dur: b.cfg.dur}
	samples, err := b.repeat(ctx, floorScenario.Name, floorScenario, []runSpec{run}, b.cfg.reps)
	if err != nil {
		return nil, err
	}
	r := summarize(run, floorScenario, samples[0])
	return &r, nil
}

// meta records the machine, the software and the command.
func (b *bench) meta(ctx context.Context) (results.Meta, error) {
	version, err := redisinfo.Version(ctx, b.admin)
	if err != nil {
		return results.Meta{}, err
	}
	h := results.Machine()
	m := results.Meta{GoVersion: h.GoVersion, CPUModel: h.CPUModel, Cores: h.Cores, Kernel: h.Kernel}
	m.Date = time.Now().UTC().Truncate(time.Second)
	m.Command = b.cfg.command
	m.RedisVersion = version
	m.Redis = b.cfg.redisLabel
	m.Reps = b.cfg.reps
	m.DurS = b.cfg.dur.Seconds()
	m.LeaseS = b.cfg.lease.Seconds()
	m.TimeoutS = b.cfg.timeout.Seconds()
	m.Libs = b.cfg.libs
	m.Modules = moduleVersions()
	m.Rotated = true // repeat's and idle's runOrder
	if b.cfg.suite && len(b.cfg.sweep) > 0 {
		m.SweepDurS = b.cfg.sweepDur.Seconds()
		for _, d := range b.cfg.sweep {
			m.SweepMS = append(m.SweepMS, ms(d))
		}
	}
	return m, nil
}

// printResults writes the results: JSON lines (one per library per scenario,
// the fleet's per library per size, then the watchdog scale) or tables.
func printResults(out io.Writer, asJSON bool, f *results.File) error {
	if !asJSON {
		return printTables(out, f)
	}
	enc := json.NewEncoder(out)
	for _, r := range slices.Concat(f.Results, f.Sweep) {
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	if f.Fleet != nil {
		for _, r := range f.Fleet.Results {
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
	}
	if f.Idle != nil {
		for _, r := range append([]results.IdleResult{f.Idle.Baseline}, f.Idle.Results...) {
			if err := enc.Encode(struct {
				Scenario string `json:"scenario"`
				results.IdleResult
			}{f.Idle.Scenario.Name, r}); err != nil {
				return err
			}
		}
	}
	if f.Watchdog != nil {
		return enc.Encode(struct {
			Scenario string `json:"scenario"`
			*results.Watchdog
		}{"watchdog", f.Watchdog})
	}
	return nil
}
