package main

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/redis/rueidis"

	"github.com/latchkey/latchkey/bench/internal/benchredis"
	"github.com/latchkey/latchkey/bench/internal/locks"
	"github.com/latchkey/latchkey/bench/internal/results"
	"github.com/latchkey/latchkey/internal/redisinfo"
)

// Scenario (f), idle waiting.
const (
	// sampleEvery is the period of Redis' readings in an idle run.
	sampleEvery = 100 * time.Millisecond
	// idleMargin keeps a reading interval this far from every grant,
	// release and the run's start and end for it to count as idle: a
	// release wakes waiters, a start sends every goroutine to Lock, and
	// an end makes every waiter give up.
	idleMargin = 250 * time.Millisecond
	// idleSettle is how long after the start of a run no interval counts:
	// every goroutine has just called Lock, and a waiter's first steps (a
	// try, a subscription, a queued try) are the cost of starting to wait,
	// not of being blocked; under load (-race) they can take longer than
	// idleMargin.
	idleSettle = time.Second
	// baselineDur is how long the baseline reads Redis with no client.
	baselineDur = 2 * time.Second
)

// idleScenario is (f): the holders keep the lock 2s each, so that nearly
// all of a run is waiting.
var idleScenario = results.Scenario{Name: "f", Label: "idle waiting", Procs: 4, G: 16, Keys: 1, CSUS: 2e6}

// reading is one reading of Redis' counters.
type reading struct {
	at   time.Time // midway through the INFO round trip
	cpu  float64   // CPU seconds the server has used
	cmds int64     // lock commands since CONFIG RESETSTAT (redisinfo.LockCommands)
}

// read takes a reading with one INFO for both sections.
func read(ctx context.Context, rc rueidis.Client) (reading, error) {
	t0 := time.Now()
	s, err := rc.Do(ctx, rc.B().Info().Section("cpu", "commandstats").Build()).ToString()
	if err != nil {
		return reading{}, fmt.Errorf("INFO cpu commandstats: %w", err)
	}
	t1 := time.Now()
	info := redisinfo.Parse(s)
	cpu, err := redisinfo.CPUSeconds(info)
	if err != nil {
		return reading{}, err
	}
	return reading{at: t0.Add(t1.Sub(t0) / 2), cpu: cpu, cmds: redisinfo.LockCommands(redisinfo.CommandCalls(info))}, nil
}

// sampler reads Redis every sampleEvery from start to end, in a goroutine
// of its own.
type sampler struct {
	cancel context.CancelFunc
	done   chan struct{}
	points []reading
	err    error
}

func startSampler(ctx context.Context, rc rueidis.Client, start, end time.Time) *sampler {
	ctx, cancel := context.WithCancel(ctx)
	s := &sampler{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for at := start; !at.After(end); at = at.Add(sampleEvery) {
			t := time.NewTimer(time.Until(at))
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			r, err := read(ctx, rc)
			if err != nil {
				if ctx.Err() == nil {
					s.err = err
				}
				return
			}
			s.points = append(s.points, r)
		}
	}()
	return s
}

// wait returns the readings once the last one is taken.
func (s *sampler) wait() ([]reading, error) {
	<-s.done
	return s.points, s.err
}

// stop ends the readings early and waits for the goroutine.
func (s *sampler) stop() {
	s.cancel()
	<-s.done
}

// idleLoad adds up Redis' work over the intervals between consecutive
// readings that stay margin away from every event: the time they cover,
// the lock commands and the CPU seconds in them.
func idleLoad(points []reading, events []time.Time, margin time.Duration) (time.Duration, int64, float64) {
	var idle time.Duration
	var cmds int64
	var cpu float64
	for i := 1; i < len(points); i++ {
		lo, hi := points[i-1].at.Add(-margin), points[i].at.Add(margin)
		busy := false
		for _, e := range events {
			if !e.Before(lo) && !e.After(hi) {
				busy = true
				break
			}
		}
		if !busy {
			idle += points[i].at.Sub(points[i-1].at)
			cmds += points[i].cmds - points[i-1].cmds
			cpu += points[i].cpu - points[i-1].cpu
		}
	}
	return idle, cmds, cpu
}

// idleFigures are one idle run's figures, NaN without idle time.
type idleFigures struct {
	idleS, cmdsPerS, cpuMSPerS, grants float64
}

func (s *sample) idleFigures() idleFigures {
	// The run's end is an event too: every waiter gives up at once, and
	// its last steps (a goroutine that got the baton at that instant tries
	// once, the client leaves the queue) are not waiting.
	events := []time.Time{s.start, s.start.Add(s.dur)}
	for _, ns := range s.events {
		events = append(events, time.Unix(0, ns))
	}
	points := s.points
	for len(points) > 0 && points[0].at.Before(s.start.Add(idleSettle)) {
		points = points[1:]
	}
	idle, cmds, cpu := idleLoad(points, events, idleMargin)
	f := idleFigures{idleS: idle.Seconds(), cmdsPerS: math.NaN(), cpuMSPerS: math.NaN(), grants: float64(len(s.events) / 2)}
	if idle > 0 {
		f.cmdsPerS = float64(cmds) / idle.Seconds()
		f.cpuMSPerS = cpu * 1e3 / idle.Seconds()
	}
	return f
}

// idle runs scenario sc, (f), cfg.reps times: in each repetition the
// baseline, then every library at its default setting in runOrder's
// rotated order.
func (b *bench) idle(ctx context.Context, sc results.Scenario) (*results.Idle, error) {
	runs := make([]runSpec, len(b.cfg.libs))
	for i, lib := range b.cfg.libs {
		runs[i] = runSpec{lib: lib, dur: b.cfg.idleDur, idle: true}
	}
	samples := make([][]*sample, len(runs))
	var base []*sample
	for rep := range b.cfg.reps {
		s, err := b.baseline(ctx)
		if err != nil {
			return nil, fmt.Errorf("scenario %s, baseline, repetition %d: %w", sc.Name, rep+1, err)
		}
		fmt.Fprintf(b.progress, "%s rep %d/%d %-14s %s\n", sc.Name, rep+1, b.cfg.reps, "baseline", s.describeIdle())
		base = append(base, s)
		for _, i := range runOrder(len(runs), rep) {
			run := runs[i]
			s, err := b.runOnce(ctx, run, sc)
			if err != nil {
				return nil, fmt.Errorf("scenario %s, %s, repetition %d: %w", sc.Name, run, rep+1, err)
			}
			fmt.Fprintf(b.progress, "%s rep %d/%d %-14s %s\n", sc.Name, rep+1, b.cfg.reps, run, s.describeIdle())
			samples[i] = append(samples[i], s)
		}
	}
	out := &results.Idle{
		Scenario: sc, DurS: b.cfg.idleDur.Seconds(), SampleMS: ms(sampleEvery), MarginMS: ms(idleMargin), SettleMS: ms(idleSettle), EndExcluded: true,
		Baseline: summarizeIdle(runSpec{lib: "baseline"}, base),
	}
	out.Baseline.Setting = "Redis with no client but the sampler"
	for i, run := range runs {
		out.Results = append(out.Results, summarizeIdle(run, samples[i]))
	}
	return out, nil
}

// baseline reads Redis for baselineDur with no client connected but ours.
func (b *bench) baseline(ctx context.Context) (*sample, error) {
	if err := benchredis.Flush(ctx, b.admin); err != nil {
		return nil, err
	}
	if err := b.admin.Do(ctx, b.admin.B().ConfigResetstat().Build()).Error(); err != nil {
		return nil, fmt.Errorf("CONFIG RESETSTAT: %w", err)
	}
	start := time.Now().Add(startMargin)
	points, err := startSampler(ctx, b.admin, start, start.Add(baselineDur)).wait()
	if err != nil {
		return nil, err
	}
	return &sample{dur: baselineDur, start: start, points: points}, nil
}

// summarizeIdle is the median and the range of each idle figure over the
// repetitions, and the totals of what went wrong.
func summarizeIdle(run runSpec, reps []*sample) results.IdleResult {
	figs := make([]idleFigures, len(reps))
	var total counts
	for i, s := range reps {
		figs[i] = s.idleFigures()
		total.add(s.counts)
	}
	r := results.IdleResult{
		Lib: run.lib, Reps: len(reps),
		IdleS:      results.SpreadOver(figs, func(f idleFigures) float64 { return f.idleS }),
		CmdsPerS:   results.SpreadOver(figs, func(f idleFigures) float64 { return f.cmdsPerS }),
		CPUMSPerS:  results.SpreadOver(figs, func(f idleFigures) float64 { return f.cpuMSPerS }),
		Grants:     results.SpreadOver(figs, func(f idleFigures) float64 { return f.grants }),
		Violations: total.Violations, Errors: total.Errors, Timeouts: total.Timeouts, LastError: total.LastError,
	}
	if run.lib != "baseline" {
		r.Setting, r.BackoffMS = locks.Setting(run.lib, run.backoff), run.backoffMS()
	}
	return r
}

// describeIdle is a one-line progress note for an idle run.
func (s *sample) describeIdle() string {
	f := s.idleFigures()
	return fmt.Sprintf("%8.1f cmds/s  %6.2f CPU ms/s  over %.1fs idle, %.0f grants, %d violations, %d errors",
		f.cmdsPerS, f.cpuMSPerS, f.idleS, f.grants, s.Violations, s.Errors)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
