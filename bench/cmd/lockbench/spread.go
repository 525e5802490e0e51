package main

import (
	"math"
	"slices"

	"github.com/latchkey/latchkey/bench/internal/results"
)

// spreadOf is the median of xs (the mean of the two middle values for an
// even count) and their range, NaNs ignored. With nothing left every field
// is NaN. xs is not changed.
func spreadOf(xs []float64) results.Spread {
	s := make([]float64, 0, len(xs))
	for _, x := range xs {
		if !math.IsNaN(x) {
			s = append(s, x)
		}
	}
	n := len(s)
	if n == 0 {
		return results.Spread{Median: math.NaN(), Min: math.NaN(), Max: math.NaN()}
	}
	slices.Sort(s)
	med := s[n/2]
	if n%2 == 0 {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	return results.Spread{Median: med, Min: s[0], Max: s[n-1]}
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
