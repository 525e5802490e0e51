package results

// Watchdog is the watchdog-scale measurement: one latchkey client holding
// many locks without a lease, renewed by its watchdog.
type Watchdog struct {
	TimeoutMS  float64 `json:"timeout_ms"`
	IntervalMS float64 `json:"interval_ms"`
	BatchSize  int     `json:"batch_size"`
	// GoroutinesIdle is the process's goroutine count with the client open
	// and no lock held.
	GoroutinesIdle int            `json:"goroutines_idle"`
	Steps          []WatchdogStep `json:"steps"`
	Lost           uint64         `json:"lost"`   // leases the watchdog gave up
	Errors         uint64         `json:"errors"` // renew calls that failed
}

// WatchdogStep is the watchdog's load with Locks held, per renewal tick.
type WatchdogStep struct {
	Locks int    `json:"locks"`
	Ticks uint64 `json:"ticks"`
	// CallsPerTick is renew script calls per tick (watchdog.Stats.Calls /
	// Ticks); all of a tick's calls go out in one pipelined batch.
	CallsPerTick float64 `json:"calls_per_tick"`
	// EvalshaPerTick cross-checks it from Redis' commandstats.
	EvalshaPerTick    float64 `json:"evalsha_per_tick"`
	RedisCPUUSPerTick float64 `json:"redis_cpu_us_per_tick"`
	// ClientCPUUSPerTick is the benchmark process's user and system CPU per
	// tick (getrusage), with the Go runtime's garbage collection in the
	// window (GCCycles of it); 0 in files written before it was measured.
	ClientCPUUSPerTick   float64 `json:"client_cpu_us_per_tick,omitempty"`
	ClientAllocKBPerTick float64 `json:"client_alloc_kb_per_tick,omitempty"` // heap allocation per tick
	GCCycles             uint32  `json:"gc_cycles"`                          // completed in the window
	RenewedPerTick       float64 `json:"renewed_per_tick"`
	Goroutines           int     `json:"goroutines"` // while holding Locks
	// AcquireMS is how long taking this step's locks took: those beyond the
	// previous step's, the previous step's still held.
	AcquireMS float64 `json:"acquire_ms,omitempty"`
}
