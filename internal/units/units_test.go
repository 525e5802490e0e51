package units

import (
	"math"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestMicros(t *testing.T) {
	for us, want := range map[float64]string{0: "0µs", 999: "999µs", 1000: "1.0ms", 12345: "12.3ms", 999_949: "999.9ms", 2_500_000: "2.50s", math.NaN(): "–"} {
		if got := Micros(us); got != want {
			t.Errorf("Micros(%v) = %q, want %q", us, got, want)
		}
	}
}
