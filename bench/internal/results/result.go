// Package results defines what lockbench writes and benchdoc reads: one
// Result per library per scenario, the sweep of retry settings, the idle
// waiting measurement, the fleet, the watchdog measurements, and the Meta
// that says where and how they were taken.
package results

// Figures are one library's measured figures in one scenario. A Result
// holds their medians over the repetitions, and their least and greatest
// values in Min and Max.
type Figures struct {
	AcqPerS float64 `json:"acq_per_s"`
	// Acquire waits, µs: from calling Lock to holding the lock.
	P50US            float64 `json:"p50_us"`
	P99US            float64 `json:"p99_us"`
	P999US           float64 `json:"p999_us"`
	MaxUS            float64 `json:"max_us"`
	RedisCPUUSPerAcq float64 `json:"redis_cpu_us_per_acq"`
	RedisCmdsPerAcq  float64 `json:"redis_cmds_per_acq"`
}

// Result is one library's figures in one scenario at one retry setting:
// the median over the repetitions of each figure (Figures), with the range
// over them (Min, Max), except Violations and Errors, which are totals over
// all of them. The JSON field order is part of the -json format: the fields
// up to errors are the fixed set, later ones are additions.
type Result struct {
	Lib      string  `json:"lib"`
	Scenario string  `json:"scenario"`
	Procs    int     `json:"procs"`
	G        int     `json:"g"` // goroutines per process
	Keys     int     `json:"keys"`
	CSUS     float64 `json:"cs_us"` // critical section, µs
	Figures
	Violations int64 `json:"violations"`
	Errors     int64 `json:"errors"`

	Reps         int     `json:"reps"`
	DurS         float64 `json:"dur_s"`        // measured duration of each repetition
	Acquisitions float64 `json:"acquisitions"` // median per repetition
	// Timeouts counts acquires that hit the per-acquire deadline (not the
	// end of the run), over all repetitions. They are not in the waits.
	Timeouts  int64  `json:"timeouts"`
	LastError string `json:"last_error,omitempty"`

	// Setting describes the library's retry setting in this run (see
	// locks.Setting), and BackoffMS is its value: the backoff cap or the
	// fixed retry delay, 0 for none or a random one.
	Setting   string  `json:"setting"`
	BackoffMS float64 `json:"backoff_ms,omitempty"`
	// Min and Max are the least and greatest value of each figure over the
	// repetitions.
	Min Figures `json:"min"`
	Max Figures `json:"max"`
	// Commands are Redis' calls per acquisition of each command (INFO
	// commandstats, the calls Lua scripts make included, the harness's and
	// the connections' own commands left out), by lower-case name.
	Commands map[string]Spread `json:"commands,omitempty"`
	// MeanWaitUS is the mean acquire wait, µs. In a closed loop (every
	// goroutine asks again at once) it is fixed by throughput: about
	// goroutines / acq/s - cs, whatever the lock's fairness; the
	// percentiles show how the lock spreads it.
	MeanWaitUS Spread `json:"mean_wait_us"`
}

// Spread is one figure over the repetitions: its median and its range.
type Spread struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
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
