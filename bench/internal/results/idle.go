package results

// Idle is scenario (f), idle waiting: every goroutine waits on one key
// whose holders keep it for a long critical section, and Redis' load is
// measured only while nobody can acquire, between a grant and the release
// that ends it.
type Idle struct {
	Scenario Scenario `json:"scenario"`
	DurS     float64  `json:"dur_s"`     // measured duration of each run
	SampleMS float64  `json:"sample_ms"` // period of the INFO readings
	// MarginMS is how far from a grant or a release (or the start) a
	// reading interval must stay to count as idle.
	MarginMS float64 `json:"margin_ms"`
	// SettleMS is how long after a run's start no interval counts: every
	// waiter is just starting to wait. 0 in files from before it existed.
	SettleMS float64 `json:"settle_ms,omitempty"`
	// EndExcluded says the margin was also kept from the run's end, when
	// every waiter gives up (false in files from before it was).
	EndExcluded bool `json:"end_excluded,omitempty"`
	// Baseline is Redis with no client but the sampler, over the same
	// kind of readings: the floor of CPU per second.
	Baseline IdleResult   `json:"baseline"`
	Results  []IdleResult `json:"results"`
}

// IdleResult is one library's load on Redis while its waiters are blocked,
// over the idle intervals of each repetition: the median and the range of
// each figure over the repetitions. Violations, Errors and Timeouts are
// totals.
type IdleResult struct {
	Lib       string  `json:"lib"`
	Setting   string  `json:"setting"`
	BackoffMS float64 `json:"backoff_ms,omitempty"`
	Reps      int     `json:"reps"`
	// IdleS is the time counted as idle per repetition, seconds.
	IdleS Spread `json:"idle_s"`
	// CmdsPerS is Redis commands per second while idle, the harness's
	// and the connections' own commands left out; CPUMSPerS is Redis CPU
	// time per second, ms.
	CmdsPerS  Spread `json:"cmds_per_s"`
	CPUMSPerS Spread `json:"cpu_ms_per_s"`
	// Grants is the holds that began per repetition.
	Grants     Spread `json:"grants"`
	Violations int64  `json:"violations"`
	Errors     int64  `json:"errors"`
	Timeouts   int64  `json:"timeouts"`
	LastError  string `json:"last_error,omitempty"`
}
