package main

import (
	"math"

	"github.com/latchkey/latchkey/bench/internal/results"
	"github.com/latchkey/latchkey/internal/latency"
)

// perRep is one figure of a run, NaN when it has no meaning (per
// acquisition with no acquisition).
type perRep func(s *sample) float64

func waitUS(p float64) perRep {
	return func(s *sample) float64 {
		if s.waits.Count() == 0 {
			return math.NaN()
		}
		return float64(s.waits.Quantile(p)) / 1e3
	}
}

func perAcq(x func(s *sample) float64) perRep {
	return func(s *sample) float64 {
		if s.acquisitions == 0 {
			return math.NaN()
		}
		return x(s) / float64(s.acquisitions)
	}
}

// summarize turns the repetitions of lib in sc into its Result: the median
// of each figure over the repetitions, and totals of the counts that must
// be zero.
func summarize(lib string, sc results.Scenario, reps []*sample) results.Result {
	median := func(f perRep) float64 {
		xs := make([]float64, len(reps))
		for i, s := range reps {
			xs[i] = f(s)
		}
		// JSON has no NaN: a figure without meaning is 0, and Acquisitions
		// 0 says why.
		if m := latency.Median(xs); !math.IsNaN(m) {
			return m
		}
		return 0
	}
	r := results.Result{
		Lib: lib, Scenario: sc.Name, Procs: sc.Procs, G: sc.G, Keys: sc.Keys, CSUS: sc.CSUS,
		AcqPerS:          median(func(s *sample) float64 { return float64(s.acquisitions) / s.dur.Seconds() }),
		P50US:            median(waitUS(50)),
		P99US:            median(waitUS(99)),
		P999US:           median(waitUS(99.9)),
		MaxUS:            median(waitUS(100)),
		RedisCPUUSPerAcq: median(perAcq(func(s *sample) float64 { return s.cpuSeconds * 1e6 })),
		RedisCmdsPerAcq:  median(perAcq(func(s *sample) float64 { return float64(s.commands) })),
		Reps:             len(reps),
		Acquisitions:     median(func(s *sample) float64 { return float64(s.acquisitions) }),
	}
	var total counts
	for _, s := range reps {
		r.DurS = s.dur.Seconds()
		total.add(s.counts)
	}
	r.Violations, r.Errors, r.Timeouts, r.LastError = total.Violations, total.Errors, total.Timeouts, total.LastError
	return r
}
