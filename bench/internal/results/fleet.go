package results

// Fleet is scenario (g), a fleet: one lock taken in turn by many processes
// of one goroutine each, at several fleet sizes. With one goroutine per
// process every waiter is a Redis client of its own, so whatever a library
// does per waiting client (a subscription, a poll, an invalidation) is paid
// once per waiter rather than shared by a process's goroutines.
type Fleet struct {
	// Scenarios are the fleet's sizes, smallest first: one shape but for
	// Procs.
	Scenarios []Scenario `json:"scenarios"`
	Reps      int        `json:"reps"`
	DurS      float64    `json:"dur_s"` // measured duration of each run
	// RampS ran before each measured duration and is left out of the
	// counts, CPU and commands; a wait that began in it counts whole (0 in
	// results from before the ramp).
	RampS float64 `json:"ramp_s,omitempty"`
	// Results has every library at its default setting at every size.
	Results []FleetResult `json:"results"`
}

// FleetResult is one library at one fleet size: the scenario's Result, and
// the figures of (g) that the other scenarios do not show.
type FleetResult struct {
	Result
	// AttemptsPerAcq is the tries to take the lock per acquisition, the
	// tries of acquires the run's end cut off included; nil for a library
	// whose API does not show its tries (see locks.CountsAttempts).
	AttemptsPerAcq *Spread `json:"attempts_per_acq,omitempty"`
	// SubscribesPerAcq is SUBSCRIBE + SSUBSCRIBE calls per acquisition,
	// UnsubscribesPerAcq UNSUBSCRIBE + SUNSUBSCRIBE (INFO commandstats).
	SubscribesPerAcq   Spread `json:"subscribes_per_acq"`
	UnsubscribesPerAcq Spread `json:"unsubscribes_per_acq"`
}

// Find returns lib's result at the fleet size of procs processes, or nil.
func (f *Fleet) Find(lib string, procs int) *FleetResult {
	for i := range f.Results {
		if r := &f.Results[i]; r.Lib == lib && r.Procs == procs {
			return r
		}
	}
	return nil
}
