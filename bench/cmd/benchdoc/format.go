package main

import (
	"fmt"
	"math"
	"strings"
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

// row prints one markdown table row.
func row(cells ...string) string {
	return "| " + strings.Join(cells, " | ") + " |\n"
}

// header prints a markdown table header; columns after the first are
// right-aligned (they are figures).
func header(cells ...string) string {
	align := make([]string, len(cells))
	for i := range align {
		align[i] = "---:"
	}
	align[0] = "---"
	return row(cells...) + row(align...)
}

// textHeader prints a markdown table header with every column left-aligned.
func textHeader(cells ...string) string {
	align := make([]string, len(cells))
	for i := range align {
		align[i] = "---"
	}
	return row(cells...) + row(align...)
}
