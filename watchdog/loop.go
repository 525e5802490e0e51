package watchdog

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/latchkey/latchkey/internal/luascripts"
)

// A tick's renew calls go out in chunks of chunkCalls calls, at most
// chunkParallel chunks awaiting their first replies at once across all
// ticks, each applied as soon as its replies are in: with 1,000,000 leases
// a tick is 10,000 calls, and waiting for all of them before counting any
// let a slow server turn into mass loss (issue 21). The bound keeps a later
// tick's calls from queueing in Redis ahead of an earlier tick's, whose
// leases are due sooner.
const (
	chunkCalls    = 64
	chunkParallel = 4
)

func (w *Watchdog) loop() {
	defer close(w.done)
	// Runs before close(done): the ticks' contexts end with w.ctx.
	defer w.ticks.Wait()
	ticker := time.NewTicker(w.opts.Interval)
	defer ticker.Stop()
	// expiry fires at the earliest local deadline when that comes before the
	// next tick: while renewals are failing or still out, or for an entry
	// added with a deadline already near (an acquire whose reply came late).
	expiry := time.NewTimer(time.Hour)
	defer expiry.Stop()
	// retry renews again soon after a tick in which a renewal failed: one
	// dropped connection must not cost a lease while a new one can still
	// renew it in time.
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	backoff := luascripts.Backoff{Min: retryMin, Max: w.opts.Interval}
	w.refreshMasters(time.Now()) // for the first tick's renewals
	for {
		renew, all := false, false
		select {
		case <-w.ctx.Done():
			return
		case <-ticker.C:
			renew, all = true, true
		case <-retry.C:
			renew = true
		case <-expiry.C:
		case <-w.added:
		case failed := <-w.tickEnded:
			if failed {
				retry.Reset(backoff.Next())
			} else {
				backoff.Reset()
			}
			// Renewals only move deadlines out: the expiry timer stands,
			// and a scan of every entry per tick's end would be waste.
			continue
		case gone := <-w.gone:
			causes := make([]error, len(gone))
			for i := range gone {
				causes[i] = ErrGone
			}
			w.loseAll(gone, causes)
			continue
		}
		// Expired entries go first, so that a tick does not renew them.
		now := time.Now()
		next := w.expire(now)
		if renew {
			retry.Stop()
			w.refreshMasters(now)
			w.startTick(all)
		}
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
	// Earliest deadline first: in a mass loss (Redis gone), the holders
	// whose leases end first in Redis hear first.
	slices.SortFunc(dead, func(a, b *Entry) int { return a.deadline.Compare(b.deadline) })
	w.mu.Unlock()
	var lost []*Entry
	var causes []error
	for _, e := range dead {
		w.mu.Lock()
		last := e.lastErr
		// A renewal whose reply came before the deadline may have been
		// applied since the scan: it counts.
		renewed := now.Before(e.deadline)
		w.mu.Unlock()
		switch {
		case renewed:
			continue
		case errors.As(last, new(*luascripts.NotReplicatedError)):
			// Wrapped, so that the holder can tell renewals the replicas
			// did not acknowledge; other errors are only told (a renewal's
			// own timeout must not match the holder's context.DeadlineExceeded).
			causes = append(causes, fmt.Errorf("%w (last error: %w)", ErrExpired, last))
		case last != nil:
			causes = append(causes, fmt.Errorf("%w (last error: %v)", ErrExpired, last))
		default:
			causes = append(causes, ErrExpired)
		}
		lost = append(lost, e)
	}
	w.loseAll(lost, causes)
	return earliest
}

// startTick sends a renewal of every kept lease that is due (see due) and
// whose last one is not still out, on a goroutine of its own: the loop
// stays free to give leases up at their deadlines while the calls are out.
// A regular tick (all) sends its calls after the regular tick before it has
// sent its own: each takes only leases not already waiting, which are due
// later than those the earlier tick still has to send, so that together
// they go out earliest deadline first. A retry goes at once.
func (w *Watchdog) startTick(all bool) {
	start := time.Now()
	w.mu.Lock()
	todo := make([]due, 0, len(w.entries))
	for e := range w.entries {
		switch {
		case e.inflight:
			e.missed = true
		case w.due(e, start):
			e.inflight = true
			todo = append(todo, due{e.deadline, e})
		}
	}
	var order tickOrder
	if all && len(todo) > 0 {
		order = tickOrder{after: w.dispatched, sent: make(chan struct{})}
		w.dispatched = order.sent
	}
	w.mu.Unlock()
	if len(todo) == 0 {
		return
	}
	w.ticks.Go(func() { w.tick(start, todo, order, false) })
}

// tickOrder puts a regular tick's sending after the one before: it waits
// for after to close before sending and closes sent once it has sent all
// its calls (nil channels: no order, as for retries and catch-ups).
type tickOrder struct {
	after, sent chan struct{}
}

// due reports whether e should be renewed at now: its last renewal is at
// least half an interval old, or its deadline comes within two intervals.
// A lease renewed while the previous tick was still sending, which happens
// when Redis gets through fewer leases an interval than are kept, is left
// to the next tick: a server slower than the interval then renews each
// lease about as often as it can get through all of them, earliest
// deadline first, instead of spending its time on leases renewed a moment
// before while others run out (issue 21, item 12). The second condition
// keeps every lease whose deadline the next tick might not reach in time:
// with the default Interval (Timeout/3) it never applies to a lease
// renewed half an interval ago, with a longer one it renews every lease at
// every tick. Retries and catch-ups use it too. The caller holds w.mu.
func (w *Watchdog) due(e *Entry, now time.Time) bool {
	return e.deadline.Before(now.Add(w.validity()-w.opts.Interval/2)) || e.deadline.Before(now.Add(2*w.opts.Interval))
}

// kept reports whether e is still registered (not stopped, not lost). The
// caller holds w.mu.
func (w *Watchdog) kept(e *Entry) bool {
	_, ok := w.entries[e]
	return ok
}

// due is a lease a tick renews, with its deadline when the tick began.
type due struct {
	deadline time.Time
	e        *Entry
}

// tickTotals are one tick's additions to Stats, added at its end so that
// Stats never shows part of a tick.
type tickTotals struct {
	calls, renewed, late, errors uint64
	failed                       bool
}

func (t *tickTotals) add(u tickTotals) {
	t.calls += u.calls
	t.renewed += u.renewed
	t.late += u.late
	t.errors += u.errors
	t.failed = t.failed || u.failed
}

// tick renews todo, earliest deadline first: leases that share a slot go
// into calls of up to BatchSize keys, sent in chunks (see chunkCalls), and
// it tells the loop when all are done whether a renewal failed (other than
// by finding its lease gone). A catch-up tick (renewals sent again at once
// because a tick passed while they were out) counts in Stats.CatchUps, not
// in Ticks and their durations.
func (w *Watchdog) tick(start time.Time, todo []due, order tickOrder, catchUp bool) {
	// In deadline order, a lease keeps its place from tick to tick, so
	// however long a tick takes, its renewals stay about an interval apart.
	slices.SortFunc(todo, func(a, b due) int { return a.deadline.Compare(b.deadline) })
	batches := w.batches(todo)
	var (
		mu     sync.Mutex
		totals tickTotals
		wg     sync.WaitGroup
	)
	if order.after != nil {
		select {
		case <-order.after:
		case <-w.ctx.Done():
		}
	}
send:
	for len(batches) > 0 {
		select {
		case w.sending <- struct{}{}:
		case <-w.ctx.Done():
			break send
		}
		n := min(len(batches), chunkCalls)
		chunk := batches[:n:n]
		batches = batches[n:]
		wg.Go(func() {
			release := sync.OnceFunc(func() { <-w.sending })
			defer release()
			t := w.renewChunk(chunk, release)
			mu.Lock()
			defer mu.Unlock()
			totals.add(t)
		})
	}
	if order.sent != nil {
		close(order.sent) // the next regular tick may send
	}
	wg.Wait()

	took := time.Since(start)
	w.mu.Lock()
	if catchUp {
		w.stats.CatchUps++
	} else {
		w.stats.Ticks++
		w.stats.LastTick = took
		w.stats.MaxTick = max(w.stats.MaxTick, took)
	}
	w.stats.Calls += totals.calls
	w.stats.Renewed += totals.renewed
	w.stats.Late += totals.late
	w.stats.Errors += totals.errors
	w.mu.Unlock()
	w.meters.recordTick(totals.renewed, totals.errors)
	select {
	case w.tickEnded <- totals.failed:
	case <-w.ctx.Done():
	}
}

// batches splits todo into the entries of each renew call, keeping its
// order: by slot on a Cluster (elsewhere every slot is 0), at most
// BatchSize a call. A call goes out when it is full, so that calls come in
// the order of their first lease.
func (w *Watchdog) batches(todo []due) [][]*Entry {
	out := make([][]*Entry, 0, len(todo)/w.opts.BatchSize+1)
	cluster := w.client.Mode() == rueidis.ClientModeCluster
	open := make(map[uint16]int) // slot -> its call being filled in out
	for _, d := range todo {
		var slot uint16
		if cluster {
			slot = d.e.slot
		}
		i, ok := open[slot]
		if !ok {
			i = len(out)
			open[slot] = i
			out = append(out, make([]*Entry, 0, min(w.opts.BatchSize, len(todo))))
		}
		out[i] = append(out[i], d.e)
		if len(out[i]) == w.opts.BatchSize {
			delete(open, slot)
		}
	}
	return out
}

// renewChunk runs one chunk's renew calls and applies their results, as
// requests of their own per group (see groups): each group counts as its
// replies come in, so that on a Cluster a master that stops answering
// holds back only its own leases. release runs once the first group's
// replies are applied: the chunk has then reached Redis, and a master that
// holds the rest must not keep later chunks from going to the others.
func (w *Watchdog) renewChunk(chunk [][]*Entry, release func()) (t tickTotals) {
	lease := luascripts.Millis(w.opts.Timeout)
	calls := make([]luascripts.Call, len(chunk))
	for i, batch := range chunk {
		n := len(batch)
		for _, e := range batch {
			n += len(e.follow)
		}
		calls[i] = luascripts.Call{Keys: make([]string, 0, n), Args: make([]string, 0, n+1)}
		calls[i].Args = append(calls[i].Args, lease)
		for _, e := range batch {
			calls[i].AppendRenew(e.owner, e.key, e.follow...)
		}
	}
	for _, call := range calls {
		w.meters.recordBatch(len(call.Keys))
	}
	groups := w.groups(chunk)
	if groups == nil {
		// One server or master answers them all (or the slot map is not
		// read yet): one pipelined request, no goroutine.
		t = w.renewGroup(chunk, calls)
		release()
		return t
	}
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	for _, g := range groups {
		wg.Go(func() {
			batches := make([][]*Entry, len(g))
			sub := make([]luascripts.Call, len(g))
			for j, i := range g {
				batches[j], sub[j] = chunk[i], calls[i]
			}
			gt := w.renewGroup(batches, sub)
			release()
			mu.Lock()
			defer mu.Unlock()
			t.add(gt)
		})
	}
	wg.Wait()
	return t
}

// groups splits a chunk's calls (by index) into the requests that go out on
// their own, nil when one request takes them all: on a Cluster, the calls
// of each master (see masters; with SyncReplicas each request's WAIT
// follows its calls on that master's connection). Until the slot map has
// been read, and elsewhere, one request takes them all.
func (w *Watchdog) groups(chunk [][]*Entry) [][]int {
	of := w.masters.of.Load()
	if of == nil || len(chunk) == 1 {
		return nil
	}
	var out [][]int
	at := make(map[int32]int, 4) // master -> its group in out
	for i, batch := range chunk {
		m := of[batch[0].slot]
		k, ok := at[m]
		if !ok {
			k = len(out)
			at[m] = k
			out = append(out, nil)
		}
		out[k] = append(out[k], i)
	}
	if len(out) == 1 {
		return nil
	}
	return out
}

// renewGroup sends one request's renew calls, batches[i]'s in calls[i], and
// applies their results. A lease counts as renewed when its reply came
// before its local deadline, however long the call took: the new deadline
// runs from the send time, which is no later than Redis ran it. A call of
// several leases that a half-moved slot refused goes again as one call per
// lease (see splitRefused).
func (w *Watchdog) renewGroup(batches [][]*Entry, calls []luascripts.Call) (t tickTotals) {
	var latest time.Time
	w.mu.Lock()
	for _, batch := range batches {
		for _, e := range batch {
			if e.deadline.After(latest) {
				latest = e.deadline
			}
		}
	}
	w.mu.Unlock()

	// A reply is of use until the group's latest deadline, not only its
	// earliest: the loop gives each lease up at its own deadline meanwhile.
	ctx, cancel := context.WithDeadline(w.ctx, latest)
	sent := time.Now()
	results, acks := luascripts.Renew.ExecMultiSync(ctx, w.client, calls, w.sync)
	t.calls = uint64(len(calls))
	// The leases sent again keep the first send time: still no later than
	// Redis ran them.
	batches, calls, results, acks, resent := w.splitRefused(ctx, batches, calls, results, acks)
	t.calls += uint64(resent)
	replied := time.Now()
	cancel()

	var gone []*Entry
	var again []due
	var failures []failure
	w.mu.Lock()
	for i, r := range results {
		batch := batches[i]
		held, err := parseRenew(r, len(calls[i].Keys))
		if err != nil {
			t.failed = true
			t.errors++
			failures = append(failures, failure{batch: batch, err: err})
		}
		// Renewed on the master only: a failover could lose it, so it
		// does not move the deadline. A lease found gone is gone all the
		// same: the WAIT does not make it held.
		var unacked error
		var unsynced []*Entry
		if err == nil && acks[i] != nil {
			unacked = fmt.Errorf("renewal not replicated: %w", acks[i])
		}
		k := 0 // e.key's place in the call
		for _, e := range batch {
			e.inflight = false
			missed := e.missed
			e.missed = false
			switch {
			case err != nil:
				e.lastErr = err
			case !held[k]:
				gone = append(gone, e)
			case unacked != nil:
				e.lastErr = unacked
				unsynced = append(unsynced, e)
			case !replied.Before(e.deadline):
				// Renewed, but too late to count: the loop gives the
				// lease up at its deadline, which has passed.
				t.late++
			default:
				t.renewed++
				e.deadline = sent.Add(w.validity())
				e.lastErr = nil
			}
			if missed && (err != nil || held[k]) && replied.Before(e.deadline) && w.due(e, replied) && w.kept(e) {
				// A tick passed while this renewal was out: the next one
				// goes now, or a slow server would make every other tick
				// miss the lease.
				e.inflight = true
				again = append(again, due{e.deadline, e})
			}
			k += 1 + len(e.follow)
		}
		if len(unsynced) > 0 {
			t.failed = true
			t.errors++
			failures = append(failures, failure{batch: unsynced, err: unacked})
		}
	}
	w.mu.Unlock()
	// Logged outside w.mu: a handler may do I/O.
	if l := w.opts.Logger; l != nil {
		for _, f := range failures {
			l.Warn("latchkey: renewal failed; retrying", "keys", len(f.batch), "first_key", f.batch[0].key, "error", f.err)
		}
	}
	if len(again) > 0 {
		w.ticks.Go(func() { w.tick(time.Now(), again, tickOrder{}, true) })
	}
	if len(gone) > 0 {
		// onLost runs on the loop's goroutine, as every loss does.
		select {
		case w.gone <- gone:
		case <-w.ctx.Done():
		}
	}
	return t
}

// splitRefused sends again at once, in ctx, the leases of every call of
// more than one lease that Redis refused with TRYAGAIN, as one call per
// lease (its AppendRenew group), and returns batches, calls, results and
// acks with each such call replaced in place by those, and how many calls
// it sent.
//
// A renew call's keys must all be on one node. While their slot is
// half-migrated (MIGRATING on the old master, IMPORTING on the new one)
// and some of them have moved but not others, no node takes the call, and
// a reshard may take a long while to get to the rest of the slot's keys:
// sent whole tick after tick, it lost every lease in it (two locks of one
// slot, with 1,000 held locks a common collision). A lease of one key is
// never refused alone: the old master renews it while it has the key, and
// answers -ASK for a key it has moved, which rueidis (and execSynced)
// follows to the new one. A lease of several keys (a Semaphore permit's or
// an RWMutex reader's group, with its lease set) is still refused while
// only some of its own keys have moved: it fails and is retried as any
// failed renewal until the migration moves the rest of them, which it
// does in one MIGRATE when it gets to the lock's keys.
func (w *Watchdog) splitRefused(ctx context.Context, batches [][]*Entry, calls []luascripts.Call, results []rueidis.RedisResult, acks []error) ([][]*Entry, []luascripts.Call, []rueidis.RedisResult, []error, int) {
	refused := func(i int) bool { return len(batches[i]) > 1 && luascripts.IsTryAgain(results[i].Error()) }
	lease := luascripts.Millis(w.opts.Timeout)
	var one []luascripts.Call
	for i := range results {
		if !refused(i) {
			continue
		}
		for _, e := range batches[i] {
			call := luascripts.Call{Keys: make([]string, 0, 1+len(e.follow)), Args: make([]string, 0, 2+len(e.follow))}
			call.Args = append(call.Args, lease)
			call.AppendRenew(e.owner, e.key, e.follow...)
			w.meters.recordBatch(len(call.Keys))
			one = append(one, call)
		}
	}
	if len(one) == 0 {
		return batches, calls, results, acks, 0
	}
	oneResults, oneAcks := luascripts.Renew.ExecMultiSync(ctx, w.client, one, w.sync)

	size := len(results) + len(one)
	outBatches := make([][]*Entry, 0, size)
	outCalls := make([]luascripts.Call, 0, size)
	outResults := make([]rueidis.RedisResult, 0, size)
	outAcks := make([]error, 0, size)
	k := 0 // the next of one
	for i := range results {
		if !refused(i) {
			outBatches = append(outBatches, batches[i])
			outCalls = append(outCalls, calls[i])
			outResults = append(outResults, results[i])
			outAcks = append(outAcks, acks[i])
			continue
		}
		for _, e := range batches[i] {
			outBatches = append(outBatches, []*Entry{e})
			outCalls = append(outCalls, one[k])
			outResults = append(outResults, oneResults[k])
			outAcks = append(outAcks, oneAcks[k])
			k++
		}
	}
	return outBatches, outCalls, outResults, outAcks, len(one)
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
