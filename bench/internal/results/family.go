package results

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"time"
)

// Family is what familybench writes (results/family.json): latchkey's
// primitives besides Mutex against their spin variants and against a
// plain Mutex, each repetition kept, so that the reader takes medians,
// ranges and paired ratios.
type Family struct {
	Meta      FamilyMeta       `json:"meta"`
	Scenarios []FamilyScenario `json:"scenarios"`
}

// FamilyMeta says where, when and how the family was measured.
type FamilyMeta struct {
	Date    time.Time `json:"date"`
	Command string    `json:"command"`
	Host
	RedisVersion string  `json:"redis_version"`
	Redis        string  `json:"redis"`
	Reps         int     `json:"reps"`
	DurS         float64 `json:"dur_s"`
	LeaseS       float64 `json:"lease_s"`
	TimeoutS     float64 `json:"timeout_s"`
}

// FamilyScenario is one load shape and its variants' runs. Kinds are its
// kinds of operation ("read", "write"; "acquire"), each drawn with its
// share of Shares.
type FamilyScenario struct {
	Name    string    `json:"name"`
	Label   string    `json:"label"`
	Clients int       `json:"clients"` // latchkey clients, each on its own rueidis client
	G       int       `json:"g"`       // goroutines per client
	CSUS    float64   `json:"cs_us"`   // hold, µs
	Size    int64     `json:"size,omitempty"`
	Kinds   []string  `json:"kinds"`
	Shares  []float64 `json:"shares"`
	// Baseline is the variant the ratios are taken against.
	Baseline string          `json:"baseline"`
	Variants []FamilyVariant `json:"variants"`
	// Note says in a sentence what the scenario shows.
	Note string `json:"note,omitempty"`
}

// FamilyVariant is one implementation's repetitions in a scenario.
type FamilyVariant struct {
	Name string      `json:"name"`
	Desc string      `json:"desc"`
	Reps []FamilyRep `json:"reps"`
}

// FamilyRep is one run of one variant.
type FamilyRep struct {
	DurS float64 `json:"dur_s"`
	// Ops has the acquisitions of each kind of operation.
	Ops map[string]FamilyOps `json:"ops"`
	// RedisCPUS is the server's CPU time over the run, and RedisCmds its
	// commands for the locks (INFO commandstats, overhead left out).
	RedisCPUS  float64 `json:"redis_cpu_s"`
	RedisCmds  int64   `json:"redis_cmds"`
	Violations int64   `json:"violations"`
	Errors     int64   `json:"errors"`
	Timeouts   int64   `json:"timeouts"`
	LastError  string  `json:"last_error,omitempty"`
}

// FamilyOps are one kind of operation's figures in one run: acquisitions
// granted before the end, and the waits (call to grant) in µs.
type FamilyOps struct {
	Count int64   `json:"count"`
	P50US float64 `json:"p50_us"`
	P99US float64 `json:"p99_us"`
	MaxUS float64 `json:"max_us"`
}

// Acquisitions is the run's acquisitions of every kind.
func (r *FamilyRep) Acquisitions() int64 {
	var n int64
	for _, o := range r.Ops {
		n += o.Count
	}
	return n
}

// PerS is the run's acquisitions per second: of kind, or of every kind
// for "".
func (r *FamilyRep) PerS(kind string) float64 {
	n := r.Acquisitions()
	if kind != "" {
		n = r.Ops[kind].Count
	}
	return float64(n) / r.DurS
}

// Wait is a wait percentile of kind in µs (50, 99 or 100), NaN when the
// kind had no wait.
func (r *FamilyRep) Wait(kind string, p int) float64 {
	o, ok := r.Ops[kind]
	if !ok || o.Count == 0 && o.MaxUS == 0 {
		return math.NaN()
	}
	switch p {
	case 50:
		return o.P50US
	case 99:
		return o.P99US
	}
	return o.MaxUS
}

// CPUUSPerAcq is Redis CPU per acquisition, µs; NaN without any.
func (r *FamilyRep) CPUUSPerAcq() float64 { return r.perAcq(r.RedisCPUS * 1e6) }

// CmdsPerAcq is Redis commands per acquisition; NaN without any.
func (r *FamilyRep) CmdsPerAcq() float64 { return r.perAcq(float64(r.RedisCmds)) }

func (r *FamilyRep) perAcq(x float64) float64 {
	n := r.Acquisitions()
	if n == 0 {
		return math.NaN()
	}
	return x / float64(n)
}

// Spread is one figure of v over its repetitions.
func (v *FamilyVariant) Spread(fig func(r *FamilyRep) float64) Spread {
	xs := make([]float64, len(v.Reps))
	for i := range v.Reps {
		xs[i] = fig(&v.Reps[i])
	}
	return SpreadOf(xs)
}

// Ratio is fig of v over fig of base, repetition by repetition (the two
// ran one after the other in each), as a median and range; NaN where
// base's figure is not positive.
func (v *FamilyVariant) Ratio(base *FamilyVariant, fig func(r *FamilyRep) float64) Spread {
	n := min(len(v.Reps), len(base.Reps))
	xs := make([]float64, n)
	for i := range n {
		a, b := fig(&v.Reps[i]), fig(&base.Reps[i])
		xs[i] = math.NaN()
		if b > 0 {
			xs[i] = a / b
		}
	}
	return SpreadOf(xs)
}

// Totals are the counts that must stay at zero, over every repetition.
func (v *FamilyVariant) Totals() (violations, errs, timeouts int64, lastErr string) {
	for _, r := range v.Reps {
		violations += r.Violations
		errs += r.Errors
		timeouts += r.Timeouts
		if r.LastError != "" {
			lastErr = r.LastError
		}
	}
	return violations, errs, timeouts, lastErr
}

// Variant returns the variant called name, or nil.
func (s *FamilyScenario) Variant(name string) *FamilyVariant {
	for i := range s.Variants {
		if s.Variants[i].Name == name {
			return &s.Variants[i]
		}
	}
	return nil
}

// WriteFamily stores f at path as indented JSON.
func WriteFamily(path string, f *Family) error { return writeJSON(path, f) }

// ReadFamily loads a family.json. A missing file is not an error: it
// returns nil, nil (familybench was not run).
func ReadFamily(path string) (*Family, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("results: %w", err)
	}
	var f Family
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrBadFile, path, err)
	}
	return &f, nil
}
