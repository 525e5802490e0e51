// Package latency records wait times in an HDR histogram and reports their
// percentiles, the same way in the demo, the benchmarks and their worker
// processes.
//
// A Histogram holds any number of samples in bounded memory, merges with
// another, and travels as JSON, so a worker process sends its histogram to
// the parent instead of every sample. Its percentiles are nearest-rank and
// within 0.1% of the sample they stand for; its minimum and maximum are
// exact.
package latency

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// The histogram's range and precision, in nanoseconds. Values below 2048 ns
// are kept exactly, larger ones to within 1/1024 (3 significant digits).
const (
	lowest  = 1                       // the unit: 1 ns
	highest = int64(10 * time.Minute) // the largest value that keeps its precision
	digits  = 3                       // significant decimal digits
	encVer  = hdrhistogram.V2CompressedEncodingCookieBase
)

// Highest is the largest duration a Histogram's percentiles tell apart:
// longer samples count as Highest in them, though Max stays exact.
const Highest = time.Duration(highest)

// A Histogram is a distribution of durations. Its zero value is empty and
// ready to use; it allocates its counts (about 250 KiB) on the first sample.
// It is not safe for concurrent use. A copy of a Histogram that holds
// samples shares its counts: read through either, but record or merge into
// only one of them.
type Histogram struct {
	hdr      *hdrhistogram.Histogram // nil until the first sample
	min, max time.Duration           // exact, valid when hdr != nil
}

// Record adds one sample. A negative d counts as 0; a d above Highest
// counts as Highest in the percentiles and as itself in Max.
func (h *Histogram) Record(d time.Duration) {
	d = max(d, 0)
	h.init()
	if h.hdr.TotalCount() == 0 {
		h.min, h.max = d, d
	} else {
		h.min, h.max = min(h.min, d), max(h.max, d)
	}
	// Cannot fail: the value is clamped into the range.
	_ = h.hdr.RecordValue(min(int64(d), highest))
}

// Merge adds every sample of o to h. o is not changed; a nil o adds nothing.
func (h *Histogram) Merge(o *Histogram) {
	if o == nil || o.Count() == 0 {
		return
	}
	h.init()
	if h.hdr.TotalCount() == 0 {
		h.min, h.max = o.min, o.max
	} else {
		h.min, h.max = min(h.min, o.min), max(h.max, o.max)
	}
	// Cannot drop anything: both have the same range.
	h.hdr.Merge(o.hdr)
}

func (h *Histogram) init() {
	if h.hdr == nil {
		h.hdr = hdrhistogram.New(lowest, highest, digits)
	}
}

// Count is the number of samples.
func (h *Histogram) Count() int64 {
	if h == nil || h.hdr == nil {
		return 0
	}
	return h.hdr.TotalCount()
}

// Min is the smallest sample, exactly; 0 when there is none.
func (h *Histogram) Min() time.Duration {
	if h.Count() == 0 {
		return 0
	}
	return h.min
}

// Max is the largest sample, exactly; 0 when there is none.
func (h *Histogram) Max() time.Duration {
	if h.Count() == 0 {
		return 0
	}
	return h.max
}

// Mean is the mean of the samples, from the histogram (within 0.1%), or 0
// without any.
func (h *Histogram) Mean() time.Duration {
	if h.Count() == 0 {
		return 0
	}
	return time.Duration(h.hdr.Mean())
}

// Quantile returns the nearest-rank p-th percentile (p in 0..100): the
// smallest sample that at least p% of the samples do not exceed, as the
// histogram knows it, which is within 0.1% above the real one (exact below
// 2048 ns) and never beyond Max. Nearest rank, not interpolation: the p99.9
// of fewer than 1000 samples is the largest. Quantile(0) is Min and
// Quantile(100) is Max. It returns 0 for no samples.
func (h *Histogram) Quantile(p float64) time.Duration {
	n := h.Count()
	switch {
	case n == 0:
		return 0
	case p <= 0:
		return h.min
	case p >= 100:
		return h.max
	}
	// The epsilon keeps binary rounding (99.9/100*1000 = 999.0000000000001)
	// from pushing an exact rank to the next sample.
	rank := math.Ceil(p/100*float64(n) - 1e-9)
	rank = min(max(rank, 1), float64(n))
	// hdrhistogram ranks by rounding to the nearest (p/100*n + 0.5, rounded
	// down); this percentile makes it pick exactly our rank.
	q := (rank - 0.25) / float64(n) * 100
	v := time.Duration(h.hdr.ValueAtPercentile(q))
	return min(max(v, h.min), h.max)
}

// wire is a Histogram's JSON form. HDR is hdrhistogram's V2 compressed
// encoding (base64), which other HDR tools read too; the count repeats it
// for a reader and as a check.
type wire struct {
	Count int64  `json:"count"`
	MinNS int64  `json:"min_ns,omitempty"`
	MaxNS int64  `json:"max_ns,omitempty"`
	HDR   string `json:"hdr,omitempty"`
}

// MarshalJSON encodes h as an object with its count, its exact minimum and
// maximum in ns, and the histogram itself in HdrHistogram's compressed V2
// encoding: a few hundred bytes to a few KiB, whatever the count.
func (h Histogram) MarshalJSON() ([]byte, error) {
	if h.Count() == 0 {
		return json.Marshal(wire{})
	}
	enc, err := h.hdr.Encode(encVer)
	if err != nil {
		return nil, fmt.Errorf("latency: encoding the histogram: %w", err)
	}
	return json.Marshal(wire{Count: h.hdr.TotalCount(), MinNS: int64(h.min), MaxNS: int64(h.max), HDR: string(enc)})
}

// UnmarshalJSON decodes what MarshalJSON wrote, replacing h's samples.
func (h *Histogram) UnmarshalJSON(b []byte) error {
	var w wire
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	if w.HDR == "" {
		if w.Count != 0 {
			return fmt.Errorf("latency: histogram of %d samples without its counts", w.Count)
		}
		*h = Histogram{}
		return nil
	}
	dec, err := hdrhistogram.Decode([]byte(w.HDR))
	if err != nil {
		return fmt.Errorf("latency: decoding the histogram: %w", err)
	}
	switch {
	case dec.LowestTrackableValue() != lowest || dec.HighestTrackableValue() != highest || dec.SignificantFigures() != digits:
		return fmt.Errorf("latency: histogram of range %d..%d ns at %d digits, want %d..%d at %d",
			dec.LowestTrackableValue(), dec.HighestTrackableValue(), dec.SignificantFigures(), lowest, highest, digits)
	case dec.TotalCount() != w.Count || w.Count == 0:
		return fmt.Errorf("latency: histogram says %d samples and holds %d", w.Count, dec.TotalCount())
	case w.MinNS < 0 || w.MinNS > w.MaxNS:
		return fmt.Errorf("latency: histogram's min %d ns and max %d ns", w.MinNS, w.MaxNS)
	}
	*h = Histogram{hdr: dec, min: time.Duration(w.MinNS), max: time.Duration(w.MaxNS)}
	return nil
}

// Median returns the median of xs (the mean of the two middle values for an
// even count), ignoring NaNs, or NaN when nothing is left. xs is not
// changed. It is meant for one figure over a benchmark's repetitions.
func Median(xs []float64) float64 {
	s := withoutNaN(xs)
	if len(s) == 0 {
		return math.NaN()
	}
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// MinMax returns the smallest and the largest of xs, ignoring NaNs, or two
// NaNs when nothing is left: the spread of one figure over repetitions.
func MinMax(xs []float64) (lo, hi float64) {
	s := withoutNaN(xs)
	if len(s) == 0 {
		return math.NaN(), math.NaN()
	}
	return slices.Min(s), slices.Max(s)
}

// withoutNaN is a copy of xs without its NaNs.
func withoutNaN(xs []float64) []float64 {
	return slices.DeleteFunc(slices.Clone(xs), math.IsNaN)
}
