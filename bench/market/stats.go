package main

import (
	"math"
	"slices"
	"time"

	"github.com/latchkey/latchkey/bench/internal/results"
)

// result is one run's figures: results.Market, which is the contract with
// the doc generator that reads bench/results/market.json, plus what only
// this program's own report shows.
type result struct {
	results.Market

	// Missed counts purchases that found their listing already sold.
	Missed int64 `json:"-"`
	// SellerRetries counts the sellers' failed tries (not in the book).
	SellerRetries int64 `json:"-"`
	// Problems are the first worker errors and broken invariants.
	Problems []string `json:"-"`
}

func (s *sim) result(l load, elapsed time.Duration, found problems) result {
	slices.Sort(s.latencies)
	return result{
		Market: results.Market{
			Variant:   s.v.name,
			Sellers:   l.sellers,
			Buyers:    l.buyers,
			DurationS: math.Round(elapsed.Seconds()*1000) / 1000,
			Listed:    s.listed.Load(),
			Bought:    s.bought.Load(),
			Retries:   s.retries.Load(),
			P50BuyUS:  micros(percentile(s.latencies, 50)),
			P99BuyUS:  micros(percentile(s.latencies, 99)),
			Errors:    int64(s.errs.n + found.n),
		},
		Missed:        s.missed.Load(),
		SellerRetries: s.sellerRetries.Load(),
		Problems:      append(slices.Clone(s.errs.samples), found.samples...),
	}
}

// percentile is the nearest-rank p-th percentile (0 < p <= 100) of sorted:
// the smallest value that at least p% of the values are at or below. It is
// 0 for no values.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

func micros(d time.Duration) float64 {
	return math.Round(float64(d)/float64(time.Microsecond)*10) / 10
}
