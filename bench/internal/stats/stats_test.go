package stats

import (
	"math"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestPercentileNearestRank(t *testing.T) {
	s := []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for _, c := range []struct {
		p    float64
		want int64
	}{{0, 1}, {10, 1}, {11, 2}, {50, 5}, {50.1, 6}, {99, 10}, {99.9, 10}, {100, 10}} {
		if got := Percentile(s, c.p); got != c.want {
			t.Errorf("Percentile(1..10, %v) = %d, want %d", c.p, got, c.want)
		}
	}
	if got := Percentile(nil, 99); got != 0 {
		t.Errorf("no samples: got %d, want 0", got)
	}
	if got := Percentile([]int64{42}, 0.1); got != 42 {
		t.Errorf("one sample: got %d, want 42", got)
	}
}

// TestPercentileTail checks the ranks the report's tail columns use: in
// 1000 samples p99 is the 990th and p99.9 the 999th.
func TestPercentileTail(t *testing.T) {
	s := make([]int64, 1000)
	for i := range s {
		s[i] = int64(i + 1)
	}
	if got := Percentile(s, 99); got != 990 {
		t.Errorf("p99 of 1..1000 = %d, want 990", got)
	}
	if got := Percentile(s, 99.9); got != 999 {
		t.Errorf("p99.9 of 1..1000 = %d, want 999", got)
	}
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		xs   []float64
		want float64
	}{
		{[]float64{3}, 3},
		{[]float64{5, 1, 3}, 3},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{math.NaN(), 7, 1}, 4},
	} {
		if got := Median(c.xs); got != c.want {
			t.Errorf("Median(%v) = %v, want %v", c.xs, got, c.want)
		}
	}
	if got := Median([]float64{math.NaN()}); !math.IsNaN(got) {
		t.Errorf("Median(NaN) = %v, want NaN", got)
	}
	xs := []float64{3, 1, 2}
	Median(xs)
	if xs[0] != 3 || xs[1] != 1 {
		t.Errorf("Median changed its argument: %v", xs)
	}
}
