package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// writeJSON writes the results as one JSON array (the format of
// bench/results/market.json).
func writeJSON(w io.Writer, rs []result) error {
	if rs == nil {
		rs = []result{} // an array, never null
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rs)
}

// writeTables prints one table per variant, shaped like the book's tables
// 6-1 to 6-3: a row per load with what was listed and bought, the buyers'
// retries and their purchase latency.
func writeTables(w io.Writer, names []string, rs []result) {
	for _, name := range names {
		v, _ := variantByName(name)
		fmt.Fprintf(w, "\n%s (cf. table %s): %s\n", v.name, v.table, v.about)
		fmt.Fprintf(w, "  %-19s %9s %9s %9s %11s %7s %9s %9s %6s\n",
			"load", "listed", "bought", "retries", "retries/buy", "missed", "p50 buy", "p99 buy", "errors")
		var notes []string
		for _, r := range rs {
			if r.Variant != name {
				continue
			}
			l := load{r.Sellers, r.Buyers}
			fmt.Fprintf(w, "  %-19s %9d %9d %9d %11s %7d %9s %9s %6d\n",
				l, r.Listed, r.Bought, r.Retries, ratio(r.Retries, r.Bought), r.Missed,
				fmtMicros(r.P50BuyUS), fmtMicros(r.P99BuyUS), r.Errors)
			for _, p := range r.Problems {
				notes = append(notes, fmt.Sprintf("  ! %s: %s", l, p))
			}
		}
		if len(notes) > 0 {
			fmt.Fprintln(w, strings.Join(notes, "\n"))
		}
	}
}

func ratio(a, b int64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", float64(a)/float64(b))
}

func fmtMicros(us float64) string {
	switch {
	case us == 0:
		return "-"
	case us < 1000:
		return fmt.Sprintf("%.0fµs", us)
	case us < 1e6:
		return fmt.Sprintf("%.2fms", us/1e3)
	}
	return fmt.Sprintf("%.2fs", us/1e6)
}
