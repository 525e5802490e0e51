package main

import (
	"fmt"
	"io"
	"slices"
	"text/tabwriter"

	"github.com/latchkey/latchkey/bench/internal/results"
)

// printTables prints one table per scenario and the watchdog scale.
func printTables(out io.Writer, f *results.File) error {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	for _, sc := range f.Meta.Scenarios {
		fmt.Fprintf(tw, "\nscenario %s (%s): %d×%d goroutines, %d keys, cs %gµs; median of %d × %gs\n",
			sc.Name, sc.Label, sc.Procs, sc.G, sc.Keys, sc.CSUS, f.Meta.Reps, f.Meta.DurS)
		fmt.Fprintln(tw, "lib\tsetting\tacq/s\tp50 µs\tp99 µs\tp99.9 µs\tmax µs\tCPU µs/acq\tcmds/acq\tviolations\terrors\ttimeouts\t")
		for _, r := range slices.Concat(f.Results, f.Sweep) {
			if r.Scenario != sc.Name {
				continue
			}
			fmt.Fprintf(tw, "%s\t%s\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.1f\t%.2f\t%d\t%d\t%d\t\n", r.Lib, r.Setting, r.AcqPerS,
				r.P50US, r.P99US, r.P999US, r.MaxUS, r.RedisCPUUSPerAcq, r.RedisCmdsPerAcq, r.Violations, r.Errors, r.Timeouts)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if id := f.Idle; id != nil {
		sc := id.Scenario
		fmt.Fprintf(tw, "\nscenario %s (%s): %d×%d goroutines, %d keys, cs %gµs; median of %d × %gs, only while nobody can acquire\n",
			sc.Name, sc.Label, sc.Procs, sc.G, sc.Keys, sc.CSUS, f.Meta.Reps, id.DurS)
		fmt.Fprintln(tw, "lib\tsetting\tcmds/s\tCPU ms/s\tidle s\tgrants\tviolations\terrors\t")
		for _, r := range append([]results.IdleResult{id.Baseline}, id.Results...) {
			fmt.Fprintf(tw, "%s\t%s\t%.1f\t%.2f\t%.1f\t%.0f\t%d\t%d\t\n", r.Lib, r.Setting, r.CmdsPerS.Median,
				r.CPUMSPerS.Median, r.IdleS.Median, r.Grants.Median, r.Violations, r.Errors)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if w := f.Watchdog; w != nil {
		fmt.Fprintf(tw, "\nwatchdog scale: timeout %gms, interval %gms, batch %d; %d goroutines idle, %d lost, %d errors\n",
			w.TimeoutMS, w.IntervalMS, w.BatchSize, w.GoroutinesIdle, w.Lost, w.Errors)
		fmt.Fprintln(tw, "locks\ttaken in ms\tticks\tcalls/tick\tevalsha/tick\tRedis CPU µs/tick\tclient CPU µs/tick\tGC cycles\tclient KB alloc/tick\tgoroutines\t")
		for _, s := range w.Steps {
			fmt.Fprintf(tw, "%d\t%.0f\t%d\t%.1f\t%.1f\t%.0f\t%.0f\t%d\t%.0f\t%d\t\n", s.Locks, s.AcquireMS, s.Ticks, s.CallsPerTick, s.EvalshaPerTick,
				s.RedisCPUUSPerTick, s.ClientCPUUSPerTick, s.GCCycles, s.ClientAllocKBPerTick, s.Goroutines)
		}
	}
	return tw.Flush()
}
