package results

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// Market is one run of bench/market, the Redis in Action chapter 6
// marketplace, as that program writes it to results/market.json.
type Market struct {
	Variant   string  `json:"variant"` // watch, coarse-lock, setnx-item, latchkey-item
	Sellers   int     `json:"sellers"`
	Buyers    int     `json:"buyers"`
	DurationS float64 `json:"duration_s"`
	Listed    int64   `json:"listed"`
	Bought    int64   `json:"bought"`
	Retries   int64   `json:"retries"`
	P50BuyUS  float64 `json:"p50_buy_us"`
	P99BuyUS  float64 `json:"p99_buy_us"`
	Errors    int64   `json:"errors"`
}

// ReadMarket loads a market.json. A missing file is not an error: it returns
// nil, nil (the market benchmark was not run).
func ReadMarket(path string) ([]Market, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("results: %w", err)
	}
	var m []Market
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%w: %s is not an array of market runs: %w", ErrBadFile, path, err)
	}
	return m, nil
}
