package main

import (
	"slices"

	"github.com/latchkey/latchkey/bench/internal/locks"
	"github.com/latchkey/latchkey/bench/internal/results"
)

// metric reads one figure of a result; better says which of two values of it
// is the better one.
type metric struct {
	name   string
	get    func(r *results.Result) float64
	better func(a, b float64) bool
}

var (
	throughput = metric{"acq/s", func(r *results.Result) float64 { return r.AcqPerS }, func(a, b float64) bool { return a > b }}
	p99        = metric{"p99 wait", func(r *results.Result) float64 { return r.P99US }, func(a, b float64) bool { return a < b }}
	cpu        = metric{"Redis CPU/acq", func(r *results.Result) float64 { return r.RedisCPUUSPerAcq }, func(a, b float64) bool { return a < b }}
)

// bestPeer returns the peer library (locks.Peers) with the best value of m
// in scenario, or nil when no peer acquired anything there.
func bestPeer(f *results.File, scenario string, m metric) *results.Result {
	var best *results.Result
	for i := range f.Results {
		r := &f.Results[i]
		if r.Scenario != scenario || !slices.Contains(locks.Peers, r.Lib) || r.Acquisitions == 0 {
			continue
		}
		if best == nil || m.better(m.get(r), m.get(best)) {
			best = r
		}
	}
	return best
}
