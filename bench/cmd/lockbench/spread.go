package main

import (
	"math"

	"github.com/latchkey/latchkey/bench/internal/results"
	"github.com/latchkey/latchkey/internal/latency"
)

// spreadOf is the median of xs and their range, NaNs ignored; with
// nothing left every field is NaN.
func spreadOf(xs []float64) results.Spread {
	lo, hi := latency.MinMax(xs)
	return results.Spread{Median: latency.Median(xs), Min: lo, Max: hi}
}

// finite turns a figure without meaning into 0 for JSON, which has no NaN;
// the record's counts (acquisitions, idle time) say why it is 0.
func finite(sp results.Spread) results.Spread {
	for _, x := range []*float64{&sp.Median, &sp.Min, &sp.Max} {
		if math.IsNaN(*x) {
			*x = 0
		}
	}
	return sp
}

// spreadOver is spreadOf one figure of every sample, made finite.
func spreadOver[S any](samples []S, f func(S) float64) results.Spread {
	xs := make([]float64, len(samples))
	for i, s := range samples {
		xs[i] = f(s)
	}
	return finite(spreadOf(xs))
}
