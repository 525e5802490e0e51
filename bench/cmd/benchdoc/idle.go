package main

import (
	"bytes"
	"fmt"

	"github.com/latchkey/latchkey/bench/internal/results"
	"github.com/latchkey/latchkey/internal/units"
)

// writeIdle is scenario (f): Redis' load while every waiter is blocked.
func writeIdle(b *bytes.Buffer, f *results.File) {
	id := f.Idle
	if id == nil {
		return
	}
	sc := id.Scenario
	fmt.Fprintf(b, "## (f) Idle waiting\n\n**%d × %d goroutines, %d %s, holders keep it %s.** "+
		"Redis' work per second while nobody can acquire: readings every %s, counted only %s after the run's start "+
		"(when every waiter is just starting to wait) and at least %s away from every grant and release%s. A waiter blocked on pub/sub or an invalidation should cost Redis nothing until its turn; "+
		"a poller costs it a try per backoff. Runs of %gs, medians over %d repetitions, min–max in parentheses. "+
		"The baseline is Redis with no client but the sampler: the floor of its CPU (the readings, its own timers).\n\n",
		sc.Procs, sc.G, sc.Keys, plural(sc.Keys, "key", "keys"), units.Micros(sc.CSUS), units.Micros(id.SampleMS*1e3), units.Micros(id.SettleMS*1e3), units.Micros(id.MarginMS*1e3), endClause(id),
		id.DurS, f.Meta.Reps)
	b.WriteString(headerN(2, "library", "setting", "Redis cmds/s while blocked", "Redis CPU ms/s while blocked", "idle time counted", "holds per run", "violations", "errors"))
	for _, r := range append([]results.IdleResult{id.Baseline}, id.Results...) {
		b.WriteString(row(r.Lib, r.Setting, spreadCell(r.CmdsPerS, fmtNum), spreadCell(r.CPUMSPerS, fmtNum),
			spreadCell(r.IdleS, func(s float64) string { return units.Micros(s * 1e6) }), spreadCell(r.Grants, fmtCount),
			fmt.Sprint(r.Violations), idleErrors(r)))
	}
	b.WriteString("\n")
}

// idleErrors is errorsCell for an idle result.
func idleErrors(r results.IdleResult) string {
	return errorsCell(&results.Result{Errors: r.Errors, Timeouts: r.Timeouts, LastError: r.LastError})
}

// endClause names the run's end among the margin's events when the run kept
// it (results from before it did not).
func endClause(id *results.Idle) string {
	if id.EndExcluded {
		return ", and from the run's end"
	}
	return ""
}
