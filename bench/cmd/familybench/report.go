package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/latchkey/latchkey/bench/internal/results"
	"github.com/latchkey/latchkey/internal/units"
)

// describe is a one-line progress note for a run.
func describe(sc *results.FamilyScenario, r *results.FamilyRep) string {
	var parts []string
	for _, kind := range sc.Kinds {
		parts = append(parts, fmt.Sprintf("%s %.0f/s p99 %s", kind, r.PerS(kind), units.Micros(r.Wait(kind, 99))))
	}
	return fmt.Sprintf("%s; Redis %s CPU, %.2f cmds per acquisition; %d violations, %d errors",
		strings.Join(parts, ", "), units.Micros(r.CPUUSPerAcq()), r.CmdsPerAcq(), r.Violations, r.Errors)
}

// printTables prints each scenario's medians over the repetitions, one
// line per variant.
func printTables(out io.Writer, f *results.Family) {
	for _, sc := range f.Scenarios {
		fmt.Fprintf(out, "%s: %s, %d × %d goroutines, hold %s\n", sc.Name, sc.Label, sc.Clients, sc.G, units.Micros(sc.CSUS))
		for _, v := range sc.Variants {
			fmt.Fprintf(out, "  %-14s %8.0f acq/s", v.Name, v.Spread(func(r *results.FamilyRep) float64 { return r.PerS("") }).Median)
			for _, kind := range sc.Kinds {
				fmt.Fprintf(out, "  %s %.0f/s p50 %s p99 %s", kind,
					v.Spread(func(r *results.FamilyRep) float64 { return r.PerS(kind) }).Median,
					units.Micros(v.Spread(func(r *results.FamilyRep) float64 { return r.Wait(kind, 50) }).Median),
					units.Micros(v.Spread(func(r *results.FamilyRep) float64 { return r.Wait(kind, 99) }).Median))
			}
			viol, errs, _, _ := v.Totals()
			fmt.Fprintf(out, "  Redis %s CPU/acq  %d violations, %d errors\n",
				units.Micros(v.Spread((*results.FamilyRep).CPUUSPerAcq).Median), viol, errs)
		}
	}
}
