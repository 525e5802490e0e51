package latency

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// seq returns n, 2n, ... k·n.
func seq(k int, unit time.Duration) []time.Duration {
	ds := make([]time.Duration, k)
	for i := range ds {
		ds[i] = time.Duration(i+1) * unit
	}
	return ds
}

func record(ds ...time.Duration) *Histogram {
	var h Histogram
	for _, d := range ds {
		h.Record(d)
	}
	return &h
}

// nearestRank is the exact nearest-rank percentile of the samples.
func nearestRank(ds []time.Duration, p float64) time.Duration {
	s := slices.Sorted(slices.Values(ds))
	r := int(math.Ceil(p/100*float64(len(s)) - 1e-9))
	return s[min(max(r, 1), len(s))-1]
}

// within says whether got is want or above it by less than 1/1024 of it,
// the histogram's promise.
func within(got, want time.Duration) bool {
	return got >= want && float64(got-want) < float64(want)/1024
}

func TestQuantileKnownDistributions(t *testing.T) {
	bimodal := append(slices.Repeat([]time.Duration{100 * time.Microsecond}, 990), slices.Repeat([]time.Duration{50 * time.Millisecond}, 10)...)
	for _, tc := range []struct {
		name    string
		samples []time.Duration
		p       float64
		want    time.Duration
	}{
		// Below 2048 ns every value is kept exactly.
		{"p0 of 1..10ns is the min", seq(10, 1), 0, 1},
		{"p10 of 1..10ns", seq(10, 1), 10, 1},
		{"p11 of 1..10ns", seq(10, 1), 11, 2},
		{"p50 of 1..10ns", seq(10, 1), 50, 5},
		{"p50.1 of 1..10ns", seq(10, 1), 50.1, 6},
		{"p99.9 of 1..10ns is the max", seq(10, 1), 99.9, 10},
		{"p99 of 1..1000ns", seq(1000, 1), 99, 990},
		{"p99.9 of 1..1000ns", seq(1000, 1), 99.9, 999},
		// Above, within 0.1%.
		{"p50 of 1..1000µs", seq(1000, time.Microsecond), 50, 500 * time.Microsecond},
		{"p99 of 1..1000µs", seq(1000, time.Microsecond), 99, 990 * time.Microsecond},
		{"p99.9 of 1..1000µs", seq(1000, time.Microsecond), 99.9, 999 * time.Microsecond},
		{"p100 of 1..1000µs is the max", seq(1000, time.Microsecond), 100, 1000 * time.Microsecond},
		{"p50 of four is the second", []time.Duration{30e3, 10e3, 1e6, 20e3}, 50, 20e3},
		{"p99 of two is the upper", []time.Duration{1e3, 9e3}, 99, 9e3},
		{"one sample", []time.Duration{42 * time.Millisecond}, 0.1, 42 * time.Millisecond},
		{"bimodal p99", bimodal, 99, 100 * time.Microsecond},
		{"bimodal p99.1", bimodal, 99.1, 50 * time.Millisecond},
		{"seconds", seq(100, time.Second), 95, 95 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := record(tc.samples...)
			if got := h.Quantile(tc.p); !within(got, tc.want) {
				t.Errorf("Quantile(%v) = %v, want %v (+0.1%%)", tc.p, got, tc.want)
			}
			if h.Count() != int64(len(tc.samples)) || h.Min() != slices.Min(tc.samples) || h.Max() != slices.Max(tc.samples) {
				t.Errorf("count %d min %v max %v, want %d %v %v", h.Count(), h.Min(), h.Max(),
					len(tc.samples), slices.Min(tc.samples), slices.Max(tc.samples))
			}
		})
	}
}

// TestQuantileRandom compares every percentile lockbench reports with the
// exact nearest-rank one, on log-normal waits from 1µs to seconds.
func TestQuantileRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	ds := make([]time.Duration, 20000)
	for i := range ds {
		ds[i] = time.Duration(math.Exp(r.NormFloat64()*2+11)) + time.Microsecond
	}
	h := record(ds...)
	for _, p := range []float64{0.1, 1, 10, 25, 50, 75, 90, 99, 99.9, 99.99} {
		if got, want := h.Quantile(p), nearestRank(ds, p); !within(got, want) {
			t.Errorf("Quantile(%v) = %v, want %v (+0.1%%)", p, got, want)
		}
	}
	if h.Max() != slices.Max(ds) || h.Quantile(100) != h.Max() || h.Min() != slices.Min(ds) {
		t.Errorf("min %v max %v p100 %v, want exactly %v and %v", h.Min(), h.Max(), h.Quantile(100), slices.Min(ds), slices.Max(ds))
	}
}

func TestEmptyAndOutOfRange(t *testing.T) {
	var h Histogram
	if h.Count() != 0 || h.Quantile(50) != 0 || h.Min() != 0 || h.Max() != 0 {
		t.Errorf("empty: count %d p50 %v min %v max %v", h.Count(), h.Quantile(50), h.Min(), h.Max())
	}
	var nilH *Histogram
	if nilH.Count() != 0 {
		t.Error("a nil histogram has samples")
	}

	h.Record(-time.Second)
	if h.Count() != 1 || h.Max() != 0 || h.Quantile(50) != 0 {
		t.Errorf("a negative sample: count %d max %v", h.Count(), h.Max())
	}
	long := 20 * time.Minute
	h.Record(long)
	if h.Max() != long || h.Quantile(100) != long {
		t.Errorf("beyond Highest: max %v p100 %v, want %v", h.Max(), h.Quantile(100), long)
	}
	if got := h.Quantile(99); !within(got, Highest) {
		t.Errorf("beyond Highest: p99 %v, want it counted as %v", got, Highest)
	}
}

func TestMerge(t *testing.T) {
	all := seq(3000, 7*time.Microsecond)
	var a, b Histogram
	for i, d := range all {
		if i%3 == 0 {
			a.Record(d)
		} else {
			b.Record(d)
		}
	}
	var m Histogram // the zero value takes a merge
	m.Merge(&a)
	m.Merge(&b)
	m.Merge(&Histogram{})
	m.Merge(nil)
	whole := record(all...)
	if m.Count() != 3000 || m.Min() != whole.Min() || m.Max() != whole.Max() {
		t.Errorf("merged: count %d min %v max %v", m.Count(), m.Min(), m.Max())
	}
	for _, p := range []float64{1, 50, 99, 99.9} {
		if got, want := m.Quantile(p), whole.Quantile(p); got != want {
			t.Errorf("merged Quantile(%v) = %v, recorded in one %v", p, got, want)
		}
	}
	if a.Count() != 1000 || b.Count() != 2000 {
		t.Errorf("Merge changed its argument: %d, %d", a.Count(), b.Count())
	}
	// A merge into a histogram with samples keeps the extremes of both.
	small := record(time.Nanosecond)
	small.Merge(record(time.Hour))
	if small.Min() != time.Nanosecond || small.Max() != time.Hour {
		t.Errorf("min %v max %v", small.Min(), small.Max())
	}
}

func TestJSONRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var h Histogram
	for range 100000 {
		h.Record(time.Duration(r.ExpFloat64() * 2e6))
	}
	b, err := json.Marshal(&h)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 32<<10 {
		t.Errorf("100000 samples encode to %d bytes", len(b))
	}
	var back Histogram
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Count() != h.Count() || back.Min() != h.Min() || back.Max() != h.Max() {
		t.Errorf("round trip: count %d min %v max %v, want %d %v %v", back.Count(), back.Min(), back.Max(), h.Count(), h.Min(), h.Max())
	}
	for _, p := range []float64{0, 50, 99, 99.9, 100} {
		if back.Quantile(p) != h.Quantile(p) {
			t.Errorf("round trip: Quantile(%v) = %v, want %v", p, back.Quantile(p), h.Quantile(p))
		}
	}

	// As a field, by value or pointer, in a struct passed by value; empty
	// and nil too.
	type report struct {
		Waits   Histogram  `json:"waits"`
		Ptr     *Histogram `json:"ptr"`
		Missing *Histogram `json:"missing"`
	}
	b, err = json.Marshal(report{Waits: *record(5 * time.Millisecond), Ptr: &Histogram{}})
	if err != nil {
		t.Fatal(err)
	}
	var rep report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Waits.Count() != 1 || rep.Waits.Max() != 5*time.Millisecond || rep.Ptr == nil || rep.Ptr.Count() != 0 || rep.Missing != nil {
		t.Errorf("report round trip %s: %+v", b, rep)
	}
}

func TestUnmarshalRejects(t *testing.T) {
	good, err := json.Marshal(record(time.Millisecond, 2*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	otherRange := hdrhistogram.New(1000, highest, digits) // µs resolution
	_ = otherRange.RecordValue(5000)
	enc, err := otherRange.Encode(encVer)
	if err != nil {
		t.Fatal(err)
	}
	other, err := json.Marshal(wire{Count: 1, MinNS: 5000, MaxNS: 5000, HDR: string(enc)})
	if err != nil {
		t.Fatal(err)
	}
	for name, in := range map[string]string{
		"count without counts": `{"count":3}`,
		"not base64":           `{"count":1,"min_ns":1,"max_ns":1,"hdr":"!!"}`,
		"wrong count":          strings.Replace(string(good), `"count":2`, `"count":3`, 1),
		"min above max":        strings.Replace(string(good), `"min_ns":1000000`, `"min_ns":3000000`, 1),
		"not an object":        `[1,2]`,
		"another range":        string(other),
	} {
		var h Histogram
		if err := json.Unmarshal([]byte(in), &h); err == nil {
			t.Errorf("%s: %s decoded", name, in)
		}
	}
}

func TestMedianMinMax(t *testing.T) {
	nan := math.NaN()
	for _, tc := range []struct {
		xs             []float64
		median, lo, hi float64
	}{
		{[]float64{3}, 3, 3, 3},
		{[]float64{5, 1, 3}, 3, 1, 5},
		{[]float64{4, 1, 3, 2}, 2.5, 1, 4},
		{[]float64{nan, 7, 1}, 4, 1, 7},
	} {
		lo, hi := MinMax(tc.xs)
		if got := Median(tc.xs); got != tc.median || lo != tc.lo || hi != tc.hi {
			t.Errorf("%v: median %v, min–max %v–%v; want %v, %v–%v", tc.xs, got, lo, hi, tc.median, tc.lo, tc.hi)
		}
	}
	for _, xs := range [][]float64{nil, {nan}} {
		lo, hi := MinMax(xs)
		if m := Median(xs); !math.IsNaN(m) || !math.IsNaN(lo) || !math.IsNaN(hi) {
			t.Errorf("%v: median %v, min–max %v–%v; want NaNs", xs, m, lo, hi)
		}
	}
	xs := []float64{3, 1, 2}
	Median(xs)
	MinMax(xs)
	if !slices.Equal(xs, []float64{3, 1, 2}) {
		t.Errorf("changed its argument: %v", xs)
	}
}

func TestMean(t *testing.T) {
	var h Histogram
	if got := h.Mean(); got != 0 {
		t.Fatalf("empty Mean = %v, want 0", got)
	}
	for _, d := range []time.Duration{time.Millisecond, 2 * time.Millisecond, 6 * time.Millisecond} {
		h.Record(d)
	}
	// 3ms, to within the histogram's 0.1%.
	if got := h.Mean(); got < 2997*time.Microsecond || got > 3003*time.Microsecond {
		t.Errorf("Mean = %v, want 3ms within 0.1%%", got)
	}
}
