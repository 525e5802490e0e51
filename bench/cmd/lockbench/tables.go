package main

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/latchkey/latchkey/bench/internal/results"
)

// printTables prints one table per scenario, the fleet's and the watchdog scale.
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
	if fl := f.Fleet; fl != nil && len(fl.Scenarios) > 0 {
		sc := fl.Scenarios[0]
		fmt.Fprintf(tw, "\nscenario %s (%s): %s processes × %d goroutine, %d keys, cs %gµs; median of %d × %gs after a ramp of %gs\n",
			sc.Name, sc.Label, fleetSizes(fl), sc.G, sc.Keys, sc.CSUS, fl.Reps, fl.DurS, fl.RampS)
		fmt.Fprintln(tw, "procs\tlib\tacq/s\t% of 1/cs\tCPU µs/acq\tcmds/acq\tsub/acq\tunsub/acq\tattempts/acq\tmean wait µs\tmax µs\tviolations\terrors\ttimeouts\t")
		for _, r := range fl.Results {
			attempts := "-"
			if r.AttemptsPerAcq != nil {
				attempts = fmt.Sprintf("%.2f", r.AttemptsPerAcq.Median)
			}
			fmt.Fprintf(tw, "%d\t%s\t%.0f\t%.1f\t%.1f\t%.2f\t%.2f\t%.2f\t%s\t%.0f\t%.0f\t%d\t%d\t%d\t\n", r.Procs, r.Lib, r.AcqPerS, r.AcqPerS*r.CSUS/1e4,
				r.RedisCPUUSPerAcq, r.RedisCmdsPerAcq, r.SubscribesPerAcq.Median, r.UnsubscribesPerAcq.Median, attempts, r.MeanWaitUS.Median, r.MaxUS,
				r.Violations, r.Errors, r.Timeouts)
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

// fleetSizes lists the fleet's sizes, "4/16/64".
func fleetSizes(fl *results.Fleet) string {
	sizes := make([]string, len(fl.Scenarios))
	for i, sc := range fl.Scenarios {
		sizes[i] = strconv.Itoa(sc.Procs)
	}
	return strings.Join(sizes, "/")
}
