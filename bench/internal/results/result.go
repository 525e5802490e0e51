// Package results defines what lockbench writes and benchdoc reads: one
// Result per library per scenario, the watchdog measurements, and the Meta
// that says where and how they were taken.
package results

// Result is one library's figures in one scenario: the median over the
// repetitions of each figure, except Violations and Errors, which are totals
// over all of them. The JSON field order is part of the -json format: the
// fields up to errors are the fixed set, later ones are additions.
type Result struct {
	Lib      string  `json:"lib"`
	Scenario string  `json:"scenario"`
	Procs    int     `json:"procs"`
	G        int     `json:"g"` // goroutines per process
	Keys     int     `json:"keys"`
	CSUS     float64 `json:"cs_us"` // critical section, µs
	AcqPerS  float64 `json:"acq_per_s"`
	// Acquire waits, µs: from calling Lock to holding the lock.
	P50US            float64 `json:"p50_us"`
	P99US            float64 `json:"p99_us"`
	P999US           float64 `json:"p999_us"`
	MaxUS            float64 `json:"max_us"`
	RedisCPUUSPerAcq float64 `json:"redis_cpu_us_per_acq"`
	RedisCmdsPerAcq  float64 `json:"redis_cmds_per_acq"`
	Violations       int64   `json:"violations"`
	Errors           int64   `json:"errors"`

	Reps         int     `json:"reps"`
	DurS         float64 `json:"dur_s"`        // measured duration of each repetition
	Acquisitions float64 `json:"acquisitions"` // median per repetition
	// Timeouts counts acquires that hit the per-acquire deadline (not the
	// end of the run), over all repetitions. They are not in the waits.
	Timeouts  int64  `json:"timeouts"`
	LastError string `json:"last_error,omitempty"`
}

// Scenario describes one load shape.
type Scenario struct {
	Name  string  `json:"name"`
	Label string  `json:"label"` // what it shows, for headings
	Procs int     `json:"procs"`
	G     int     `json:"g"`
	Keys  int     `json:"keys"`
	CSUS  float64 `json:"cs_us"`
}
