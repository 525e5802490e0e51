package main

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/latchkey/latchkey/bench/internal/results"
	"github.com/latchkey/latchkey/internal/units"
)

// familyFig is one figure of a family run, with its column heading and
// its format.
type familyFig struct {
	head   string
	of     func(r *results.FamilyRep) float64
	format func(float64) string
}

func perS(kind string) func(r *results.FamilyRep) float64 {
	return func(r *results.FamilyRep) float64 { return r.PerS(kind) }
}

func wait(kind string, p int) func(r *results.FamilyRep) float64 {
	return func(r *results.FamilyRep) float64 { return r.Wait(kind, p) }
}

// familyFigs are a scenario's columns: throughput (of every kind, then of
// each when there are several), each kind's p50 and p99 wait, and Redis'
// cost per acquisition.
func familyFigs(sc *results.FamilyScenario) (figs, ratios []familyFig) {
	total := familyFig{"acq/s", perS(""), fmtCount0}
	figs, ratios = []familyFig{total}, []familyFig{total}
	several := len(sc.Kinds) > 1
	for _, kind := range sc.Kinds {
		if several {
			figs = append(figs, familyFig{kind + "s/s", perS(kind), fmtCount0})
		}
	}
	for _, kind := range sc.Kinds {
		prefix := kind + " "
		if !several {
			prefix = ""
		}
		p99 := familyFig{prefix + "p99 wait", wait(kind, 99), units.Micros}
		figs = append(figs, familyFig{prefix + "p50 wait", wait(kind, 50), units.Micros}, p99)
		ratios = append(ratios, p99)
	}
	cpu := familyFig{"Redis CPU/acq", (*results.FamilyRep).CPUUSPerAcq, units.Micros}
	figs = append(figs, cpu, familyFig{"Redis cmds/acq", (*results.FamilyRep).CmdsPerAcq, fmtNum})
	return figs, append(ratios, cpu)
}

func fmtCount0(x float64) string { return fmt.Sprintf("%.0f", x) }

// writeFamily renders familybench's results: per scenario a table of
// medians (min–max) and one of ratios to the scenario's baseline. f nil
// means the file does not exist.
func writeFamily(b *bytes.Buffer, f *results.Family, path string) {
	b.WriteString("## Lock family (issue 11)\n\n")
	if f == nil {
		fmt.Fprintf(b, "Not run (`%s` does not exist: `make bench` runs `bench/cmd/familybench`).\n\n", path)
		return
	}
	m := f.Meta
	fmt.Fprintf(b, "latchkey's primitives besides Mutex against their spin variants and against a plain Mutex, from `bench/cmd/familybench` "+
		"(`bench/results/family.json`), on %s: %s, %d cores, %s, Redis %s (%s). Command: `%s`, run in `bench/`. "+
		"Each of %d %s ran every variant once for %gs, in an order rotated from one repetition to the next, each run after FLUSHALL; "+
		"figures are medians over the repetitions with their min–max. Ratios are taken repetition by repetition against the baseline their table names "+
		"(the two ran in the same repetition, seconds apart), then their median (min–max). "+
		"Every goroutine loops: draw the kind of operation, acquire (with a %gs lease and a %gs deadline, cut at the end of the run), "+
		"hold for the scenario's hold with a nanosleep (which overshoots by the kernel's timer slack, 50–100µs), release. The goroutines are spread over latchkey clients in one process, "+
		"each client on its own rueidis connection.\n\n",
		m.Date.Format("2006-01-02 15:04 MST"), m.CPUModel, m.Cores, m.Kernel, m.RedisVersion, m.Redis, m.Command,
		m.Reps, plural(m.Reps, "repetition", "repetitions"), m.DurS, m.LeaseS, m.TimeoutS)
	for i := range f.Scenarios {
		writeFamilyScenario(b, &f.Scenarios[i])
	}
	b.WriteString("A wait is from the call to the grant; an acquire still waiting when a run ends adds its wait so far (a lower bound) and no acquisition, " +
		"so that starved waiters show in the tail. Redis CPU/acq is the increase of `used_cpu_sys + used_cpu_user` (INFO cpu) over the run " +
		"divided by the acquisitions of every kind; Redis cmds/acq is INFO commandstats' calls over the run, without the ones [Method](#method) " +
		"leaves out, divided the same way. Violations are checked in the process, which holds every client: a writer (or a Mutex holder) beside any other " +
		"holder, or more holders than a semaphore's permits.\n\n")
}

func writeFamilyScenario(b *bytes.Buffer, sc *results.FamilyScenario) {
	fmt.Fprintf(b, "### %s: %s: %d clients × %d goroutines, one lock, hold %s\n\n", sc.Name, sc.Label, sc.Clients, sc.G, units.Micros(sc.CSUS))
	if len(sc.Variants) == 0 {
		return
	}
	figs, ratios := familyFigs(sc)
	heads := []string{"variant"}
	for _, fig := range figs {
		heads = append(heads, fig.head)
	}
	b.WriteString(header(heads...))
	var faults []string
	for i := range sc.Variants {
		v := &sc.Variants[i]
		cells := []string{v.Name}
		for _, fig := range figs {
			cells = append(cells, spreadCell(v.Spread(fig.of), fig.format))
		}
		b.WriteString(row(cells...))
		if viol, errs, timeouts, last := v.Totals(); viol+errs+timeouts > 0 {
			faults = append(faults, fmt.Sprintf("%s: %d violations, %d errors, %d timeouts (last error: %s)", v.Name, viol, errs, timeouts, last))
		}
	}
	b.WriteString("\n")
	base := sc.Variant(sc.Baseline)
	if base != nil && len(sc.Variants) > 1 {
		heads = []string{"variant ÷ " + sc.Baseline}
		for _, fig := range ratios {
			heads = append(heads, fig.head)
		}
		b.WriteString(header(heads...))
		for i := range sc.Variants {
			v := &sc.Variants[i]
			if v == base {
				continue
			}
			cells := []string{v.Name}
			for _, fig := range ratios {
				sp := v.Ratio(base, fig.of)
				cells = append(cells, fmtSpread(sp.Median, sp.Min, sp.Max, fmtTimes))
			}
			b.WriteString(row(cells...))
		}
		b.WriteString("\n")
	}
	var descs []string
	for _, v := range sc.Variants {
		descs = append(descs, fmt.Sprintf("%s is %s", v.Name, v.Desc))
	}
	if sc.Note != "" {
		b.WriteString(strings.TrimSuffix(sc.Note, ".") + ". ")
	}
	b.WriteString(strings.Join(descs, "; ") + ".")
	if len(faults) == 0 {
		b.WriteString(" No violations, errors or timeouts in any run.\n\n")
	} else {
		b.WriteString(" " + strings.Join(faults, "; ") + ".\n\n")
	}
}

// fmtTimes prints a ratio as "1.23×".
func fmtTimes(x float64) string { return fmtRatio(x, 1) }
