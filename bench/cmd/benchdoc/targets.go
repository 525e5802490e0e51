package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/latchkey/latchkey/bench/internal/locks"
	"github.com/latchkey/latchkey/bench/internal/results"
	"github.com/latchkey/latchkey/internal/units"
)

// Target thresholds (issue 10).
const (
	vsPeerThroughput = 1.0  // (a)–(e): latchkey acq/s ≥ this × best peer's
	vsPeerCPU        = 1.0  // (a)–(e): latchkey Redis CPU/acq ≤ this × best peer's
	p99Share         = 0.25 // (c)–(e): latchkey p99 ≤ this × best peer's
	idealShareD      = 0.95 // (d): latchkey acq/s ≥ this × ideal
	idleShare        = 0.05 // (f): latchkey cmds/s while blocked ≤ this × each poller's
	maxCallsPerTick  = 1000 // watchdog: renew calls per tick at watchdogLocks
	watchdogLocks    = 100000
)

// Scenarios the targets name.
var (
	allScenarios       = []string{"a", "b", "c", "d", "e"}
	contendedScenarios = []string{"c", "d", "e"}
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

// cycleUS is the uncontended cycle the (d) ideal uses: latchkey's median
// lock plus unlock in scenario a, 1/acq_per_s.
func cycleUS(f *results.File) (float64, bool) {
	a := f.Find(locks.Latchkey, "a")
	if a == nil || a.AcqPerS <= 0 {
		return 0, false
	}
	return 1e6 / a.AcqPerS, true
}

// targets evaluates every target that the results allow.
func targets(f *results.File) []target {
	var ts []target
	for _, sc := range contendedScenarios {
		ts = append(ts, frontierTarget(f, sc))
	}
	ts = append(ts, idleTargets(f.Idle)...)
	for _, sc := range allScenarios {
		ts = append(ts, versusPeers(f, sc, throughput, vsPeerThroughput))
	}
	for _, sc := range allScenarios {
		ts = append(ts, versusPeers(f, sc, cpu, vsPeerCPU))
	}
	for _, sc := range contendedScenarios {
		ts = append(ts, versusPeers(f, sc, p99, p99Share))
	}
	ts = append(ts, idealTarget(f))
	return append(ts, watchdogTargets(f.Watchdog)...)
}

// versusPeers is "latchkey's m in scenario is at least as good as factor ×
// the best peer's".
func versusPeers(f *results.File, scenario string, m metric, factor float64) target {
	rel := "≤"
	if m.better(1, 0) {
		rel = "≥"
	}
	t := target{what: fmt.Sprintf("(%s) latchkey %s %s %.2f × best peer's", scenario, m.name, rel, factor), status: notMeasured}
	r := f.Find(locks.Latchkey, scenario)
	p := bestPeer(f, scenario, m)
	if r == nil || r.Acquisitions == 0 || p == nil {
		return t
	}
	t.achieved = fmt.Sprintf("%s = %s %s's %s", m.format(m.of(r)), fmtRatio(m.of(r), m.of(p)), named(p.Lib, p.Setting), m.format(m.of(p)))
	t.status = verdict(!m.better(factor*m.of(p), m.of(r)))
	return t
}

func idealTarget(f *results.File) target {
	t := target{what: fmt.Sprintf("(d) latchkey acq/s ≥ %.2f × ideal, ideal = 1/(cs + uncontended cycle)", idealShareD), status: notMeasured}
	d := f.Find(locks.Latchkey, "d")
	c, ok := cycleUS(f)
	if d == nil || d.Acquisitions == 0 || !ok {
		return t
	}
	ideal := 1e6 / (d.CSUS + c)
	t.achieved = fmt.Sprintf("%s acq/s = %s ideal (%s acq/s: cs %s + cycle %s)",
		fmtNum(d.AcqPerS), fmtRatio(d.AcqPerS, ideal), fmtNum(ideal), units.Micros(d.CSUS), units.Micros(c))
	t.status = verdict(d.AcqPerS >= idealShareD*ideal)
	if fl := f.Floor; fl != nil && fl.Acquisitions > 0 {
		// The ideal adds a cycle measured without a critical section to
		// the section; one goroutine alone measures both together.
		t.achieved += fmt.Sprintf("; latchkey alone with one goroutine and the same cs runs %s acq/s = %s ideal, so the contended run is %s of that ceiling",
			fmtNum(fl.AcqPerS), fmtRatio(fl.AcqPerS, ideal), fmtRatio(d.AcqPerS, fl.AcqPerS))
	}
	return t
}

// frontierTarget: latchkey's (Redis CPU/acq, p99) lies below the spin
// frontier, so that no latchkey-spin setting is at or below it on both.
func frontierTarget(f *results.File, scenario string) target {
	t := target{what: fmt.Sprintf("(%s) spin frontier: latchkey's p99 lower than every latchkey-spin setting's of equal or lower Redis CPU/acq, "+
		"and its Redis CPU/acq lower than every one's of equal or lower p99", scenario), status: notMeasured}
	l := f.Find(locks.Latchkey, scenario)
	spins := f.Settings(locks.LatchkeySpin, scenario)
	if l == nil || l.Acquisitions == 0 || len(spins) == 0 {
		return t
	}
	var beaten, all []string
	for _, s := range sortedSettings(spins) {
		if s.Acquisitions == 0 {
			continue
		}
		cmp := fmt.Sprintf("%s: p99 %s, CPU %s", pointLabel(s), fmtRatio(p99.of(l), p99.of(s)), fmtRatio(cpu.of(l), cpu.of(s)))
		all = append(all, cmp)
		if cpu.of(s) <= cpu.of(l) && p99.of(s) <= p99.of(l) {
			beaten = append(beaten, cmp)
		}
	}
	if len(all) == 0 {
		return t
	}
	t.achieved = fmt.Sprintf("latchkey p99 %s at %s/acq; latchkey's figures as multiples of each latchkey-spin setting's: %s",
		units.Micros(p99.of(l)), units.Micros(cpu.of(l)), strings.Join(all, "; "))
	if len(beaten) > 0 {
		t.achieved = fmt.Sprintf("at or below latchkey on both: %s. %s", strings.Join(beaten, "; "), t.achieved)
	}
	t.status = verdict(len(beaten) == 0)
	return t
}

// idleTargets: latchkey's blocked waiters send Redis next to nothing, next
// to latchkey-spin at its default backoff and to every polling peer.
func idleTargets(id *results.Idle) []target {
	spin := target{what: fmt.Sprintf("(f) latchkey Redis cmds/s while blocked ≤ %.2f × latchkey-spin's at its default backoff", idleShare), status: notMeasured}
	peers := target{what: fmt.Sprintf("(f) latchkey Redis cmds/s while blocked ≤ %.2f × every polling peer's", idleShare), status: notMeasured}
	if id == nil {
		return []target{spin, peers}
	}
	l := idleFind(id, locks.Latchkey)
	if l == nil || l.IdleS.Median == 0 {
		return []target{spin, peers}
	}
	lc := l.CmdsPerS.Median
	if s := idleFind(id, locks.LatchkeySpin); s != nil && s.IdleS.Median > 0 {
		spin.achieved = fmt.Sprintf("%s cmds/s = %s %s's %s", fmtNum(lc), fmtRatio(lc, s.CmdsPerS.Median), named(s.Lib, s.Setting), fmtNum(s.CmdsPerS.Median))
		spin.status = verdict(lc <= idleShare*s.CmdsPerS.Median)
	}
	var parts []string
	ok := true
	for _, lib := range locks.Peers {
		p := idleFind(id, lib)
		if p == nil || p.IdleS.Median == 0 || !locks.Tunable(lib) {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %s (latchkey's %s = %s)", named(p.Lib, p.Setting), fmtNum(p.CmdsPerS.Median), fmtNum(lc), fmtRatio(lc, p.CmdsPerS.Median)))
		ok = ok && lc <= idleShare*p.CmdsPerS.Median
	}
	if len(parts) > 0 {
		peers.achieved = "cmds/s: " + strings.Join(parts, "; ")
		peers.status = verdict(ok)
	}
	return []target{spin, peers}
}

// idleFind returns lib's idle result, or nil.
func idleFind(id *results.Idle, lib string) *results.IdleResult {
	for i := range id.Results {
		if id.Results[i].Lib == lib {
			return &id.Results[i]
		}
	}
	return nil
}

func watchdogTargets(w *results.Watchdog) []target {
	calls := target{what: fmt.Sprintf("watchdog: ≤ %s renew calls per tick for %s locks", spaced(maxCallsPerTick), spaced(watchdogLocks)), status: notMeasured}
	gor := target{what: "watchdog: goroutine count constant, not proportional to locks held", status: notMeasured}
	if w == nil {
		return []target{calls, gor}
	}
	for _, s := range w.Steps {
		if s.Locks == watchdogLocks {
			calls.achieved = fmt.Sprintf("%s calls/tick (%s EVALSHA/tick in Redis' commandstats), pipelined", fmtNum(s.CallsPerTick), fmtNum(s.EvalshaPerTick))
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
