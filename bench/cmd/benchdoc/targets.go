package main

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/latchkey/latchkey/bench/internal/locks"
	"github.com/latchkey/latchkey/bench/internal/results"
	"github.com/latchkey/latchkey/internal/units"
)

// Target thresholds.
const (
	idealShareD     = 0.93 // (d): latchkey acq/s ≥ this × ideal
	p99ShareD       = 0.25 // (d): latchkey p99 ≤ this × best peer's
	cpuVsSpinD      = 0.2  // (d): latchkey CPU/acq ≤ this × latchkey-spin's
	throughputVsC   = 1.5  // (c): latchkey acq/s ≥ this × best peer's
	throughputVsB   = 1.25 // (b): latchkey acq/s ≥ this × best peer's
	maxCallsPerTick = 1000 // watchdog: renew calls per tick at watchdogLocks
	watchdogLocks   = 100000
)

// goroutineSteps are the lock counts at which the watchdog's goroutine count
// must be the idle one.
var goroutineSteps = []int{1000, 10000, watchdogLocks}

// status of a target.
type status string

const (
	met         status = "met"
	missed      status = "missed"
	notMeasured status = "not measured"
)

// target is one line of the Targets section.
type target struct {
	what     string // the goal, in words
	achieved string // the figure, with what it was compared against
	status   status
}

func verdict(ok bool) status {
	if ok {
		return met
	}
	return missed
}

// handoffUS is the handoff the (d) ideal uses: the median uncontended lock
// plus unlock cycle of latchkey, 1/acq_per_s of its scenario a.
func handoffUS(f *results.File) (float64, bool) {
	a := f.Find(locks.Latchkey, "a")
	if a == nil || a.AcqPerS <= 0 {
		return 0, false
	}
	return 1e6 / a.AcqPerS, true
}

// targets evaluates every target that the results allow.
func targets(f *results.File) []target {
	ts := dTargets(f)
	ts = append(ts,
		beatPeers(f, "c", throughputVsC),
		beatPeers(f, "b", throughputVsB),
	)
	return append(ts, watchdogTargets(f.Watchdog)...)
}

func dTargets(f *results.File) []target {
	d := f.Find(locks.Latchkey, "d")
	tIdeal := target{what: fmt.Sprintf("(d) latchkey acq/s ≥ %.2f × ideal, ideal = 1/(cs + handoff)", idealShareD), status: notMeasured}
	tP99 := target{what: fmt.Sprintf("(d) latchkey p99 wait ≤ %.2f × best peer's", p99ShareD), status: notMeasured}
	tCPU := target{what: "(d) latchkey Redis CPU/acq ≤ best peer's", status: notMeasured}
	tSpin := target{what: fmt.Sprintf("(d) latchkey Redis CPU/acq ≤ %.1f × latchkey-spin's", cpuVsSpinD), status: notMeasured}
	if d == nil || d.Acquisitions == 0 {
		return []target{tIdeal, tP99, tCPU, tSpin}
	}
	if h, ok := handoffUS(f); ok {
		ideal := 1e6 / (d.CSUS + h)
		tIdeal.achieved = fmt.Sprintf("%s acq/s = %s ideal (%s acq/s: cs %s + handoff %s)",
			fmtNum(d.AcqPerS), fmtRatio(d.AcqPerS, ideal), fmtNum(ideal), units.Micros(d.CSUS), units.Micros(h))
		tIdeal.status = verdict(d.AcqPerS >= idealShareD*ideal)
	}
	if p := bestPeer(f, "d", p99); p != nil {
		tP99.achieved = fmt.Sprintf("%s = %s %s's %s", units.Micros(d.P99US), fmtRatio(d.P99US, p.P99US), p.Lib, units.Micros(p.P99US))
		tP99.status = verdict(d.P99US <= p99ShareD*p.P99US)
	}
	if p := bestPeer(f, "d", cpu); p != nil {
		tCPU.achieved = fmt.Sprintf("%sµs = %s %s's %sµs", fmtNum(d.RedisCPUUSPerAcq), fmtRatio(d.RedisCPUUSPerAcq, p.RedisCPUUSPerAcq), p.Lib, fmtNum(p.RedisCPUUSPerAcq))
		tCPU.status = verdict(d.RedisCPUUSPerAcq <= p.RedisCPUUSPerAcq)
	}
	if s := f.Find(locks.LatchkeySpin, "d"); s != nil && s.Acquisitions > 0 {
		tSpin.achieved = fmt.Sprintf("%sµs = %s latchkey-spin's %sµs", fmtNum(d.RedisCPUUSPerAcq), fmtRatio(d.RedisCPUUSPerAcq, s.RedisCPUUSPerAcq), fmtNum(s.RedisCPUUSPerAcq))
		tSpin.status = verdict(d.RedisCPUUSPerAcq <= cpuVsSpinD*s.RedisCPUUSPerAcq)
	}
	return []target{tIdeal, tP99, tCPU, tSpin}
}

// beatPeers is "latchkey's throughput in scenario ≥ factor × best peer's".
func beatPeers(f *results.File, scenario string, factor float64) target {
	t := target{what: fmt.Sprintf("(%s) latchkey acq/s ≥ %.2f × best peer's", scenario, factor), status: notMeasured}
	r := f.Find(locks.Latchkey, scenario)
	p := bestPeer(f, scenario, throughput)
	if r == nil || p == nil {
		return t
	}
	t.achieved = fmt.Sprintf("%s acq/s = %s %s's %s", fmtNum(r.AcqPerS), fmtRatio(r.AcqPerS, p.AcqPerS), p.Lib, fmtNum(p.AcqPerS))
	t.status = verdict(r.AcqPerS >= factor*p.AcqPerS)
	return t
}

func watchdogTargets(w *results.Watchdog) []target {
	calls := target{what: fmt.Sprintf("watchdog: ≤ %s renew calls per tick for %s locks", spaced(maxCallsPerTick), spaced(watchdogLocks)), status: notMeasured}
	gor := target{what: "watchdog: goroutine count constant, not proportional to locks held", status: notMeasured}
	if w == nil {
		return []target{calls, gor}
	}
	for _, s := range w.Steps {
		if s.Locks == watchdogLocks {
			calls.achieved = fmt.Sprintf("%s calls/tick (%s EVALSHA/tick in Redis' commandstats), all in one pipeline", fmtNum(s.CallsPerTick), fmtNum(s.EvalshaPerTick))
			calls.status = verdict(s.CallsPerTick <= maxCallsPerTick)
		}
	}
	// Judged only when every one of goroutineSteps was measured.
	counts := []int{w.GoroutinesIdle}
	var steps []results.WatchdogStep
	for _, n := range goroutineSteps {
		i := slices.IndexFunc(w.Steps, func(s results.WatchdogStep) bool { return s.Locks == n })
		if i < 0 {
			return []target{calls, gor}
		}
		steps = append(steps, w.Steps[i])
		counts = append(counts, w.Steps[i].Goroutines)
	}
	gor.achieved = fmt.Sprintf("%v goroutines idle, then at %s locks", counts[0], stepList(steps))
	gor.status = verdict(slices.Min(counts) == slices.Max(counts))
	return []target{calls, gor}
}

// spaced prints n with a space between groups of three digits: "100 000".
func spaced(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + " " + s[i:]
	}
	return s
}

// stepList prints "1000 → 12, 10000 → 12".
func stepList(steps []results.WatchdogStep) string {
	s := ""
	for i, st := range steps {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%d → %d", st.Locks, st.Goroutines)
	}
	return s
}
