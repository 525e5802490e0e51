// Package units prints measured quantities for people, the same way in the
// demo and in the benchmark documents.
package units

import (
	"fmt"
	"math"
)

// Micros prints a duration given in µs with the unit that keeps it short:
// "850µs", "12.3ms", "2.50s". NaN, a figure that has no value, prints "–".
func Micros(us float64) string {
	switch {
	case math.IsNaN(us):
		return "–"
	case us < 1000:
		return fmt.Sprintf("%.0fµs", us)
	case us < 1e6:
		return fmt.Sprintf("%.1fms", us/1e3)
	default:
		return fmt.Sprintf("%.2fs", us/1e6)
	}
}
