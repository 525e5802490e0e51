package results

import (
	"math"

	"github.com/latchkey/latchkey/internal/latency"
)

// SpreadOf is the median of xs and their range, NaNs ignored; with
// nothing left every field is NaN.
func SpreadOf(xs []float64) Spread {
	lo, hi := latency.MinMax(xs)
	return Spread{Median: latency.Median(xs), Min: lo, Max: hi}
}

// Finite turns a figure without meaning into 0 for JSON, which has no NaN;
// the record's counts (acquisitions, idle time) say why it is 0.
func Finite(sp Spread) Spread {
	for _, x := range []*float64{&sp.Median, &sp.Min, &sp.Max} {
		if math.IsNaN(*x) {
			*x = 0
		}
	}
	return sp
}

// SpreadOver is SpreadOf one figure of every sample, made finite.
func SpreadOver[S any](samples []S, f func(S) float64) Spread {
	xs := make([]float64, len(samples))
	for i, s := range samples {
		xs[i] = f(s)
	}
	return Finite(SpreadOf(xs))
}
