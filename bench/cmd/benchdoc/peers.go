package main

import (
	"fmt"
	"slices"

	"github.com/latchkey/latchkey/bench/internal/locks"
	"github.com/latchkey/latchkey/bench/internal/results"
	"github.com/latchkey/latchkey/internal/units"
)

// metric reads one figure of a result's Figures; better says which of two
// values of it is the better one, and format prints a value.
type metric struct {
	name   string
	get    func(f *results.Figures) float64
	better func(a, b float64) bool
	format func(float64) string
}

var (
	throughput = metric{"acq/s", func(f *results.Figures) float64 { return f.AcqPerS }, higher, fmtNum}
	p50        = metric{"p50 wait", func(f *results.Figures) float64 { return f.P50US }, lower, units.Micros}
	p99        = metric{"p99 wait", func(f *results.Figures) float64 { return f.P99US }, lower, units.Micros}
	p999       = metric{"p99.9 wait", func(f *results.Figures) float64 { return f.P999US }, lower, units.Micros}
	maxWait    = metric{"max wait", func(f *results.Figures) float64 { return f.MaxUS }, lower, units.Micros}
	cpu        = metric{"Redis CPU/acq", func(f *results.Figures) float64 { return f.RedisCPUUSPerAcq }, lower, units.Micros}
	cmds       = metric{"Redis cmds/acq", func(f *results.Figures) float64 { return f.RedisCmdsPerAcq }, lower, fmtNum}
)

func higher(a, b float64) bool { return a > b }
func lower(a, b float64) bool  { return a < b }

// of is the metric's median in r.
func (m metric) of(r *results.Result) float64 { return m.get(&r.Figures) }

// cell prints the median in r with its range over the repetitions.
func (m metric) cell(r *results.Result) string {
	return fmtSpread(m.get(&r.Figures), m.get(&r.Min), m.get(&r.Max), m.format)
}

// bestPeer returns the peer library (locks.Peers), at its default setting,
// with the best value of m in scenario, or nil when no peer acquired
// anything there.
func bestPeer(f *results.File, scenario string, m metric) *results.Result {
	var best *results.Result
	for i := range f.Results {
		r := &f.Results[i]
		if r.Scenario != scenario || !slices.Contains(locks.Peers, r.Lib) || r.Acquisitions == 0 {
			continue
		}
		if best == nil || m.better(m.of(r), m.of(best)) {
			best = r
		}
	}
	return best
}

// named is a library with the setting it ran with, "redsync [delay 8ms]",
// for text that quotes one of its figures.
func named(lib, setting string) string {
	if setting == "" {
		return lib
	}
	return fmt.Sprintf("%s [%s]", lib, setting)
}
