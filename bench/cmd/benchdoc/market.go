package main

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"

	"github.com/latchkey/latchkey/bench/internal/results"
	"github.com/latchkey/latchkey/internal/units"
)

// marketVariants is the order of the market benchmark's variants: the
// optimistic WATCH/MULTI of Redis in Action's marketplace, its one lock
// around the whole market, and per-item locks, SETNX and latchkey.
var marketVariants = []string{"watch", "coarse-lock", "setnx-item", "latchkey-item"}

// marketTables follow Redis in Action's tables 6-1 to 6-3, each adding the
// next refinement to the ones before: WATCH alone, then a coarse lock, then
// fine-grained locks. The last table shows every variant, known or not.
var marketTables = []struct {
	title    string
	variants []string // nil: all
}{
	{"Table M-1 (cf. Redis in Action 6-1): the marketplace with WATCH", marketVariants[:1]},
	{"Table M-2 (cf. 6-2): WATCH against one lock around the market", marketVariants[:2]},
	{"Table M-3 (cf. 6-3): with a lock per item", nil},
}

func writeMarket(b *bytes.Buffer, runs []results.Market, path string) {
	b.WriteString("## Market\n\n")
	if runs == nil {
		fmt.Fprintf(b, "Not run (`%s` does not exist: `make bench` runs `bench/market` when it is present).\n\n", path)
		return
	}
	b.WriteString("The marketplace of Redis in Action, chapter 6.2, from `bench/market` (`bench/results/market.json`): " +
		"sellers list items, buyers buy them; retries are purchases attempted again after a conflict or a busy lock, " +
		"latencies are per purchase.\n\n")
	runs = slices.Clone(runs)
	slices.SortStableFunc(runs, func(x, y results.Market) int {
		return cmp.Or(cmp.Compare(x.Sellers, y.Sellers), cmp.Compare(x.Buyers, y.Buyers), cmp.Compare(variantRank(x.Variant), variantRank(y.Variant)))
	})
	for _, t := range marketTables {
		fmt.Fprintf(b, "**%s**\n\n", t.title)
		b.WriteString(header("variant", "sellers/buyers", "duration", "listed", "bought", "retries", "p50 buy", "p99 buy", "errors"))
		for _, r := range runs {
			if t.variants != nil && !slices.Contains(t.variants, r.Variant) {
				continue
			}
			b.WriteString(row(r.Variant, fmt.Sprintf("%d/%d", r.Sellers, r.Buyers), fmt.Sprintf("%gs", r.DurationS),
				fmt.Sprint(r.Listed), fmt.Sprint(r.Bought), fmt.Sprint(r.Retries), units.Micros(r.P50BuyUS), units.Micros(r.P99BuyUS), fmt.Sprint(r.Errors)))
		}
		b.WriteString("\n")
	}
}

// variantRank orders known variants first, in marketVariants' order.
func variantRank(v string) int {
	if i := slices.Index(marketVariants, v); i >= 0 {
		return i
	}
	return len(marketVariants)
}
