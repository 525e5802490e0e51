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
	return result{
		Market: results.Market{
			Variant:   s.v.name,
			Sellers:   l.sellers,
			Buyers:    l.buyers,
			DurationS: math.Round(elapsed.Seconds()*1000) / 1000,
			Listed:    s.listed.Load(),
			Bought:    s.bought.Load(),
			Retries:   s.retries.Load(),
			P50BuyUS:  micros(s.latencies.Quantile(50)),
			P99BuyUS:  micros(s.latencies.Quantile(99)),
			Errors:    int64(s.errs.n + found.n),
		},
		Missed:        s.missed.Load(),
		SellerRetries: s.sellerRetries.Load(),
		Problems:      append(slices.Clone(s.errs.samples), found.samples...),
	}
}

func micros(d time.Duration) float64 {
	return math.Round(float64(d)/float64(time.Microsecond)*10) / 10
}
