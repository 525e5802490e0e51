package integration

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/latchkey/latchkey/rlock"
)

// The torture workload: what one process (the test process or a child) runs.
// Its goroutines take locks in every way the API offers and report what they
// saw as tortureEvents; the test process judges them (torture_check_test.go).

// tortureConfig is one process's share of a run: a child's childproc
// parameters.
type tortureConfig struct {
	Seed       uint64
	Proc       int      // 0: the test process; children count from 1
	LockAddrs  []string // the Redis (or Cluster) the locks live on
	ProxyAddr  string   // a delaying proxy in front of LockAddrs; "" on Cluster
	StoreAddr  string   // the Redis of the checkers (fenced counters, markers)
	Prefix     string   // rlock.Options.Prefix, unique per run
	Locks      []string // lock names; the checkers' keys are derived from them
	Goroutines int
	Shared     bool // goroutines 0 and 1 share their *rlock.Mutex (new semantics only)
	Compat     bool // only operations that mean the same under the old handle-owner semantics
}

// Tuning of the workload. Leases are short so that faults resolve, and the
// run quiesces, within seconds.
const (
	tortureClients        = 2 // per process; the second goes through the proxy when there is one
	tortureWatchdog       = 2 * time.Second
	tortureMinLease       = 150 * time.Millisecond
	tortureMaxLease       = 400 * time.Millisecond
	tortureReleaseTimeout = 2 * time.Second
	tortureOpTimeout      = 10 * time.Second // bounds every Lock call and every checker call
	// tortureReentryBound: a re-entry never waits (new semantics, point 1);
	// one round trip on a loaded 2-core machine under -race stays far below.
	tortureReentryBound = 500 * time.Millisecond
)

// tortureEvent is one entry of a run's history.
type tortureEvent struct {
	Kind   string        `json:"k"` // see the ev* constants
	Lock   int           `json:"l"`
	Who    string        `json:"w,omitempty"`  // goroutine, "p1g2"
	Client string        `json:"c,omitempty"`  // client generation, "p1c0.3"
	Proxy  bool          `json:"px,omitempty"` // that client goes through the delaying proxy
	Hold   string        `json:"h,omitempty"`  // hold id, "p1g2#17"
	Others []string      `json:"o,omitempty"`  // overlap: markers of other holds found inside
	Token  int64         `json:"tok,omitempty"`
	Lease  time.Duration `json:"ls,omitempty"` // hold: WithLease, 0 for the watchdog
	From   int64         `json:"f"`            // unix ns: the call (or the check)
	Got    int64         `json:"g,omitempty"`  // hold: when Lock returned
	To     int64         `json:"t,omitempty"`  // the end (hold: the last Unlock returned)
	LostAt int64         `json:"x,omitempty"`  // hold: its context ended with ErrLockLost
	Last   int64         `json:"re,omitempty"` // hold: when its last re-entry returned (it may renew the lease)
	Inv    string        `json:"i,omitempty"`  // bad: which invariant
	Hard   bool          `json:"hd,omitempty"` // bad: no injected fault excuses it
	Fault  string        `json:"fk,omitempty"` // fault: its kind, see the fault* constants
	Note   string        `json:"n,omitempty"`
	Acked  int           `json:"a,omitempty"` // sum: accepted increments
	Unsure int           `json:"u,omitempty"` // sum: increments whose outcome is unknown
	// ReleaseFailed: the hold's last Unlock failed; the lock may live one
	// lease longer than the hold.
	ReleaseFailed bool `json:"rf,omitempty"`
}

const (
	evHold  = "hold"  // one grant, from the Lock call to its last Unlock
	evWait  = "wait"  // a Lock or waiting TryLock that took longer than the free-wait bound, or failed
	evBad   = "bad"   // a check that failed where it ran; judged against the faults at the end
	evClose = "close" // Client.Close (and reopen) by a worker
	evFault = "fault" // injected by the controller
	evSum   = "sum"   // a process's increments of one lock's counter
	evReady = "ready" // child protocol
	evDone  = "done"
)

// Invariant names, as reports print them.
const (
	invExclusion = "exclusion"  // overlapping sections, stale fencing tokens, lost updates
	invHoldCount = "hold count" // Redis's count vs the owner's levels
	invLost      = "lost"       // ErrLockLost with no injected cause
	invWaitFree  = "wait-free"  // a waiter waiting while the lock is free
	invReentry   = "reentry"    // a re-entry that waited or failed
	invUnlock    = "unlock"     // Unlock of no hold or a released level changed something
	invError     = "error"      // an unexpected error
	invQuiet     = "quiescence" // keys, channels or goroutines left behind
)

// recorder receives events; it must be safe for concurrent use.
type recorder func(tortureEvent)

// clientSlot is one of a process's lock clients. A worker may Close it and
// put a fresh rlock.Client (over the same rueidis client) in its place while
// the others keep using the old one: they then see ErrClosed.
type clientSlot struct {
	name  string
	proxy bool
	rc    rueidis.Client
	opts  rlock.Options

	mu     sync.Mutex
	c      *rlock.Client
	gen    int
	shared map[int]*rlock.Mutex // by lock, of c: the handle shared-mode goroutines use
}

func newClientSlot(name string, proxy bool, rc rueidis.Client, opts rlock.Options) (*clientSlot, error) {
	s := &clientSlot{name: name, proxy: proxy, rc: rc, opts: opts}
	return s, s.open()
}

// open installs a new client; the caller holds s.mu or owns s alone.
func (s *clientSlot) open() error {
	c, err := rlock.NewClient(s.rc, s.opts)
	if err != nil {
		return err
	}
	s.c, s.shared = c, map[int]*rlock.Mutex{}
	s.gen++
	return nil
}

// clientRef is a worker's view of a slot's client for one iteration.
type clientRef struct {
	c     *rlock.Client
	id    string
	proxy bool
}

// get returns the current client and the handle to use on lock: a fresh one,
// or the one shared by all shared-mode goroutines.
func (s *clientSlot) get(lock int, name string, shared bool) (clientRef, *rlock.Mutex) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ref := clientRef{c: s.c, id: fmt.Sprintf("%s.%d", s.name, s.gen), proxy: s.proxy}
	if !shared {
		return ref, s.c.Mutex(name)
	}
	m := s.shared[lock]
	if m == nil {
		m = s.c.Mutex(name)
		s.shared[lock] = m
	}
	return ref, m
}

// reopen closes the current client after installing a new one. Close runs
// outside s.mu: it waits for the client's goroutines, not for its users.
func (s *clientSlot) reopen(rec recorder) error {
	s.mu.Lock()
	old, id := s.c, fmt.Sprintf("%s.%d", s.name, s.gen)
	err := s.open()
	s.mu.Unlock()
	if err != nil {
		return err
	}
	from := time.Now()
	err = old.Close()
	rec(tortureEvent{Kind: evClose, Lock: -1, Client: id, Proxy: s.proxy, From: from.UnixNano(), To: time.Now().UnixNano()})
	return err
}

func (s *clientSlot) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.c.Close()
}

// workerState is one goroutine of the workload.
type workerState struct {
	cfg     tortureConfig
	who     string
	shared  bool
	locks   []int // the lock indexes to draw from, repeated for weight
	pauses  []int // the kinds of pause (short, medium, long) likewise
	rng     *rand.Rand
	slots   []*clientSlot
	checks  []*checker
	rec     recorder
	run     context.Context // ends when the run stops: waiters return at once
	holdSeq int
}

// plan is one iteration's random choices, all drawn up front whatever the
// outcome, so that the same seed gives every goroutine the same sequence of
// plans however the interleaving goes.
type plan struct {
	lock, slot int
	how        int           // howLock, howTry, howTryWait, howCancel
	useLease   bool          // WithLease(lease), else the watchdog
	lease      time.Duration //
	overrun    bool          // hold past the lease (it must be lost, and fenced)
	wait       time.Duration // WithWait, or when to cancel a waiting Lock
	think      time.Duration // inside each critical section
	thinkQuiet time.Duration // the same on the quiet lock
	nested     int           // re-entries through the lock context
	nestedTry  bool          // re-enter with TryLock rather than Lock
	stray      bool          // Unlock with a context that carries no hold
	double     bool          // Unlock a released level again
	reopen     bool          // Close and reopen the client afterwards
	pause      time.Duration // between iterations
}

const (
	howLock = iota
	howTry
	howTryWait
	howCancel
)

func (w *workerState) draw() plan {
	r := w.rng
	p := plan{
		lock: w.locks[r.IntN(len(w.locks))], slot: r.IntN(len(w.slots)),
		how:      []int{howLock, howLock, howLock, howTry, howTry, howTryWait, howTryWait, howCancel, howCancel, howCancel}[r.IntN(10)],
		useLease: r.IntN(10) < 3, lease: tortureMinLease + time.Duration(r.Int64N(int64(tortureMaxLease-tortureMinLease))),
		overrun: r.IntN(10) < 3, wait: time.Duration(5+r.IntN(300)) * time.Millisecond,
		think: time.Duration(r.IntN(8000)) * time.Microsecond,
		// Longer on the quiet lock, so that its two contenders do meet.
		thinkQuiet: time.Duration(20+r.IntN(200)) * time.Millisecond,
		nested:     []int{0, 0, 0, 1, 1, 2}[r.IntN(6)], nestedTry: r.IntN(2) == 0,
		stray: r.IntN(10) == 0, double: r.IntN(5) == 0,
		reopen: r.IntN(400) == 0,
		// Mostly back at once, sometimes a while later. The goroutine of
		// the quiet lock sometimes goes idle for long: a wake-up its last
		// release lost then leaves the waiters with a free lock, which is
		// what wait-free looks for.
		pause: []time.Duration{time.Duration(r.IntN(10)), time.Duration(20 + r.IntN(180)), time.Duration(300 + r.IntN(1200))}[w.pauses[r.IntN(len(w.pauses))]] * time.Millisecond,
	}
	if w.cfg.Compat {
		// Under the old semantics the handle is the owner: both Unlocks
		// below would release a level the caller still holds.
		p.stray, p.double = false, false
	}
	p.overrun = p.overrun && p.useLease
	if p.lock == len(w.cfg.Locks)-1 {
		p.think = p.thinkQuiet
	}
	return p
}

// loop runs iterations until the run stops.
func (w *workerState) loop() {
	for w.run.Err() == nil {
		p := w.draw()
		w.iteration(p)
		if p.reopen && w.run.Err() == nil {
			if err := w.slots[p.slot].reopen(w.rec); err != nil {
				w.bad(invError, p.lock, "", true, time.Now(), "reopen: %v", err)
			}
		}
		think(w.run, p.pause)
	}
}

// think is workload time, not synchronisation: it ends early when ctx does.
func think(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

func (w *workerState) bad(inv string, lock int, hold string, hard bool, at time.Time, format string, args ...any) {
	w.rec(tortureEvent{Kind: evBad, Inv: inv, Lock: lock, Who: w.who, Hold: hold, Hard: hard, From: at.UnixNano(), Note: fmt.Sprintf(format, args...)})
}

// iteration takes the lock as the plan says and, if that worked, runs a
// hold session.
func (w *workerState) iteration(p plan) {
	name := w.cfg.Locks[p.lock]
	ref, m := w.slots[p.slot].get(p.lock, name, w.shared)
	var opts []rlock.LockOption
	if p.useLease {
		opts = append(opts, rlock.WithLease(p.lease))
	}
	// The Lock call's context is cancelled by a timer (the plan's for
	// howCancel, tortureOpTimeout otherwise) only while it waits: once it
	// holds, the timer is stopped, so the hold is not cut short.
	ctx, cancel := context.WithCancel(w.run)
	defer cancel()
	limit := tortureOpTimeout
	if p.how == howCancel {
		limit = p.wait
	}
	timer := time.AfterFunc(limit, cancel)
	call := time.Now()
	var lctx context.Context
	var ok bool
	var err error
	switch p.how {
	case howTry:
		lctx, ok, err = m.TryLock(ctx, opts...)
	case howTryWait:
		lctx, ok, err = m.TryLock(ctx, append(opts, rlock.WithWait(p.wait))...)
	default:
		lctx, err = m.Lock(ctx, opts...)
		ok = err == nil
	}
	timer.Stop()
	got := time.Now()
	outcome := "acquired"
	switch {
	case err != nil && (errors.Is(err, context.Canceled) || errors.Is(err, rlock.ErrClosed)):
		outcome = "ended: " + err.Error()
	case err != nil:
		outcome = "error: " + err.Error()
		w.rec(tortureEvent{Kind: evBad, Inv: invError, Lock: p.lock, Who: w.who, Client: ref.id, Proxy: ref.proxy,
			From: call.UnixNano(), To: got.UnixNano(), Note: "Lock: " + err.Error()})
	case !ok:
		outcome = "busy"
	}
	hold := ""
	if ok {
		w.holdSeq++
		hold = fmt.Sprintf("%s#%d", w.who, w.holdSeq)
	}
	// Waits that cannot break wait-free are left out, but not a call that
	// ended without the lock: its acquire may have been in flight, which
	// the history of a lock that stays busy with nobody in it should show.
	if (p.how != howTry && got.Sub(call) > tortureWaitFreeBound) || (err != nil && !ok) {
		w.rec(tortureEvent{Kind: evWait, Lock: p.lock, Who: w.who, Client: ref.id, Proxy: ref.proxy, Hold: hold,
			From: call.UnixNano(), To: got.UnixNano(), Note: outcome})
	}
	if ok {
		w.session(p, m, ref, hold, lctx, opts, call, got)
	}
}

// tortureWaitFreeBound is how long a waiter may wait while nobody holds its
// lock, with no fault injected that could explain it: the handoff window
// (a release reserves the lock for the client it wakes), plus the longest
// fixed lease of the workload (the tail the design accepts for a lost
// wake-up is the holder's remaining lease), plus scheduling slack for three
// processes under -race on 2 cores.
const tortureWaitFreeBound = rlock.DefaultHandoffWindow + tortureMaxLease + 300*time.Millisecond

// tortureMix says which locks goroutine g uses and how it pauses, as lists
// to draw from (repeats give weight). The last lock is quiet: only the last
// goroutine of each child process takes it (mostly: two contenders, in two
// processes), and that goroutine now and then goes idle for long, so that a
// waiter a wake-up missed is not soon rescued by a newcomer, and the lock
// stays free long enough for wait-free to see it. The other goroutines
// share the busy locks.
func tortureMix(g int, cfg tortureConfig) (locks, pauses []int) {
	n := len(cfg.Locks)
	for i := 0; len(locks) < 10; i++ {
		locks = append(locks, i%max(n-1, 1))
	}
	if g < cfg.Goroutines-1 || cfg.Proc == 0 || n < 2 {
		return locks, []int{0, 0, 0, 0, 0, 0, 0, 1, 1, 1}
	}
	return append(locks[:3], n-1, n-1, n-1, n-1, n-1, n-1, n-1), []int{0, 0, 0, 0, 0, 0, 1, 1, 2, 2}
}

// runTortureProcess is one process's workload: its clients, its goroutines
// until run ends, then every client closed and its counters reported.
func runTortureProcess(run context.Context, cfg tortureConfig, rec recorder) (err error) {
	var closers []func()
	defer func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}()
	connect := func(addrs []string) (rueidis.Client, error) {
		rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: addrs, DisableCache: true})
		if err == nil {
			closers = append(closers, rc.Close)
		}
		return rc, err
	}
	src, err := connect([]string{cfg.StoreAddr})
	if err != nil {
		return err
	}
	checks := make([]*checker, len(cfg.Locks))
	for i, name := range cfg.Locks {
		checks[i] = newChecker(src, cfg.Prefix, name)
	}
	opts := rlock.Options{Prefix: cfg.Prefix, WatchdogTimeout: tortureWatchdog, ReleaseTimeout: tortureReleaseTimeout}
	var slots []*clientSlot
	for i := 0; i < tortureClients; i++ {
		addrs, proxy := cfg.LockAddrs, false
		if i%2 == 1 && cfg.ProxyAddr != "" {
			addrs, proxy = []string{cfg.ProxyAddr}, true
		}
		rc, err := connect(addrs)
		if err != nil {
			return err
		}
		s, err := newClientSlot(fmt.Sprintf("p%dc%d", cfg.Proc, i), proxy, rc, opts)
		if err != nil {
			return err
		}
		slots = append(slots, s)
	}

	var wg sync.WaitGroup
	for g := 0; g < cfg.Goroutines; g++ {
		w := &workerState{
			cfg: cfg, who: fmt.Sprintf("p%dg%d", cfg.Proc, g), shared: cfg.Shared && !cfg.Compat && g < 2,
			rng:   rand.New(rand.NewPCG(cfg.Seed, uint64(cfg.Proc)<<32|uint64(g))),
			slots: slots, checks: checks, rec: rec, run: run,
		}
		w.locks, w.pauses = tortureMix(g, cfg)
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.loop()
		}()
	}
	wg.Wait()
	var errs []error
	for _, s := range slots {
		errs = append(errs, s.close())
	}
	for i, c := range checks {
		rec(tortureEvent{Kind: evSum, Lock: i, Who: fmt.Sprintf("p%d", cfg.Proc), From: time.Now().UnixNano(), Acked: c.acked, Unsure: c.unsure})
	}
	return errors.Join(errs...)
}
