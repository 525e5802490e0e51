package results

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"
)

// ErrBadFile reports a results file benchdoc cannot use; regenerate it with
// lockbench -suite -out.
var ErrBadFile = errors.New("results: unusable results file")

// Meta says where, when and how the results were taken.
type Meta struct {
	Date         time.Time `json:"date"`
	Command      string    `json:"command"`
	GoVersion    string    `json:"go_version"`
	RedisVersion string    `json:"redis_version"`
	Redis        string    `json:"redis"` // how Redis ran, e.g. "redis-server process on 127.0.0.1"
	CPUModel     string    `json:"cpu_model"`
	Cores        int       `json:"cores"`
	Kernel       string    `json:"kernel"`
	Reps         int       `json:"reps"`
	DurS         float64   `json:"dur_s"`
	LeaseS       float64   `json:"lease_s"`
	TimeoutS     float64   `json:"timeout_s"` // per-acquire deadline
	Libs         []string  `json:"libs"`
	// Modules maps the lock libraries' modules to the versions measured.
	Modules   map[string]string `json:"modules"`
	Scenarios []Scenario        `json:"scenarios"`
	// SweepDurS is the measured duration of each run of the sweep, and
	// SweepMS the retry settings it tried (ms).
	SweepDurS float64   `json:"sweep_dur_s,omitempty"`
	SweepMS   []float64 `json:"sweep_ms,omitempty"`
	// Rotated says the order of the runs rotated from one repetition to
	// the next (A B C, B C A, ...); false in results from before it did,
	// whose runs went in the same order every repetition.
	Rotated bool `json:"rotated,omitempty"`
}

// File is a whole lockbench run.
type File struct {
	Meta Meta `json:"meta"`
	// Results has every library at its default setting.
	Results []Result `json:"results"`
	// Sweep has the polling libraries at their other retry settings, in
	// the contended scenarios.
	Sweep []Result `json:"sweep,omitempty"`
	Idle  *Idle    `json:"idle,omitempty"`
	Fleet *Fleet   `json:"fleet,omitempty"`
	// Floor is latchkey alone in (d)'s shape cut to one goroutine: the
	// critical section and one lock+unlock with nobody else, the most one
	// holder at a time can do on this machine (see FloorScenario).
	Floor    *Result   `json:"floor,omitempty"`
	Watchdog *Watchdog `json:"watchdog,omitempty"`
}

// Write stores f at path as indented JSON.
func Write(path string, f *File) error { return writeJSON(path, f) }

// writeJSON stores v at path as indented JSON.
func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("results: encoding: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("results: %w", err)
	}
	return nil
}

// Read loads a File written by Write.
func Read(path string) (*File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("results: %w (run `make bench` to produce it)", err)
	}
	var f File
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrBadFile, path, err)
	}
	// A run of some parts of the suite only (lockbench -scenarios g) has
	// no Results but still results.
	if len(f.Results) == 0 && f.Idle == nil && f.Fleet == nil && f.Watchdog == nil {
		return nil, fmt.Errorf("%w: %s has no results", ErrBadFile, path)
	}
	return &f, nil
}

// Find returns the result of lib in scenario at its default setting, or nil.
func (f *File) Find(lib, scenario string) *Result {
	for i := range f.Results {
		if r := &f.Results[i]; r.Lib == lib && r.Scenario == scenario {
			return r
		}
	}
	return nil
}

// Settings returns lib's results in scenario at every setting measured,
// the default's first, then the sweep's in the order they were run.
func (f *File) Settings(lib, scenario string) []*Result {
	var rs []*Result
	if r := f.Find(lib, scenario); r != nil {
		rs = append(rs, r)
	}
	for i := range f.Sweep {
		if r := &f.Sweep[i]; r.Lib == lib && r.Scenario == scenario {
			rs = append(rs, r)
		}
	}
	return rs
}
