// Package stats holds the order statistics lockbench reports: nearest-rank
// percentiles of one run's waits and the median of a metric over runs.
package stats

import (
	"math"
	"slices"
)

// Percentile returns the nearest-rank p-th percentile (0 < p <= 100) of
// sorted, which must be in ascending order: the smallest sample that at
// least p% of the samples do not exceed. Nearest rank, not interpolation,
// so the figure is always a wait that was really observed, and the p99.9 of
// fewer than 1000 samples is simply the largest. It returns 0 for no samples.
func Percentile(sorted []int64, p float64) int64 {
	if len(sorted) == 0 {
		return 0
	}
	// The epsilon keeps binary rounding (99.9/100*1000 = 999.0000000000001)
	// from pushing an exact rank to the next sample.
	rank := int(math.Ceil(p/100*float64(len(sorted)) - 1e-9))
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

// Median returns the median of xs (the mean of the two middle values for an
// even count), ignoring NaNs, or NaN when nothing is left. xs is not changed.
func Median(xs []float64) float64 {
	s := make([]float64, 0, len(xs))
	for _, x := range xs {
		if !math.IsNaN(x) {
			s = append(s, x)
		}
	}
	if len(s) == 0 {
		return math.NaN()
	}
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
