package main

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"
	"time"

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
// taken figure by figure, and that the must-be-zero counts are totals.
func TestSummarize(t *testing.T) {
	sc := results.Scenario{Name: "d", Procs: 4, G: 8, Keys: 1, CSUS: 1000}
	mk := func(acq int64, waitsUS []int64, cpu float64, cmds, viol, errs int64) *sample {
		s := &sample{dur: 2 * time.Second, acquisitions: acq, cpuSeconds: cpu, commands: cmds, counts: counts{Violations: viol, Errors: errs}}
		for _, us := range waitsUS {
			s.waits.Record(time.Duration(us) * time.Microsecond)
		}
		return s
	}
	r := summarize("latchkey", sc, []*sample{
		mk(100, []int64{10, 20, 30, 1000}, 0.01, 1000, 0, 1), // 50/s, p50 20µs, max 1000µs, 100µs CPU, 10 cmds
		mk(300, []int64{30, 40, 50, 60}, 0.06, 1800, 1, 0),   // 150/s, p50 40µs, max 60µs, 200µs CPU, 6 cmds
		mk(200, []int64{1, 2, 3, 4}, 0.05, 1600, 0, 2),       // 100/s, p50 2µs, max 4µs, 250µs CPU, 8 cmds
	})
	want := results.Result{
		Lib: "latchkey", Scenario: "d", Procs: 4, G: 8, Keys: 1, CSUS: 1000,
		AcqPerS: 100, P50US: 20, P99US: 60, P999US: 60, MaxUS: 60, RedisCPUUSPerAcq: 200, RedisCmdsPerAcq: 8,
		Violations: 1, Errors: 3, Reps: 3, DurS: 2, Acquisitions: 200,
	}
	// The histogram's p50 is within 0.1% above the sample; the other wait
	// figures here are maxima, which are exact.
	if r.P50US >= want.P50US && r.P50US < want.P50US*1.001 {
		r.P50US = want.P50US
	}
	if r != want {
		t.Errorf("summarize:\n got %+v\nwant %+v", r, want)
	}
	// No acquisition: the per-acquisition figures have no meaning and must
	// still encode (JSON has no NaN).
	r = summarize("redsync", sc, []*sample{mk(0, nil, 0.01, 10, 0, 0)})
	if r.AcqPerS != 0 || r.P99US != 0 || r.RedisCPUUSPerAcq != 0 {
		t.Errorf("summarize without acquisitions: %+v", r)
	}
	if _, err := json.Marshal(r); err != nil {
		t.Errorf("encoding it: %v", err)
	}
}
