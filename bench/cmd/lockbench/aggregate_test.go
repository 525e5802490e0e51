package main

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/latchkey/latchkey/bench/internal/locks"
	"github.com/latchkey/latchkey/bench/internal/results"
)

// requiredFields is the -json format's fixed field set, in order.
var requiredFields = []string{"lib", "scenario", "procs", "g", "keys", "cs_us", "acq_per_s", "p50_us", "p99_us", "p999_us",
	"max_us", "redis_cpu_us_per_acq", "redis_cmds_per_acq", "violations", "errors"}

// jsonKeys returns the keys of one JSON object in the order they appear.
func jsonKeys(t *testing.T, line []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(line))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not a JSON object: %s", line)
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, tok.(string))
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

func TestJSONFieldSet(t *testing.T) {
	b, err := json.Marshal(results.Result{Lib: "latchkey", Scenario: "a"})
	if err != nil {
		t.Fatal(err)
	}
	keys := jsonKeys(t, b)
	if len(keys) < len(requiredFields) || !slices.Equal(keys[:len(requiredFields)], requiredFields) {
		t.Errorf("JSON keys %v, want them to start with %v", keys, requiredFields)
	}
}

// TestSummarize checks that each figure is the median over repetitions,
// taken figure by figure, with its range, and that the must-be-zero counts
// are totals.
func TestSummarize(t *testing.T) {
	sc := results.Scenario{Name: "d", Procs: 4, G: 8, Keys: 1, CSUS: 1000}
	mk := func(acq int64, waitsUS []int64, cpu float64, cmds, viol, errs int64, calls map[string]int64) *sample {
		s := &sample{dur: 2 * time.Second, acquisitions: acq, cpuSeconds: cpu, commands: cmds, calls: calls,
			counts: counts{Violations: viol, Errors: errs}}
		for _, us := range waitsUS {
			s.waits.Record(time.Duration(us) * time.Microsecond)
		}
		return s
	}
	run := runSpec{lib: locks.LatchkeySpin, backoff: 8 * time.Millisecond, dur: 2 * time.Second}
	r := summarize(run, sc, []*sample{
		// 50/s, p50 20µs, max 1000µs, 100µs CPU, 10 cmds; 2 EVALSHA and 8 GET per acquisition
		mk(100, []int64{10, 20, 30, 1000}, 0.01, 1000, 0, 1, map[string]int64{"evalsha": 200, "get": 800, "info": 5}),
		// 150/s, p50 40µs, max 60µs, 200µs CPU, 6 cmds; 1 EVALSHA, 5 GET
		mk(300, []int64{30, 40, 50, 60}, 0.06, 1800, 1, 0, map[string]int64{"evalsha": 300, "get": 1500}),
		// 100/s, p50 2µs, max 4µs, 250µs CPU, 8 cmds; 2 EVALSHA, no GET
		mk(200, []int64{1, 2, 3, 4}, 0.05, 1600, 0, 2, map[string]int64{"evalsha": 400}),
	})
	want := results.Result{
		Lib: "latchkey-spin", Scenario: "d", Procs: 4, G: 8, Keys: 1, CSUS: 1000,
		Figures:    results.Figures{AcqPerS: 100, P50US: 20, P99US: 60, P999US: 60, MaxUS: 60, RedisCPUUSPerAcq: 200, RedisCmdsPerAcq: 8},
		Min:        results.Figures{AcqPerS: 50, P50US: 2, P99US: 4, P999US: 4, MaxUS: 4, RedisCPUUSPerAcq: 100, RedisCmdsPerAcq: 6},
		Max:        results.Figures{AcqPerS: 150, P50US: 40, P99US: 1000, P999US: 1000, MaxUS: 1000, RedisCPUUSPerAcq: 250, RedisCmdsPerAcq: 10},
		Violations: 1, Errors: 3, Reps: 3, DurS: 2, Acquisitions: 200,
		Setting: "backoff 1ms–8ms, jittered", BackoffMS: 8,
		Commands:   map[string]results.Spread{"evalsha": {Median: 2, Min: 1, Max: 2}, "get": {Median: 5, Min: 0, Max: 8}},
		MeanWaitUS: results.Spread{Median: 45, Min: 2.5, Max: 265},
	}
	// The histogram's p50 is within 0.1% above the sample; the other wait
	// figures here are maxima, which are exact.
	for _, f := range []*results.Figures{&r.Figures, &r.Min, &r.Max} {
		w := map[*results.Figures]results.Figures{&r.Figures: want.Figures, &r.Min: want.Min, &r.Max: want.Max}[f]
		if f.P50US >= w.P50US && f.P50US < w.P50US*1.001 {
			f.P50US = w.P50US
		}
	}
	// Means come from the histogram too: within 0.1%.
	for _, p := range [][2]*float64{{&r.MeanWaitUS.Median, &want.MeanWaitUS.Median}, {&r.MeanWaitUS.Min, &want.MeanWaitUS.Min}, {&r.MeanWaitUS.Max, &want.MeanWaitUS.Max}} {
		if math.Abs(*p[0]-*p[1]) <= *p[1]*0.001 {
			*p[0] = *p[1]
		}
	}
	if !reflect.DeepEqual(r, want) {
		t.Errorf("summarize:\n got %+v\nwant %+v", r, want)
	}
	// No acquisition: the per-acquisition figures have no meaning and must
	// still encode (JSON has no NaN).
	r = summarize(runSpec{lib: locks.Redsync}, sc, []*sample{mk(0, nil, 0.01, 10, 0, 0, map[string]int64{"set": 3})})
	if r.AcqPerS != 0 || r.P99US != 0 || r.RedisCPUUSPerAcq != 0 || r.Max.P99US != 0 || r.Commands["set"] != (results.Spread{}) {
		t.Errorf("summarize without acquisitions: %+v", r)
	}
	if r.Setting != "delay random 50ms–250ms (its default)" || r.BackoffMS != 0 {
		t.Errorf("redsync's default setting: %q, %vms", r.Setting, r.BackoffMS)
	}
	if _, err := json.Marshal(r); err != nil {
		t.Errorf("encoding it: %v", err)
	}
}

func TestSpreadOf(t *testing.T) {
	for _, c := range []struct {
		xs   []float64
		want results.Spread
	}{
		{[]float64{3, 1, 2}, results.Spread{Median: 2, Min: 1, Max: 3}},
		{[]float64{4, 1, 2, 3}, results.Spread{Median: 2.5, Min: 1, Max: 4}},
		{[]float64{math.NaN(), 5}, results.Spread{Median: 5, Min: 5, Max: 5}},
	} {
		if got := results.SpreadOf(c.xs); got != c.want {
			t.Errorf("SpreadOf(%v) = %+v, want %+v", c.xs, got, c.want)
		}
	}
	if got := results.SpreadOf([]float64{math.NaN()}); !math.IsNaN(got.Median) || results.Finite(got) != (results.Spread{}) {
		t.Errorf("SpreadOf(NaN) = %+v, and finite of it %+v", got, results.Finite(got))
	}
}
