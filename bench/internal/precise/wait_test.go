package precise

import (
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestWaitNeverEarly checks the one hard promise; lateness depends on the
// machine's load and is reported by BenchmarkWaitOvershoot instead.
func TestWaitNeverEarly(t *testing.T) {
	for _, d := range []time.Duration{0, time.Microsecond, 100 * time.Microsecond, SpinSlack, time.Millisecond, 3 * time.Millisecond} {
		t0 := time.Now()
		Wait(d)
		if got := time.Since(t0); got < d {
			t.Errorf("Wait(%v) returned after %v", d, got)
		}
	}
	t0 := time.Now()
	Wait(-time.Second)
	if got := time.Since(t0); got > time.Second {
		t.Errorf("Wait(-1s) took %v, want an immediate return", got)
	}
}

// BenchmarkWaitOvershoot reports how late Wait(1ms) returns, median and
// p99, next to time.Sleep(1ms) for comparison:
//
//	go test -run x -bench Overshoot ./internal/precise
func BenchmarkWaitOvershoot(b *testing.B) {
	for _, c := range []struct {
		name string
		wait func(time.Duration)
	}{{"precise", Wait}, {"sleep", time.Sleep}} {
		b.Run(c.name, func(b *testing.B) {
			const d = time.Millisecond
			over := make([]time.Duration, 0, b.N)
			for b.Loop() {
				t0 := time.Now()
				c.wait(d)
				over = append(over, time.Since(t0)-d)
			}
			slices.Sort(over)
			b.ReportMetric(float64(over[len(over)/2].Microseconds()), "p50-late-µs")
			b.ReportMetric(float64(over[len(over)*99/100].Microseconds()), "p99-late-µs")
		})
	}
}
