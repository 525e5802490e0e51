package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/latchkey/latchkey/bench/internal/locks"
	"github.com/latchkey/latchkey/bench/internal/precise"
	"github.com/latchkey/latchkey/internal/childproc"
	"github.com/latchkey/latchkey/internal/latency"
)

// workerRole is the childproc role of this binary re-executed as a worker,
// with its workerParams as the child's parameters.
const workerRole = "lockbench-worker"

// errorBackoff keeps a goroutine whose Lock fails at once from spinning.
const errorBackoff = 10 * time.Millisecond

type workerParams struct {
	Lib     string        `json:"lib"`
	Addr    string        `json:"addr"`
	Proc    int           `json:"proc"` // 0-based
	G       int           `json:"g"`
	Keys    int           `json:"keys"`
	CS      time.Duration `json:"cs"`
	Dur     time.Duration `json:"dur"`
	Ramp    time.Duration `json:"ramp,omitempty"` // runs before Dur, its grants and tries not counted (hammer)
	Lease   time.Duration `json:"lease"`
	Timeout time.Duration `json:"timeout"`
	Backoff time.Duration `json:"backoff,omitempty"` // locks.Options.Backoff
	Events  bool          `json:"events,omitempty"`  // report grant and release instants
}

// ready is a worker's first message; report its last.
type ready struct {
	Ready bool `json:"ready"`
}

type report struct {
	Acquisitions int64             `json:"acquisitions"`
	Waits        latency.Histogram `json:"waits"` // one sample per acquisition
	// Attempts are the tries to take a lock during the run, warm-up left
	// out; 0 from a library that does not count them (locks.CountsAttempts).
	Attempts int64 `json:"attempts"`
	// EventsNS are the instants (unix ns) of every grant and of every
	// Unlock's return, when workerParams.Events asks for them.
	EventsNS []int64 `json:"events_ns,omitempty"`
	counts
}

// counts are what goes wrong: violations and errors must stay at zero.
type counts struct {
	Violations int64  `json:"violations"`
	Errors     int64  `json:"errors"`
	Timeouts   int64  `json:"timeouts"` // acquires that hit the per-acquire deadline
	LastError  string `json:"last_error,omitempty"`
}

func (c *counts) add(o counts) {
	c.Violations += o.Violations
	c.Errors += o.Errors
	c.Timeouts += o.Timeouts
	if o.LastError != "" {
		c.LastError = o.LastError
	}
}

func (c *counts) fail(err error) {
	c.Errors++
	c.LastError = err.Error()
}

// keyName is the name of lock key i, the same for every library.
func keyName(i int) string { return "lockbench:" + strconv.Itoa(i) }

func workerMain() int {
	// The parent decides when we stop; a terminal's Ctrl-C reaches the
	// whole process group, and the parent kills us if need be.
	signal.Ignore(os.Interrupt)
	var p workerParams
	if err := childproc.Params(&p); err != nil {
		fmt.Fprintln(os.Stderr, "lockbench worker:", err)
		return 2
	}
	if err := work(p, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "lockbench worker %d (%s): %v\n", p.Proc, p.Lib, err)
		return 1
	}
	return 0
}

// work is one worker process: connect, warm up, say ready, wait for the
// start instant on in, run, report on out.
func work(p workerParams, in io.Reader, out io.Writer) error {
	var attempts atomic.Int64
	lib, err := locks.Open(p.Lib, locks.Options{Addr: p.Addr, Lease: p.Lease, Conns: p.G, Backoff: p.Backoff,
		OnAttempt: func() { attempts.Add(1) }})
	if err != nil {
		return err
	}
	closeLib := sync.OnceValue(lib.Close)
	defer closeLib()
	if err := warmUp(lib, p); err != nil {
		return fmt.Errorf("warming up: %w", err)
	}
	attempts.Store(0) // the warm-up's tries are not the run's
	enc := json.NewEncoder(out)
	if err := enc.Encode(ready{Ready: true}); err != nil {
		return err
	}
	stdin := bufio.NewReader(in)
	line, err := stdin.ReadString('\n')
	if err != nil {
		return fmt.Errorf("waiting for the start instant: %w", err)
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(line), 10, 64)
	if err != nil {
		return fmt.Errorf("bad start instant %q: %w", line, err)
	}
	// EOF on stdin means the parent is gone, however it died: stop rather
	// than linger. Before it, closeLine lets a run with a ramp close.
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	mayClose := make(chan struct{})
	go func() {
		if line, err := stdin.ReadString('\n'); err == nil && line == closeLine {
			close(mayClose)
		}
		_, _ = io.Copy(io.Discard, stdin)
		cancel(errors.New("parent gone"))
	}()

	start := time.Unix(0, ns)
	time.Sleep(time.Until(start))
	from := start.Add(p.Ramp)
	if p.Ramp > 0 {
		// The tries of the ramp are not the run's either (one in flight
		// at from may count: an edge effect of one try per process).
		defer time.AfterFunc(time.Until(from), func() { attempts.Store(0) }).Stop()
	}
	rep := hammerAll(ctx, lib, p, from, from.Add(p.Dur))
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	rep.Attempts = attempts.Load() // every Lock has returned
	if p.Ramp > 0 {
		// The parent reads Redis at the run's end, then lets us close.
		select {
		case <-mayClose:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	// Close before reporting: without a ramp, the parent's final reading
	// of Redis' counters comes after everything this worker sent.
	if err := closeLib(); err != nil {
		return fmt.Errorf("closing %s: %w", p.Lib, err)
	}
	return enc.Encode(rep)
}

// warmTry bounds each try of the warm-up. With many workers starting at
// once on few cores a library can lose its first try at a key nobody else
// uses and then wait for a wake-up that never comes: rueidislock gives a
// try 20ms and, past that, waits for an invalidation of the key, which a
// try that never reached Redis does not cause (about one start in three
// with 64 workers on 2 cores). A fresh Lock gets past it; the measured
// runs keep whatever the library does. A variable for the tests.
var warmTry = 5 * time.Second

// warmUp has every goroutine take and release a key of its own, so that
// connections are open and scripts loaded before the measurement.
func warmUp(lib locks.Lib, p workerParams) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	errs := make([]error, p.G)
	var wg sync.WaitGroup
	for j := range p.G {
		wg.Go(func() {
			l := lib.Locker(fmt.Sprintf("lockbench:warm:%d:%d", p.Proc, j))
			for {
				tctx, cancelTry := context.WithTimeout(ctx, warmTry)
				unlock, err := l.Lock(tctx)
				if err == nil {
					err = unlock() // before cancelTry: some libraries end the hold with it
				}
				cancelTry()
				if err == nil || ctx.Err() != nil || !errors.Is(tctx.Err(), context.DeadlineExceeded) {
					errs[j] = err
					return
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// hammerAll runs p.G goroutines until end and merges what they saw from
// from on (hammer).
func hammerAll(ctx context.Context, lib locks.Lib, p workerParams, from, end time.Time) report {
	inside := make([]atomic.Int32, p.Keys) // holders in this process, per key
	tallies := make([]tally, p.G)
	var wg sync.WaitGroup
	for j := range p.G {
		k := (p.Proc*p.G + j) % p.Keys
		l := lib.Locker(keyName(k))
		wg.Go(func() { hammer(ctx, l, p, from, end, &inside[k], &tallies[j]) })
	}
	wg.Wait()
	var rep report
	for i := range tallies {
		t := &tallies[i]
		rep.Acquisitions += t.acquired
		rep.Waits.Merge(&t.waits)
		rep.EventsNS = append(rep.EventsNS, t.events...)
		rep.add(t.counts)
	}
	return rep
}

// tally is one goroutine's count; only that goroutine writes it.
type tally struct {
	acquired int64
	// waits has a sample per acquisition, and one per acquire still
	// waiting when the run ended (its wait so far, a lower bound).
	waits  latency.Histogram
	events []int64 // unix ns, when p.Events
	counts
}

// hammer is one goroutine's loop: Lock (bounded by the per-acquire deadline
// and the end of the run), hold for p.CS, Unlock. inside counts this
// process's holders of the key: a second one at once is a violation. It
// costs no Redis command, and catches overlaps within a process only.
// A grant before from (the ramp) counts only for violations and errors;
// one from on counts with its whole wait, the ramp's part included.
func hammer(ctx context.Context, l locks.Locker, p workerParams, from, end time.Time, inside *atomic.Int32, t *tally) {
	for {
		t0 := time.Now()
		if !t0.Before(end) || ctx.Err() != nil {
			return
		}
		deadline := t0.Add(p.Timeout)
		if end.Before(deadline) {
			deadline = end
		}
		actx, cancel := context.WithDeadline(ctx, deadline)
		unlock, err := l.Lock(actx)
		got := time.Now()
		if err != nil {
			cancel()
			switch {
			case ctx.Err() != nil:
				return
			case actx.Err() != nil: // the deadline, whatever the library made of it
				if deadline.Before(end) {
					t.Timeouts++
				} else {
					// Still waiting when the run ended. Dropping the wait
					// would hide exactly the waiters an unfair lock starves.
					t.waits.Record(end.Sub(t0))
				}
			default:
				t.fail(err)
				time.Sleep(errorBackoff)
			}
			continue
		}
		if inside.Add(1) != 1 {
			t.Violations++
		}
		precise.Wait(p.CS)
		inside.Add(-1)
		if err := unlock(); err != nil {
			t.fail(fmt.Errorf("unlock: %w", err))
		}
		if p.Events {
			t.events = append(t.events, got.UnixNano(), time.Now().UnixNano())
		}
		cancel() // only now: some libraries end the hold with actx
		switch {
		case got.Before(from):
		case got.Before(end):
			t.acquired++
			t.waits.Record(got.Sub(t0))
		default:
			t.waits.Record(end.Sub(t0)) // granted after the end: as if still waiting
		}
	}
}
