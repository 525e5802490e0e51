package main

import (
	"math"
	"slices"

	"github.com/latchkey/latchkey/bench/internal/locks"
	"github.com/latchkey/latchkey/bench/internal/results"
	"github.com/latchkey/latchkey/internal/redisinfo"
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

// figures are results.Figures' fields with the run figure each one reports.
var figures = []struct {
	of    perRep
	field func(f *results.Figures) *float64
}{
	{func(s *sample) float64 { return float64(s.acquisitions) / s.dur.Seconds() }, func(f *results.Figures) *float64 { return &f.AcqPerS }},
	{waitUS(50), func(f *results.Figures) *float64 { return &f.P50US }},
	{waitUS(99), func(f *results.Figures) *float64 { return &f.P99US }},
	{waitUS(99.9), func(f *results.Figures) *float64 { return &f.P999US }},
	{waitUS(100), func(f *results.Figures) *float64 { return &f.MaxUS }},
	{perAcq(func(s *sample) float64 { return s.cpuSeconds * 1e6 }), func(f *results.Figures) *float64 { return &f.RedisCPUUSPerAcq }},
	{perAcq(func(s *sample) float64 { return float64(s.commands) }), func(f *results.Figures) *float64 { return &f.RedisCmdsPerAcq }},
}

// summarize turns the repetitions of one run of sc into its Result: the
// median and the range of each figure over the repetitions, and totals of
// the counts that must be zero.
func summarize(run runSpec, sc results.Scenario, reps []*sample) results.Result {
	r := results.Result{
		Lib: run.lib, Scenario: sc.Name, Procs: sc.Procs, G: sc.G, Keys: sc.Keys, CSUS: sc.CSUS,
		Reps:         len(reps),
		Acquisitions: results.SpreadOver(reps, func(s *sample) float64 { return float64(s.acquisitions) }).Median,
		Setting:      locks.Setting(run.lib, run.backoff),
		BackoffMS:    run.backoffMS(),
		Commands:     commandsPerAcq(reps),
		MeanWaitUS: results.SpreadOver(reps, func(s *sample) float64 {
			if s.waits.Count() == 0 {
				return math.NaN()
			}
			return float64(s.waits.Mean()) / 1e3
		}),
	}
	for _, fig := range figures {
		sp := results.SpreadOver(reps, fig.of)
		*fig.field(&r.Figures), *fig.field(&r.Min), *fig.field(&r.Max) = sp.Median, sp.Min, sp.Max
	}
	var total counts
	for _, s := range reps {
		r.DurS = s.dur.Seconds()
		total.add(s.counts)
	}
	r.Violations, r.Errors, r.Timeouts, r.LastError = total.Violations, total.Errors, total.Timeouts, total.LastError
	return r
}

// commandsPerAcq is each lock command's calls per acquisition over the
// repetitions; a repetition that did not call a command counts 0 for it.
func commandsPerAcq(reps []*sample) map[string]results.Spread {
	var names []string
	for _, s := range reps {
		for cmd := range s.calls {
			if !redisinfo.Overhead(cmd) && !slices.Contains(names, cmd) {
				names = append(names, cmd)
			}
		}
	}
	if len(names) == 0 {
		return nil
	}
	m := make(map[string]results.Spread, len(names))
	for _, cmd := range names {
		m[cmd] = results.SpreadOver(reps, perAcq(func(s *sample) float64 { return float64(s.calls[cmd]) }))
	}
	return m
}
