package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/latchkey/latchkey/bench/internal/results"
)

// fmtRatio prints a/b as "1.23×", or "–" when b is not positive.
func fmtRatio(a, b float64) string {
	if !(b > 0) || math.IsNaN(a) {
		return "–"
	}
	r := a / b
	if r >= 10 {
		return fmt.Sprintf("%.0f×", r)
	}
	return fmt.Sprintf("%.2f×", r)
}

// fmtNum prints x with the precision its size needs.
func fmtNum(x float64) string {
	switch {
	case math.IsNaN(x):
		return "–"
	case math.Abs(x) >= 100:
		return fmt.Sprintf("%.0f", x)
	case math.Abs(x) >= 10:
		return fmt.Sprintf("%.1f", x)
	default:
		return fmt.Sprintf("%.2f", x)
	}
}

// fmtSpread prints a median with its range over the repetitions,
// "12.0 (10.0–14.0)". An empty range (one repetition, or a results file
// from before ranges were kept) is left out.
func fmtSpread(median, lo, hi float64, format func(float64) string) string {
	if lo == hi || lo == 0 && hi == 0 && median != 0 {
		return format(median)
	}
	return fmt.Sprintf("%s (%s–%s)", format(median), format(lo), format(hi))
}

// spreadCell is fmtSpread of a results.Spread.
func spreadCell(sp results.Spread, format func(float64) string) string {
	return fmtSpread(sp.Median, sp.Min, sp.Max, format)
}

// row prints one markdown table row.
func row(cells ...string) string {
	return "| " + strings.Join(cells, " | ") + " |\n"
}

// header prints a markdown table header; columns after the first are
// right-aligned (they are figures).
func header(cells ...string) string { return headerN(1, cells...) }

// headerN prints a markdown table header whose first n columns are text,
// left-aligned, and the others figures, right-aligned.
func headerN(n int, cells ...string) string {
	align := make([]string, len(cells))
	for i := range align {
		align[i] = "---:"
		if i < n {
			align[i] = "---"
		}
	}
	return row(cells...) + row(align...)
}

// fmtCount prints a count, or a median of counts, without trailing zeros.
func fmtCount(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }

// textHeader prints a markdown table header with every column left-aligned.
func textHeader(cells ...string) string {
	align := make([]string, len(cells))
	for i := range align {
		align[i] = "---"
	}
	return row(cells...) + row(align...)
}

// joinNames lists names as "a, b and c".
func joinNames(names []string) string {
	switch n := len(names); n {
	case 0:
		return ""
	case 1:
		return names[0]
	default:
		return strings.Join(names[:n-1], ", ") + " and " + names[n-1]
	}
}
