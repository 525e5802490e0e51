package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/redis/rueidis"

	"github.com/latchkey/latchkey/bench/internal/benchredis"
	"github.com/latchkey/latchkey/bench/internal/results"
	"github.com/latchkey/latchkey/internal/latency"
	"github.com/latchkey/latchkey/internal/redisinfo"
)

const (
	// startMargin is how far ahead of "now" the workers' common start
	// instant is set, so that every worker has it before it comes.
	startMargin = 50 * time.Millisecond
	// runSlack bounds a run beyond its measured duration: start-up,
	// warm-up, the last holds and the reports.
	runSlack = 2 * time.Minute
)

// bench is what every run shares.
type bench struct {
	cfg      config
	addr     string
	admin    rueidis.Client
	progress io.Writer // one line per run
}

// sample is one run of one library in one scenario.
type sample struct {
	dur          time.Duration
	acquisitions int64
	attempts     int64 // tries to take the lock, when the library counts them
	waits        latency.Histogram
	counts
	cpuSeconds float64          // Redis CPU used during the run
	commands   int64            // Redis commands run for the locks
	calls      map[string]int64 // Redis' calls of each command (commandstats)
	// Idle runs (scenario f) only: the workers' grant and release
	// instants (unix ns) and Redis' readings during the run.
	start  time.Time
	events []int64
	points []reading
}

// runOnce runs run in sc once: FLUSHALL, start the workers, CONFIG
// RESETSTAT once they are all ready, release them together, and read Redis'
// counters once they have all exited. An idle run also reads them every
// sampleEvery while it lasts.
func (b *bench) runOnce(ctx context.Context, run runSpec, sc results.Scenario) (*sample, error) {
	ctx, cancel := context.WithTimeout(ctx, run.ramp+run.dur+runSlack)
	defer cancel()
	if err := benchredis.Flush(ctx, b.admin); err != nil {
		return nil, err
	}
	params := make([]workerParams, sc.Procs)
	for i := range params {
		params[i] = workerParams{
			Lib: run.lib, Addr: b.addr, Proc: i, G: sc.G, Keys: sc.Keys, CS: durOfUS(sc.CSUS),
			Dur: run.dur, Ramp: run.ramp, Lease: b.cfg.lease, Timeout: run.timeout(b.cfg.timeout),
			Backoff: run.backoff, Events: run.idle,
		}
	}
	ws, err := spawn(ctx, params)
	if err != nil {
		return nil, err
	}
	defer ws.stop()
	if err := ws.awaitReady(); err != nil {
		return nil, err
	}
	var win *benchredis.Window
	open := func() (err error) {
		win, err = benchredis.OpenWindow(ctx, b.admin)
		return err
	}
	if run.ramp == 0 {
		if err := open(); err != nil {
			return nil, err
		}
	}
	start := time.Now().Add(startMargin)
	if err := ws.release(start); err != nil {
		return nil, err
	}
	var cpuSeconds float64
	var calls map[string]int64
	if run.ramp > 0 {
		// Redis is read over the measured duration only: the ramp's rush
		// and the workers' wind-down (an UNSUBSCRIBE each at Close, which
		// waits for letClose) are left out, as the workers leave out the
		// ramp's grants.
		from := start.Add(run.ramp)
		if err := sleepUntil(ctx, from); err != nil {
			return nil, err
		}
		if err := open(); err != nil {
			return nil, err
		}
		if err := sleepUntil(ctx, from.Add(run.dur)); err != nil {
			return nil, err
		}
		if cpuSeconds, calls, err = win.Close(ctx); err != nil {
			return nil, err
		}
		if err := ws.letClose(); err != nil {
			return nil, err
		}
	}
	var smp *sampler
	if run.idle {
		smp = startSampler(ctx, b.admin, start, start.Add(run.dur))
		defer smp.stop()
	}
	reports, err := ws.collect()
	if err != nil {
		return nil, err
	}
	var points []reading
	if smp != nil {
		if points, err = smp.wait(); err != nil {
			return nil, err
		}
	}
	if run.ramp == 0 {
		if cpuSeconds, calls, err = win.Close(ctx); err != nil {
			return nil, err
		}
	}
	s := merge(reports)
	s.dur = run.dur
	s.cpuSeconds = cpuSeconds
	s.commands = redisinfo.LockCommands(calls)
	s.calls = calls
	s.start, s.points = start, points
	return s, nil
}

// merge adds up the workers' reports.
func merge(reports []report) *sample {
	s := &sample{}
	for _, r := range reports {
		s.acquisitions += r.Acquisitions
		s.attempts += r.Attempts
		s.waits.Merge(&r.Waits)
		s.events = append(s.events, r.EventsNS...)
		s.add(r.counts)
	}
	return s
}

// describe is a one-line progress note for a run.
func (s *sample) describe() string {
	return fmt.Sprintf("%8.0f acq/s  p99 %s  %d violations, %d errors", float64(s.acquisitions)/s.dur.Seconds(),
		s.waits.Quantile(99).Round(time.Microsecond), s.Violations, s.Errors)
}

// sleepUntil waits until t, or returns ctx's error.
func sleepUntil(ctx context.Context, t time.Time) error {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
