package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/latchkey/latchkey/bench/internal/results"
)

// familyRep is a run of 2s with reads and writes at the given counts.
func familyRep(reads, writes int64, readP99, cpuS float64) results.FamilyRep {
	return results.FamilyRep{DurS: 2, RedisCPUS: cpuS, RedisCmds: 10 * (reads + writes), Ops: map[string]results.FamilyOps{
		"read":  {Count: reads, P50US: readP99 / 2, P99US: readP99, MaxUS: 2 * readP99},
		"write": {Count: writes, P50US: 100, P99US: 1000, MaxUS: 2000},
	}}
}

// generateFamily runs benchdoc on the fixture with a family file (nil:
// none written) and returns the document.
func generateFamily(t *testing.T, f *results.Family) string {
	t.Helper()
	root := t.TempDir()
	o := options{
		in:     "testdata/lockbench.json",
		market: filepath.Join(root, "market.json"),
		family: filepath.Join(root, "family.json"),
		doc:    filepath.Join(root, "benchmarks.md"),
		svg:    filepath.Join(root, "bench"),
	}
	if f != nil {
		if err := results.WriteFamily(o.family, f); err != nil {
			t.Fatal(err)
		}
	}
	return generateDoc(t, o)
}

func TestDocFamily(t *testing.T) {
	f := &results.Family{
		Meta: results.FamilyMeta{Date: time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC), Command: "go run ./cmd/familybench -reps 2", Reps: 2, DurS: 2},
		Scenarios: []results.FamilyScenario{
			{Name: "rw", Label: "RWMutex, 95 % reads", Clients: 4, G: 8, CSUS: 100, Kinds: []string{"read", "write"}, Shares: []float64{0.95, 0.05},
				Baseline: "rwmutex", Note: "Reads with probability 0.95", Variants: []results.FamilyVariant{
					{Name: "rwmutex", Desc: "the RWMutex", Reps: []results.FamilyRep{familyRep(9500, 500, 800, 0.5), familyRep(11400, 600, 1000, 0.6)}},
					{Name: "mutex", Desc: "a Mutex", Reps: []results.FamilyRep{familyRep(4750, 250, 1600, 0.25), familyRep(3800, 200, 3000, 0.3)}},
				}},
			{Name: "semaphore", Label: "Semaphore", Clients: 4, G: 16, Kinds: []string{"acquire"}, Baseline: "semaphore"},
		},
	}
	doc := generateFamily(t, f)
	assertContains(t, doc,
		"## Lock family (issue 11)\n",
		"Command: `go run ./cmd/familybench -reps 2`",
		"### rw: RWMutex, 95 % reads: 4 clients × 8 goroutines, one lock, hold 100µs\n",
		"| variant | acq/s | reads/s | writes/s | read p50 wait | read p99 wait | write p50 wait | write p99 wait | Redis CPU/acq | Redis cmds/acq |\n",
		// rwmutex: 5000 and 6000 acq/s, median 5500; 50µs CPU each.
		"| rwmutex | 5500 (5000–6000) | 5225 (4750–5700) | 275 (250–300) | 450µs (400µs–500µs) | 900µs (800µs–1.0ms) | 100µs | 1.0ms | 50µs | 10.0 |\n",
		"| variant ÷ rwmutex | acq/s | read p99 wait | write p99 wait | Redis CPU/acq |\n",
		// Per repetition: 1/2 and 1/3 of the throughput, 2× and 3× the
		// read p99, 1× and 1.5× the CPU per acquisition.
		"| mutex | 0.42× (0.33×–0.50×) | 2.50× (2.00×–3.00×) | 1.00× | 1.25× (1.00×–1.50×) |\n",
		"Reads with probability 0.95. rwmutex is the RWMutex; mutex is a Mutex. No violations, errors or timeouts in any run.",
		"### semaphore: Semaphore: 4 clients × 16 goroutines, one lock, hold 0µs\n",
	)
	sectionOf(t, doc, "## Market", "## Lock family") // after Market, before Method
	sectionOf(t, doc, "## Lock family", "## Method")
}

func TestDocFamilyMissingOrNotAsked(t *testing.T) {
	assertContains(t, generateFamily(t, nil), "## Lock family (issue 11)\n\nNot run (`")
	if doc, _ := generateFixture(t, nil); strings.Contains(doc, "Lock family") {
		t.Error("a document generated without -family has a lock family section")
	}
}
