package watchdog

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/rueidis"

	"github.com/latchkey/latchkey/internal/luascripts"
)

func (w *Watchdog) loop() {
	defer close(w.done)
	ticker := time.NewTicker(w.opts.Interval)
	defer ticker.Stop()
	// expiry fires at the earliest local deadline when that comes before the
	// next tick: while renewals are failing, or for an entry added with a
	// deadline already near (an acquire whose reply came late).
	expiry := time.NewTimer(time.Hour)
	defer expiry.Stop()
	// retry renews again soon after a tick in which a renewal failed: one
	// dropped connection must not cost a lease while a new one can still
	// renew it in time.
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	backoff := luascripts.Backoff{Min: retryMin, Max: w.opts.Interval}
	for {
		renew := false
		select {
		case <-w.ctx.Done():
			return
		case <-ticker.C:
			renew = true
		case <-retry.C:
			renew = true
		case <-expiry.C:
		case <-w.added:
		}
		if renew {
			retry.Stop()
			if w.tick() {
				retry.Reset(backoff.Next())
			} else {
				backoff.Reset()
			}
		}
		next := w.expire(time.Now())
		if next.IsZero() {
			next = time.Now().Add(time.Hour)
		}
		expiry.Reset(time.Until(next))
	}
}

// retryMin is the first pause before renewing again after a failure; it
// doubles up to the interval while failures go on.
const retryMin = 10 * time.Millisecond

// expire gives up every lease past its deadline and returns the earliest
// deadline still pending (zero when there is none), which it also records as
// armed: the loop sets its expiry timer to it.
func (w *Watchdog) expire(now time.Time) time.Time {
	var dead []*Entry
	var earliest time.Time
	w.mu.Lock()
	for e := range w.entries {
		switch {
		case !now.Before(e.deadline):
			dead = append(dead, e)
		case earliest.IsZero() || e.deadline.Before(earliest):
			earliest = e.deadline
		}
	}
	w.armed = earliest
	w.mu.Unlock()
	for _, e := range dead {
		w.mu.Lock()
		last := e.lastErr
		w.mu.Unlock()
		if last != nil {
			e.lose(fmt.Errorf("%w (last error: %v)", ErrExpired, last))
		} else {
			e.lose(ErrExpired)
		}
	}
	return earliest
}

// tick renews every kept lease in one pipelined burst. It reports whether
// a renewal failed (other than by finding its lease gone).
func (w *Watchdog) tick() (failed bool) {
	now := time.Now()
	earliest := w.expire(now)
	if earliest.IsZero() {
		return false
	}

	w.mu.Lock()
	bySlot := make(map[uint16][]*Entry)
	for e := range w.entries {
		bySlot[e.slot] = append(bySlot[e.slot], e)
	}
	w.mu.Unlock()

	var (
		calls   []luascripts.Call
		batches [][]*Entry
		lease   = luascripts.Millis(w.opts.Timeout)
	)
	for _, es := range bySlot {
		for len(es) > 0 {
			n := min(len(es), w.opts.BatchSize)
			batch := es[:n:n]
			es = es[n:]
			call := luascripts.Call{Keys: make([]string, 0, n), Args: make([]string, 0, n+1)}
			call.Args = append(call.Args, lease)
			for _, e := range batch {
				call.AppendRenew(e.owner, e.key, e.follow...)
			}
			calls = append(calls, call)
			batches = append(batches, batch)
			w.meters.recordBatch(len(call.Keys))
		}
	}

	// Come back by the earliest deadline at the latest, so that a renewal
	// stuck on a dead connection cannot delay the loss signal past it.
	ctx, cancel := context.WithDeadline(w.ctx, minTime(now.Add(w.opts.Interval), earliest))
	defer cancel()
	sent := time.Now()
	results, acks := luascripts.Renew.ExecMultiSync(ctx, w.client, calls, w.sync)

	var gone []*Entry
	var failures []failure
	w.mu.Lock()
	w.stats.Ticks++
	w.stats.Calls += uint64(len(calls))
	for i, r := range results {
		held, err := parseRenew(r, len(calls[i].Keys))
		if err == nil && acks[i] != nil {
			// Renewed on the master only: a failover could lose it, so it
			// does not move the deadline.
			err = fmt.Errorf("renewal not replicated: %w", acks[i])
		}
		if err != nil {
			failed = true
			w.stats.Errors++
			failures = append(failures, failure{batch: batches[i], err: err})
			for _, e := range batches[i] {
				e.lastErr = err
			}
			continue
		}
		k := 0 // e.key's place in the call
		for _, e := range batches[i] {
			ok := held[k]
			k += 1 + len(e.follow)
			if !ok {
				gone = append(gone, e)
				continue
			}
			w.stats.Renewed++
			e.deadline = sent.Add(w.validity())
			e.lastErr = nil
		}
	}
	w.mu.Unlock()
	// Logged outside w.mu: a handler may do I/O.
	if l := w.opts.Logger; l != nil {
		for _, f := range failures {
			l.Warn("latchkey: renewal failed; retrying", "keys", len(f.batch), "first_key", f.batch[0].key, "error", f.err)
		}
	}
	for _, e := range gone {
		e.lose(ErrGone)
	}
	return failed
}

// failure is a renew call that failed, for the log.
type failure struct {
	batch []*Entry
	err   error
}

func parseRenew(r rueidis.RedisResult, n int) ([]bool, error) {
	v, err := r.AsIntSlice()
	if err != nil {
		return nil, err
	}
	return luascripts.ParseRenew(v, n)
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
