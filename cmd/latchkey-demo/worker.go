package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/latchkey/latchkey/internal/childproc"
	"github.com/latchkey/latchkey/internal/latency"
	"github.com/latchkey/latchkey/rlock"
)

// A worker is this same binary started by childproc in workerRole, with
// its workerParams as the child's parameters. It writes one report per
// second to stdout.
const workerRole = "latchkey-demo-worker"

type workerParams struct {
	ID         int
	Addr       string
	Lock       string
	Mode       string // "pubsub" or "spin"
	Goroutines int
	Dur, CS    time.Duration
	Metrics    string // where to serve /metrics (host:port)
}

// report is one worker's activity during one second of a phase: Second k
// covers (k-1 s, k s] after the start, and the last one also everything that
// finished after the end (the holders that were inside at that moment).
type report struct {
	Worker   int                `json:"worker"`
	Second   int                `json:"second"`
	Acquired int64              `json:"acquired"`
	Waits    *latency.Histogram `json:"waits"`    // one sample per acquisition
	Attempts int64              `json:"attempts"` // acquire script runs (rlock.Options.OnAttempt)
	Errors   int64              `json:"errors"`
	Overlaps int64              `json:"overlaps"` // in-process exclusion failures
	LastErr  string             `json:"last_error,omitempty"`
	// Metrics, in the last report, is what its metrics say at the end.
	Metrics *metricsSummary `json:"metrics,omitempty"`
}

// seconds is the number of reports per worker in a phase of length dur.
func seconds(dur time.Duration) int {
	return int((dur + time.Second - 1) / time.Second)
}

func workerMain() int {
	// The parent owns our lifetime: a terminal's Ctrl-C reaches the whole
	// process group, but only the parent decides, and kills us if need be.
	signal.Ignore(os.Interrupt)
	var p workerParams
	if err := childproc.Params(&p); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if err := work(p); err != nil {
		fmt.Fprintf(os.Stderr, "worker %d: %v\n", p.ID, err)
		return 1
	}
	return 0
}

func work(p workerParams) error {
	// The parent holds our stdin open: EOF means it is gone, however it
	// died, and we stop rather than linger as an orphan.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()

	var st stats
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{p.Addr}, DisableCache: true})
	if err != nil {
		return err
	}
	defer rc.Close()
	metrics, err := startMetrics(p.Metrics)
	if err != nil {
		return err
	}
	defer metrics.Close()
	c, err := rlock.NewClient(rc, rlock.Options{OnAttempt: func(string, bool) { st.attempts.Add(1) },
		MeterProvider: metrics.Provider, ClientName: fmt.Sprintf("latchkey-demo worker %d", p.ID)})
	if err != nil {
		return err
	}
	defer c.Close()
	newMutex := c.Mutex
	if p.Mode == "spin" {
		newMutex = c.SpinMutex
	}
	// Fail before the barrier on what would fail every Lock (a bad name).
	if _, err := newMutex(p.Lock).IsLocked(ctx); err != nil {
		return err
	}

	if err := rc.Do(ctx, rc.B().Rpush().Key(readyKey).Element(metrics.URL).Build()).Error(); err != nil {
		return fmt.Errorf("reporting ready: %w", err)
	}
	v, err := rc.Do(ctx, rc.B().Blpop().Key(goKey).Timeout(60).Build()).AsStrSlice()
	if err == nil && len(v) != 2 {
		err = fmt.Errorf("unexpected BLPOP reply %q", v)
	}
	if err != nil {
		return fmt.Errorf("waiting at the barrier: %w", err)
	}
	ns, err := strconv.ParseInt(v[1], 10, 64)
	if err != nil {
		return fmt.Errorf("bad start time %q: %w", v[1], err)
	}
	start := time.Unix(0, ns)

	// run bounds the waits only; critical sections use ctx so that one
	// under way at the end still completes its increment.
	run, stop := context.WithDeadline(ctx, start.Add(p.Dur))
	defer stop()
	var inside atomic.Int32
	var wg sync.WaitGroup
	for range p.Goroutines {
		wg.Go(func() { hammer(ctx, run, rc, newMutex(p.Lock), p.CS, &st, &inside) })
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()

	enc := json.NewEncoder(os.Stdout)
	n := seconds(p.Dur)
	for k := 1; k <= n; k++ {
		if k < n {
			t := time.NewTimer(time.Until(start.Add(time.Duration(k) * time.Second)))
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				<-done
				return errors.New("parent gone")
			}
		} else {
			<-done
		}
		r := st.take(p.ID, k)
		if k == n {
			s, err := metrics.Summary()
			if err != nil {
				return fmt.Errorf("reading its metrics: %w", err)
			}
			r.Metrics = &s
		}
		if err := enc.Encode(r); err != nil {
			cancel()
			<-done
			return err
		}
	}
	return nil
}

// hammer is one goroutine's loop: take the lock, do a deliberately unsafe
// read-modify-write of the counter, hold for cs, release. Each Lock is a
// new owner whatever the handle (it re-enters only with a context that
// carries a hold), so the goroutines exclude one another; each has a
// handle of its own all the same.
func hammer(ctx, run context.Context, rc rueidis.Client, m *rlock.Mutex, cs time.Duration, st *stats, inside *atomic.Int32) {
	for run.Err() == nil {
		t0 := time.Now()
		lctx, err := m.Lock(run)
		if err != nil {
			if run.Err() == nil { // a real error, not the end of the phase
				st.fail(err)
				time.Sleep(10 * time.Millisecond) // no hot loop on a persistent error
			} else {
				st.cutOff(time.Since(t0))
			}
			continue
		}
		wait := time.Since(t0)
		if inside.Add(1) != 1 {
			st.overlaps.Add(1)
		}
		err = increment(ctx, rc)
		time.Sleep(cs)
		// lctx also ends with run (it derives from it); only a loss matters.
		if cause := context.Cause(lctx); errors.Is(cause, rlock.ErrLockLost) {
			err = errors.Join(err, cause)
		}
		inside.Add(-1)
		if uerr := m.Unlock(lctx); uerr != nil {
			st.fail(uerr)
		}
		if err != nil {
			st.fail(err)
		} else {
			st.acquired(wait)
		}
	}
}

// increment is GET then SET n+1: correct only if no one else runs it at the
// same time, so lost increments reveal overlapping holders.
func increment(ctx context.Context, rc rueidis.Client) error {
	n, err := rc.Do(ctx, rc.B().Get().Key(counterKey).Build()).AsInt64()
	if rueidis.IsRedisNil(err) {
		n, err = 0, nil
	}
	if err != nil {
		return err
	}
	return rc.Do(ctx, rc.B().Set().Key(counterKey).Value(strconv.FormatInt(n+1, 10)).Build()).Error()
}

// stats accumulates one worker's activity until the next report takes it.
type stats struct {
	attempts atomic.Int64 // bumped by the OnAttempt hook, which must be fast
	overlaps atomic.Int64

	mu sync.Mutex
	// waits has a sample per acquisition and one per Lock the phase's end
	// cut off (its wait so far), so that a starved waiter shows in the
	// tail; nil until the first sample of the second.
	waits   *latency.Histogram
	count   int64 // acquisitions
	errors  int64
	lastErr string
}

func (s *stats) acquired(wait time.Duration) {
	s.mu.Lock()
	s.count++
	s.record(wait)
	s.mu.Unlock()
}

// cutOff records the wait of a Lock that the end of the phase ended.
func (s *stats) cutOff(wait time.Duration) {
	s.mu.Lock()
	s.record(wait)
	s.mu.Unlock()
}

func (s *stats) record(wait time.Duration) {
	if s.waits == nil {
		s.waits = new(latency.Histogram)
	}
	s.waits.Record(wait)
}

func (s *stats) fail(err error) {
	s.mu.Lock()
	s.errors++
	s.lastErr = err.Error()
	s.mu.Unlock()
}

func (s *stats) take(worker, second int) report {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := report{Worker: worker, Second: second, Acquired: s.count, Waits: s.waits,
		Errors: s.errors, LastErr: s.lastErr, Attempts: s.attempts.Swap(0), Overlaps: s.overlaps.Swap(0)}
	s.waits, s.count, s.errors, s.lastErr = nil, 0, 0, ""
	return r
}
