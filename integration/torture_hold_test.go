package integration

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/latchkey/latchkey/rlock"
	"github.com/latchkey/latchkey/rlock/fenced"
)

// One hold of the torture workload, from the grant to the last Unlock: the
// critical sections and the checks made while holding.

// checker is a lock's critical-section instruments, on the store Redis
// (never the one faults are injected into): a fenced counter incremented by
// a deliberately non-atomic read-modify-write, and a marker set of the
// sections inside, which shows an overlap the moment it happens.
type checker struct {
	rc     rueidis.Client
	store  *fenced.Store
	marker string

	mu            sync.Mutex
	acked, unsure int
}

func tortureStoreName(prefix, lock string) string { return prefix + "-" + lock }

func tortureMarkerKey(prefix, lock string) string {
	return "torture:{" + tortureStoreName(prefix, lock) + "}:in"
}

func newChecker(rc rueidis.Client, prefix, lock string) *checker {
	return &checker{rc: rc, store: fenced.New(rc, tortureStoreName(prefix, lock), fenced.WithLogLimit(auditLogLimit)), marker: tortureMarkerKey(prefix, lock)}
}

// enterScript adds a section to the marker set and returns every member: any
// other than the caller's own hold means two holds are inside at once. The
// set expires so that a crashed worker cannot poison later runs.
var enterScript = rueidis.NewLuaScript(`redis.call('sadd', KEYS[1], ARGV[1])
redis.call('pexpire', KEYS[1], 60000)
return redis.call('smembers', KEYS[1])`)

// storeRetry runs a checker call until it gets an answer or tortureOpTimeout
// passes. The store Redis sees no faults, so retries are for a loaded machine.
func storeRetry(f func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), tortureOpTimeout)
	defer cancel()
	for {
		err := f(ctx)
		if err == nil || errors.Is(err, fenced.ErrStale) {
			return err
		}
		if ctx.Err() != nil {
			return err
		}
		select {
		case <-time.After(10 * time.Millisecond): // backoff before a retry
		case <-ctx.Done():
		}
	}
}

// holdState is the owner's own bookkeeping of one hold.
type holdState struct {
	ev     tortureEvent
	m      *rlock.Mutex
	levels []heldLevel
	ended  <-chan time.Time // when the outermost level's context ended
}

type heldLevel struct {
	ctx  context.Context
	stop context.CancelFunc // a re-entry's call timeout; nil for the grant
}

// session runs one hold: critical sections, re-entries, the Unlock checks,
// and the last Unlock, then reports the hold.
func (w *workerState) session(p plan, m *rlock.Mutex, ref clientRef, id string, lctx context.Context, opts []rlock.LockOption, call, got time.Time) {
	h := &holdState{m: m, levels: []heldLevel{{ctx: lctx}}, ended: whenDone(lctx)}
	h.ev = tortureEvent{Kind: evHold, Lock: p.lock, Who: w.who, Client: ref.id, Proxy: ref.proxy, Hold: id,
		From: call.UnixNano(), Got: got.UnixNano()}
	if p.useLease {
		h.ev.Lease = p.lease
	}
	tok, err := m.Token(lctx)
	if err != nil && lctx.Err() == nil {
		w.bad(invHoldCount, p.lock, id, false, time.Now(), "Token of a fresh hold: %v", err)
	}
	h.ev.Token = tok
	chk := w.checks[p.lock]

	if p.stray {
		w.strayUnlock(p, h)
	}
	if p.overrun {
		// Hold past the lease, writing regardless of the loss signal, as a
		// paused holder would: only the fence may stop that write.
		w.section(p, h, chk, p.lease+p.think+50*time.Millisecond, true)
	} else {
		w.section(p, h, chk, p.think, false)
	}
	w.checkCount(p, h)
	for i := 0; i < p.nested && h.top().Err() == nil; i++ {
		if !w.reenter(p, h, opts) {
			break
		}
		w.section(p, h, chk, p.think, false)
		w.checkCount(p, h)
	}
	if p.double && len(h.levels) > 1 {
		w.doubleUnlock(p, h, w.unlockTop(p, h))
	}
	for len(h.levels) > 0 {
		w.unlockTop(p, h)
	}
	select {
	case at := <-h.ended:
		if cause := context.Cause(lctx); errors.Is(cause, rlock.ErrLockLost) {
			h.ev.LostAt, h.ev.Note = at.UnixNano(), cause.Error()
		}
	case <-time.After(tortureOpTimeout):
		w.bad(invUnlock, p.lock, id, true, time.Now(), "the hold's context did not end after its last Unlock")
	}
	h.ev.To = time.Now().UnixNano()
	w.rec(h.ev)
}

func (h *holdState) top() context.Context { return h.levels[len(h.levels)-1].ctx }

// section is one critical section at the innermost level: claim the counter
// with the hold's token, think for d, write it back incremented. The marker
// set shows whether another hold is inside meanwhile.
func (w *workerState) section(p plan, h *holdState, chk *checker, d time.Duration, ignoreLoss bool) {
	if h.ev.Token < 1 {
		return // the hold ended before Token could be read (Close, say): no token to fence with
	}
	me := fmt.Sprintf("%s/%d", h.ev.Hold, len(h.levels)-1)
	var members []string
	err := storeRetry(func(ctx context.Context) (err error) {
		members, err = enterScript.Exec(ctx, chk.rc, []string{chk.marker}, []string{me}).AsStrSlice()
		return err
	})
	at := time.Now()
	if err != nil {
		w.bad(invError, p.lock, h.ev.Hold, true, at, "marker: %v", err)
		return
	}
	var others []string
	for _, o := range members {
		if !sameHold(o, h.ev.Hold) {
			others = append(others, o)
		}
	}
	if len(others) > 0 {
		w.rec(tortureEvent{Kind: evBad, Inv: invExclusion, Lock: p.lock, Who: w.who, Hold: h.ev.Hold, Others: others,
			From: at.UnixNano(), Note: "entered while other holds were inside"})
	}
	defer func() {
		if err := storeRetry(func(ctx context.Context) error {
			return chk.rc.Do(ctx, chk.rc.B().Srem().Key(chk.marker).Member(me).Build()).Error()
		}); err != nil {
			w.bad(invError, p.lock, h.ev.Hold, true, time.Now(), "marker: %v", err)
		}
	}()

	var v string
	err = storeRetry(func(ctx context.Context) (err error) {
		v, err = chk.store.Claim(ctx, h.ev.Token)
		return err
	})
	if err != nil {
		w.staleOrError(p, h, "claim", err)
		return
	}
	n, _ := strconv.Atoi(v) // "" before the first write
	think(context.Background(), d)
	if !ignoreLoss && h.top().Err() != nil {
		return // told the hold ended: a well-behaved holder stops here
	}
	err = storeRetry(func(ctx context.Context) error { return chk.store.Write(ctx, h.ev.Token, strconv.Itoa(n+1)) })
	chk.mu.Lock()
	switch {
	case err == nil:
		chk.acked++
	case !errors.Is(err, fenced.ErrStale):
		chk.unsure++ // the write may have been applied
	}
	chk.mu.Unlock()
	if err != nil {
		w.staleOrError(p, h, "write", err)
	}
}

// staleOrError reports a store call that failed: the fence turning a token
// away means another hold claimed meanwhile (an exclusion failure unless a
// fault explains it).
func (w *workerState) staleOrError(p plan, h *holdState, op string, err error) {
	if errors.Is(err, fenced.ErrStale) {
		w.bad(invExclusion, p.lock, h.ev.Hold, false, time.Now(), "%s with token %d: %v", op, h.ev.Token, err)
	} else {
		w.bad(invError, p.lock, h.ev.Hold, true, time.Now(), "%s: %v", op, err)
	}
}

// sameHold reports whether marker (hold/level) belongs to hold.
func sameHold(marker, hold string) bool {
	return len(marker) > len(hold) && marker[:len(hold)] == hold && marker[len(hold)] == '/'
}

// checkCount compares Redis's hold count with the levels this owner holds.
// Only while the hold's context is live: after a loss signal the owner
// knows it holds nothing.
func (w *workerState) checkCount(p plan, h *holdState) {
	top := h.top()
	if top.Err() != nil {
		return
	}
	n, err := h.m.HoldCount(top)
	at := time.Now()
	switch {
	case top.Err() != nil:
	case err != nil:
		w.bad(invError, p.lock, h.ev.Hold, false, at, "HoldCount: %v", err)
	case n != len(h.levels):
		w.bad(invHoldCount, p.lock, h.ev.Hold, false, at, "HoldCount %d, the owner holds %d level(s)", n, len(h.levels))
	}
}

// reenter takes one more level through the innermost level's context. It
// must not wait, and must not fail while the hold lasts.
func (w *workerState) reenter(p plan, h *holdState, opts []rlock.LockOption) bool {
	ctx, stop := context.WithTimeout(h.top(), tortureOpTimeout)
	call := time.Now()
	var lctx context.Context
	var ok bool
	var err error
	if p.nestedTry {
		lctx, ok, err = h.m.TryLock(ctx, opts...)
	} else {
		lctx, err = h.m.Lock(ctx, opts...)
		ok = err == nil
	}
	end := time.Now()
	took := end.Sub(call)
	live := h.top().Err() == nil
	note := ""
	switch {
	case ok && took > tortureReentryBound:
		note = fmt.Sprintf("re-entry took %v", took.Round(time.Millisecond))
	case !ok && live && err == nil:
		note = fmt.Sprintf("TryLock re-entry reported busy after %v", took.Round(time.Millisecond))
	case !ok && live && !errors.Is(err, rlock.ErrClosed):
		note = fmt.Sprintf("re-entry failed after %v: %v", took.Round(time.Millisecond), err)
	}
	if note != "" {
		w.rec(tortureEvent{Kind: evBad, Inv: invReentry, Lock: p.lock, Who: w.who, Hold: h.ev.Hold, Client: h.ev.Client, Proxy: h.ev.Proxy,
			From: call.UnixNano(), To: end.UnixNano(), Note: note})
	}
	if !ok {
		stop()
		return false
	}
	h.levels = append(h.levels, heldLevel{ctx: lctx, stop: stop})
	h.ev.Last = end.UnixNano()
	if tok, err := h.m.Token(lctx); err == nil && tok != h.ev.Token && lctx.Err() == nil {
		w.bad(invHoldCount, p.lock, h.ev.Hold, false, time.Now(), "re-entry has token %d, its grant %d", tok, h.ev.Token)
	}
	return true
}

// unlockTop releases the innermost level and returns its context. ErrNotHeld
// is right only for a hold that was lost; that is judged at the end,
// against the faults.
func (w *workerState) unlockTop(p plan, h *holdState) context.Context {
	lv := h.levels[len(h.levels)-1]
	h.levels = h.levels[:len(h.levels)-1]
	err := h.m.Unlock(lv.ctx)
	if lv.stop != nil {
		lv.stop()
	}
	switch {
	case err == nil:
	case errors.Is(err, rlock.ErrNotHeld):
		w.bad(invHoldCount, p.lock, h.ev.Hold, false, time.Now(), "Unlock of a held level: %v", err)
	default:
		if len(h.levels) == 0 {
			h.ev.ReleaseFailed = true
		}
		w.bad(invError, p.lock, h.ev.Hold, false, time.Now(), "Unlock: %v", err)
	}
	return lv.ctx
}

// doubleUnlock unlocks a level that was just released again: ErrNotHeld,
// and the owner's count in Redis unchanged.
func (w *workerState) doubleUnlock(p plan, h *holdState, released context.Context) {
	err := h.m.Unlock(released)
	if !errors.Is(err, rlock.ErrNotHeld) {
		w.bad(invUnlock, p.lock, h.ev.Hold, err == nil, time.Now(), "second Unlock of a released level returned %v, want ErrNotHeld", err)
	}
	w.checkCount(p, h)
}

// strayUnlock unlocks with a context that carries no hold:
// ErrNotHeld, and the hold unchanged.
func (w *workerState) strayUnlock(p plan, h *holdState) {
	err := h.m.Unlock(context.Background())
	if !errors.Is(err, rlock.ErrNotHeld) {
		w.bad(invUnlock, p.lock, h.ev.Hold, err == nil, time.Now(), "Unlock with a context that carries no hold returned %v, want ErrNotHeld", err)
	}
	w.checkCount(p, h)
}
