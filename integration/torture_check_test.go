package integration

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/latchkey/latchkey/watchdog"
)

// The torture run's judge. Workers check what they can where it happens and
// report every failed check as a "bad" event; holds, waits and faults are
// reported too. After the run, each anomaly is held against the faults:
//
//   - exclusion: a section that finds another hold's marker inside, a claim
//     or write the fence turns away, is allowed only if one of the two holds
//     saw ErrLockLost, ran past its fixed lease, or was live while a fault
//     that reaches it (below) was in force. A lost update (the counter below
//     the increments the store acknowledged) is never allowed: fencing
//     tokens are unique per grant, so only two owners sharing a grant lose
//     one, whatever the faults.
//   - hold count: HoldCount (and Token, and an Unlock of a held level) must
//     agree with the owner's levels while the hold's context is live, with
//     the same excuses.
//   - lost: a hold's context may end with ErrLockLost only after its fixed
//     lease ran out, or while a fault reached it.
//   - wait-free: no waiter waits longer than tortureWaitFreeBound while
//     nobody holds its lock, unless a fault reached the waiter's client
//     shortly before or during that stretch.
//   - reentry: a re-entry returns within tortureReentryBound and succeeds
//     while its hold is live.
//   - unlock: an Unlock with a context that carries no hold, or a second
//     Unlock of a released level, returns ErrNotHeld and changes nothing.
//   - quiescence: after the run nothing but fencing counters is left under
//     the prefix, no channel, and no goroutine in any process.
//
// A fault reaches a hold or a waiter when it overlaps its interval (with
// tortureSlack either side) and: CLIENT KILL, any (it hits every client);
// ForceUnlock, of its lock; delay, if its client is behind the proxy;
// Client.Close, of its client. A slow re-entry, an error or a waiter's free
// stretch must moreover end soon after the fault does (tortureRecovery, or
// a lease for a waiter), so that a long stall is not excused by a fault
// that merely happened during it.

const (
	// tortureSlack covers the clocks of different processes (one machine:
	// only scheduling) and a request's flight around an event.
	tortureSlack = int64(50 * time.Millisecond)
	// tortureWaitLookback: a kill shortly before a release can still cost
	// its wake-up, while the waiter's connection is being re-established.
	tortureWaitLookback = int64(250 * time.Millisecond)
	// tortureRecovery is how long after a fault ends an error or a slow
	// re-entry it caused may still show: a reconnection, retries with
	// backoff, a few round trips.
	tortureRecovery = time.Second
)

// violation is an invariant broken with no injected fault to explain it.
type violation struct {
	inv  string
	lock int // -1: not one lock's
	at   int64
	msg  string
}

type judge struct {
	holds  map[string]*tortureEvent
	faults []*tortureEvent // evFault and evClose
	vs     []violation
}

// judgeTorture checks a run's history; finals are the counters' values at
// end.
func judgeTorture(evs []tortureEvent, finals []int, end int64) []violation {
	j := &judge{holds: map[string]*tortureEvent{}}
	var waits, bads []*tortureEvent
	acked, unsure := make([]int, len(finals)), make([]int, len(finals))
	for i := range evs {
		ev := &evs[i]
		switch ev.Kind {
		case evHold:
			j.holds[ev.Hold] = ev
		case evFault, evClose:
			j.faults = append(j.faults, ev)
		case evWait:
			waits = append(waits, ev)
		case evBad:
			bads = append(bads, ev)
		case evSum:
			acked[ev.Lock] += ev.Acked
			unsure[ev.Lock] += ev.Unsure
		}
	}
	for _, h := range j.holds {
		j.checkLost(h)
	}
	for _, b := range bads {
		j.checkBad(b)
	}
	j.checkWaits(waits)
	for i, v := range finals {
		switch {
		case v < acked[i]:
			j.add(invExclusion, i, end, "the counter ends at %d, below the %d increments the store acknowledged: %d update(s) lost", v, acked[i], acked[i]-v)
		case v > acked[i]+unsure[i]:
			j.add(invExclusion, i, end, "the counter ends at %d, above the %d acknowledged and %d unknown increments", v, acked[i], unsure[i])
		}
	}
	slices.SortStableFunc(j.vs, func(a, b violation) int { return cmp.Compare(a.at, b.at) })
	return j.vs
}

func (j *judge) add(inv string, lock int, at int64, format string, args ...any) {
	j.vs = append(j.vs, violation{inv: inv, lock: lock, at: at, msg: fmt.Sprintf(format, args...)})
}

// explained returns a fault that reaches client (behind the proxy or not)
// on lock and can explain an anomaly over [from, to]: it was in force during
// it, and the anomaly ended within recovery of the fault's end (a killed
// connection, say, costs a reconnection, not a minute).
func (j *judge) explained(client string, proxy bool, lock int, from, to int64, recovery time.Duration) *tortureEvent {
	for _, f := range j.faults {
		if f.From-tortureSlack > to || f.To+tortureSlack < from || to > f.To+int64(recovery) {
			continue
		}
		switch {
		case f.Kind == evClose && f.Client != client,
			f.Fault == faultForce && f.Lock != lock,
			f.Fault == faultDelay && !proxy:
			continue
		}
		return f
	}
	return nil
}

// excuse says why hold h may misbehave at at, or "" if nothing does: its
// fixed lease had run out (see leaseEnd), a fault reached it between its
// grant and at,
// or it was told it lost the lock (whether rightly is checkLost's business).
func (j *judge) excuse(h *tortureEvent, at int64) string {
	if h == nil {
		return ""
	}
	if h.Lease > 0 && at >= leaseEnd(h) {
		return fmt.Sprintf("%s's lease of %v had run out", h.Hold, leaseName(h.Lease))
	}
	if f := j.explained(h.Client, h.Proxy, h.Lock, h.Got, at, sinceGrant(h, at)); f != nil {
		return fmt.Sprintf("%s %s reached %s", f.Kind, f.Fault, h.Hold)
	}
	if h.LostAt != 0 {
		return h.Hold + " was told it lost the lock"
	}
	return ""
}

// sinceGrant is how long after a fault's end an anomaly of h at at may
// come: whatever happens to h from its grant on, where the grant is dated
// tortureSlack before h.Got. The grant ran in Redis before its reply reached
// h's process, so a ForceUnlock whose reply reached the controller a moment
// before h's Lock returned may still have deleted h's fresh hold.
func sinceGrant(h *tortureEvent, at int64) time.Duration {
	return time.Duration(at - h.Got + tortureSlack)
}

// leaseEnd is the earliest a fixed lease can end for its holder: its local
// deadline runs from when the acquire was sent (no earlier than the Lock
// call), less the drift margin. No slack: the server's expiry, and so any
// other holder's grant, comes later still.
func leaseEnd(h *tortureEvent) int64 {
	return h.From + int64(h.Lease-watchdog.DriftMargin(h.Lease))
}

func (j *judge) checkLost(h *tortureEvent) {
	if h.LostAt == 0 {
		return
	}
	if h.Lease > 0 && h.LostAt >= leaseEnd(h) {
		return // the fixed lease ran out
	}
	if j.explained(h.Client, h.Proxy, h.Lock, h.Got, h.LostAt, sinceGrant(h, h.LostAt)) != nil {
		return
	}
	j.add(invLost, h.Lock, h.LostAt, "%s (client %s, lease %s) lost %v after Lock returned, with no fault injected: %s",
		h.Hold, h.Client, leaseName(h.Lease), time.Duration(h.LostAt-h.Got).Round(time.Millisecond), h.Note)
}

func (j *judge) checkBad(b *tortureEvent) {
	what := b.Note
	if b.Hold != "" {
		what = b.Hold + ": " + what
	}
	if len(b.Others) > 0 {
		what += " (" + strings.Join(b.Others, ", ") + ")"
	}
	h := j.holds[b.Hold]
	client, proxy := b.Client, b.Proxy
	if h != nil {
		client, proxy = h.Client, h.Proxy
	}
	switch {
	case b.Hard:
	case b.Inv == invReentry:
		// Judged over the re-entry call, not the whole hold.
		if j.explained(client, proxy, b.Lock, b.From, b.To, tortureRecovery) != nil {
			return
		}
	case b.Inv == invError:
		// A killed connection fails the next command sent on it, whenever
		// that comes (a Cluster client has one per node, idle for a while
		// maybe): a connection error is excused by any kill before it.
		// Others must come within tortureRecovery of a fault.
		if j.explained(client, proxy, b.Lock, b.From-int64(tortureRecovery), max(b.To, b.From), tortureRecovery) != nil ||
			j.excuse(h, b.From) != "" || (connectionLost(b.Note) && j.killedBefore(b.From)) {
			return
		}
	default:
		if j.excuse(h, b.From) != "" {
			return
		}
		for _, o := range b.Others {
			if j.excuse(j.holds[o[:strings.LastIndexByte(o, '/')]], b.From) != "" {
				return
			}
		}
	}
	j.add(b.Inv, b.Lock, b.From, "%s", what)
}

// connectionLost reports whether an error message says the connection
// dropped under the request.
func connectionLost(msg string) bool {
	for _, s := range []string{"EOF", "connection reset", "broken pipe", "use of closed network connection"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

func (j *judge) killedBefore(at int64) bool {
	for _, f := range j.faults {
		if (f.Fault == faultKillNormal || f.Fault == faultKillPubSub) && f.From <= at {
			return true
		}
	}
	return false
}

// checkWaits finds waiters that waited while nobody held their lock. The
// lock counts as held from tortureSlack before a Lock returned (the grant
// happened a round trip earlier) to the return of the last Unlock (a lease
// later if that Unlock failed), or until a fixed lease ran out, counted from
// the return of the last Lock or re-entry (which may have renewed it): an
// over-estimate, so a free stretch found is really free.
func (j *judge) checkWaits(waits []*tortureEvent) {
	held := map[int][][2]int64{}
	for _, h := range j.holds {
		end := h.To
		switch {
		case h.ReleaseFailed:
			end += int64(max(h.Lease, tortureWatchdog))
		case h.Lease > 0:
			end = min(end, max(h.Got, h.Last)+int64(h.Lease)+tortureSlack)
		}
		held[h.Lock] = append(held[h.Lock], [2]int64{h.Got - tortureSlack, end})
	}
	for lock, spans := range held {
		held[lock] = mergeSpans(spans)
	}
	for _, w := range waits {
		from, to := longestFree(held[w.Lock], w.From, w.To)
		if to-from <= int64(tortureWaitFreeBound) {
			continue
		}
		// A wake-up lost to a fault costs up to the holder's remaining
		// lease: the waiter sleeps until then. The fault must come before
		// the free stretch begins (the release whose wake-up it lost) and
		// the stretch end within a lease of it: a kill in the middle of a
		// stretch explains nothing (its resubscription wakes waiters up).
		if j.explained(w.Client, w.Proxy, w.Lock, from-tortureWaitLookback, from, tortureWatchdog-time.Duration(to-from)) != nil {
			continue
		}
		j.add(invWaitFree, w.Lock, from, "%s (client %s) waited %v while nobody held the lock (the bound is %v); its %v wait ended %s%s",
			w.Who, w.Client, time.Duration(to-from).Round(time.Millisecond), tortureWaitFreeBound,
			time.Duration(w.To-w.From).Round(time.Millisecond), w.Note, j.ghosts(w.Lock, from, to))
	}
}

// ghosts names the fencing tokens granted between the holds around a free
// stretch that no hold reported: an acquisition nobody knows of (or one
// whose outcome was unknown and was undone) held the lock meanwhile.
func (j *judge) ghosts(lock int, from, to int64) string {
	var before, after int64
	for _, h := range j.holds {
		switch {
		case h.Lock != lock || h.Token == 0:
		case h.Got <= from:
			before = max(before, h.Token)
		case h.Got >= to && (after == 0 || h.Token < after):
			after = h.Token
		}
	}
	if before == 0 || after <= before+1 {
		return ""
	}
	return fmt.Sprintf("; fencing token(s) %d..%d, granted in between, belong to no reported hold", before+1, after-1)
}

// mergeSpans sorts spans and merges those that overlap.
func mergeSpans(spans [][2]int64) [][2]int64 {
	slices.SortFunc(spans, func(a, b [2]int64) int { return cmp.Compare(a[0], b[0]) })
	var out [][2]int64
	for _, s := range spans {
		if n := len(out); n > 0 && s[0] <= out[n-1][1] {
			out[n-1][1] = max(out[n-1][1], s[1])
			continue
		}
		out = append(out, s)
	}
	return out
}

// longestFree is the longest stretch of [from, to] outside the merged spans.
func longestFree(spans [][2]int64, from, to int64) (int64, int64) {
	best, cur := [2]int64{from, from}, from
	consider := func(end int64) {
		if end-cur > best[1]-best[0] {
			best = [2]int64{cur, end}
		}
	}
	for _, s := range spans {
		if s[1] <= cur {
			continue
		}
		if s[0] >= to {
			break
		}
		consider(min(s[0], to))
		cur = max(cur, s[1])
	}
	if cur < to {
		consider(to)
	}
	return best[0], best[1]
}

func leaseName(d time.Duration) string {
	if d == 0 {
		return "watchdog"
	}
	return d.Round(time.Millisecond).String()
}

// reportTorture fails the test with the violations, a few of each
// invariant with the history of the offending lock around them, and the
// seed.
func reportTorture(t *testing.T, run tortureRun, start time.Time, evs []tortureEvent, vs []violation) {
	t.Helper()
	if len(vs) == 0 {
		return
	}
	const perInvariant = 3
	shown, counts := map[string]int{}, map[string]int{}
	for _, v := range vs {
		counts[v.inv]++
		if shown[v.inv] == perInvariant {
			continue
		}
		shown[v.inv]++
		var b strings.Builder
		fmt.Fprintf(&b, "[%s] %s: %s", v.inv, relTime(start, v.at), v.msg)
		if v.lock >= 0 {
			fmt.Fprintf(&b, "\n  history of lock %d around it:\n%s", v.lock, historyAround(evs, v.lock, v.at, start))
		}
		t.Error(b.String())
	}
	var summary []string
	for inv, n := range counts {
		summary = append(summary, fmt.Sprintf("%s: %d", inv, n))
	}
	slices.Sort(summary)
	t.Errorf("torture: %d violation(s) (%s); seed %d, replay with TORTURE_SEED=%d (compat=%v, %v per topology)",
		len(vs), strings.Join(summary, ", "), run.seed, run.seed, run.compat, run.dur)
}

func relTime(start time.Time, ns int64) string {
	return fmt.Sprintf("%+.3fs", time.Duration(ns-start.UnixNano()).Seconds())
}

// historyAround lists lock's events (and the faults that reach every lock)
// from 1.5 s before at to 0.5 s after, at most the 40 closest.
func historyAround(evs []tortureEvent, lock int, at int64, start time.Time) string {
	from, to := at-int64(1500*time.Millisecond), at+int64(500*time.Millisecond)
	var sel []tortureEvent
	for _, ev := range evs {
		if (ev.Lock == lock || ev.Lock == -1) && ev.Kind != evSum && ev.From <= to && max(ev.To, ev.From) >= from {
			sel = append(sel, ev)
		}
	}
	dist := func(ev tortureEvent) int64 { return max(ev.From-at, at-max(ev.To, ev.From), 0) }
	slices.SortStableFunc(sel, func(a, b tortureEvent) int { return cmp.Compare(dist(a), dist(b)) })
	sel = sel[:min(len(sel), 40)]
	slices.SortStableFunc(sel, func(a, b tortureEvent) int { return cmp.Compare(a.From, b.From) })
	var b strings.Builder
	for _, ev := range sel {
		b.WriteString("    " + formatEvent(ev, start) + "\n")
	}
	return b.String()
}

func formatEvent(ev tortureEvent, start time.Time) string {
	span := relTime(start, ev.From)
	if ev.To != 0 {
		span += ".." + relTime(start, ev.To)
	}
	switch ev.Kind {
	case evHold:
		s := fmt.Sprintf("%s hold %s client=%s tok=%d lease=%s got=%s", span, ev.Hold, ev.Client, ev.Token, leaseName(ev.Lease), relTime(start, ev.Got))
		if ev.LostAt != 0 {
			s += fmt.Sprintf(" LOST %s (%s)", relTime(start, ev.LostAt), ev.Note)
		}
		if ev.ReleaseFailed {
			s += " release-failed"
		}
		return s
	case evWait:
		return fmt.Sprintf("%s wait %s client=%s: %s %s", span, ev.Who, ev.Client, ev.Note, ev.Hold)
	case evFault:
		return fmt.Sprintf("%s FAULT %s (%s)", span, ev.Fault, ev.Note)
	case evClose:
		return fmt.Sprintf("%s close client %s", span, ev.Client)
	case evBad:
		return fmt.Sprintf("%s bad [%s] %s %s %v", span, ev.Inv, ev.Hold, ev.Note, ev.Others)
	}
	return fmt.Sprintf("%s %s %+v", span, ev.Kind, ev)
}
