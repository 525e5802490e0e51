package rlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/latchkey/latchkey/watchdog"
)

// hold is one owner's hold on one lock: the local mirror of its field in
// the lock hash. Each Lock of the owner (the first, then re-entries through
// its contexts) adds a level with a context of its own; each Unlock ends one.
type hold struct {
	m       *Mutex
	g       *gate
	owner   string    // never reused: each new owner gets a fresh id
	token   int64     // the grant's fencing token; re-entries share it
	lease   bool      // kept by a fixed lease rather than the watchdog
	granted time.Time // for the hold-time metric

	// io serialises the owner's calls to Redis (re-entries and releases),
	// so that count always equals the owner's count in Redis and a call
	// whose reply was lost can be retried or undone exactly.
	io    sync.Mutex
	count int64

	// Guarded by Client.mu.
	levels []*level
	baton  bool  // this hold has its gate's baton, to pass on when it ends
	done   bool  // the last level was unlocked
	lost   error // why the hold was lost (ErrLockLost), once it was

	// The keeper: a watchdog entry, or the timer of a fixed lease. Set
	// once at the grant; stopped before the last release.
	wd     *watchdog.Entry
	expiry *time.Timer
	// Of a fixed lease: its local deadline (unix ns) and why its contexts
	// end then. Extend moves both; level contexts read the deadline.
	deadline     atomic.Int64
	expiredCause atomic.Pointer[leaseEndError]
}

// level is one Lock's share of a hold.
type level struct {
	h        *hold
	cancel   context.CancelCauseFunc
	released bool // guarded by Client.mu
}

// levelKey is the context key under which a lock context carries its level,
// so that a Lock called with it (or a context derived from it) re-enters.
type levelKey struct {
	c   *Client
	key string
}

// carried returns the level that ctx carries for m's lock, if any.
func (m *Mutex) carried(ctx context.Context) *level {
	lv, _ := ctx.Value(levelKey{m.c, m.keys.Lock}).(*level)
	return lv
}

// newHold registers a fresh grant to owner with a count of one. The hold
// starts with its gate's baton.
func (m *Mutex) newHold(g *gate, owner string, token int64, lo lockOptions) *hold {
	h := &hold{m: m, g: g, owner: owner, token: token, lease: lo.leaseSet, count: 1, baton: true}
	if m.c.obs != nil {
		h.granted = time.Now()
	}
	m.c.mu.Lock()
	m.c.holds[h] = struct{}{}
	m.c.mu.Unlock()
	return h
}

// keep starts h's keeper, once its first level exists: a lease already
// over when the grant's reply arrived then ends that level like any later
// loss, rather than racing its creation. The lease runs from sent, when the
// grant's request left, and the holder is told a drift margin before it
// can lapse.
func (h *hold) keep(sent time.Time) {
	if !h.lease {
		h.wd = h.m.c.wd.Add(h.m.keys.Lock, h.owner, sent, h.lose, h.m.keys.Holder)
		return
	}
	h.expiry = time.AfterFunc(time.Until(h.localDeadline()), func() { h.lose(h.expiredCause.Load()) })
}

// setLease fixes a leased hold's local deadline, which every level's
// context carries as its deadline: a drift margin before a lease sent at
// sent runs out in Redis.
func (h *hold) setLease(sent time.Time, lease time.Duration) {
	h.expiredCause.Store(&leaseEndError{name: h.m.name, lease: lease})
	h.deadline.Store(sent.Add(lease - watchdog.DriftMargin(lease)).UnixNano())
}

// localDeadline is a leased hold's current local deadline.
func (h *hold) localDeadline() time.Time { return time.Unix(0, h.deadline.Load()) }

// leaseCtx is a leased level's context. Its deadline is its hold's current
// one, which Extend moves; the hold's lease timer, not a timer of the
// context's own, ends it, so that one deadline rules every level.
type leaseCtx struct {
	context.Context
	h *hold
}

func (c leaseCtx) Deadline() (time.Time, bool) {
	d := c.h.localDeadline()
	if parent, ok := c.Context.Deadline(); ok && parent.Before(d) {
		return parent, true
	}
	return d, true
}

// stopKeeper stops renewing (or timing) h. After it returns, the keeper
// will not report a loss: a renewal that found the key just released would
// otherwise report one for a normal Unlock.
func (h *hold) stopKeeper() {
	if h.wd != nil {
		h.wd.Stop()
	}
	if h.expiry != nil {
		h.expiry.Stop()
	}
}

// leaseEndError is the cause a fixed lease's contexts end with. It formats
// its message only when asked: every leased grant makes one, few are read.
type leaseEndError struct {
	name  string
	what  string // "" for a Mutex; "read lock", "write lock", "permits"
	lease time.Duration
}

func (e *leaseEndError) Error() string {
	its := "its"
	if e.what != "" {
		its = "its " + e.what + "'"
	}
	return fmt.Sprintf("%v: %q: %s lease of %v is about to run out (take a longer lease, or omit WithLease to have the watchdog renew it)", ErrLockLost, e.name, its, e.lease)
}

func (e *leaseEndError) Unwrap() error { return ErrLockLost }

// addLevel makes the context a Lock returns: derived from parent, carrying
// the level, and ended by the matching Unlock or when the hold is lost. A
// fixed lease's local deadline is also the context's deadline (leaseCtx).
func (h *hold) addLevel(parent context.Context) (context.Context, error) {
	c := h.m.c
	lv := &level{h: h}
	ctx := context.WithValue(parent, levelKey{c, h.m.keys.Lock}, lv)
	ctx, lv.cancel = context.WithCancelCause(ctx)
	if h.lease {
		ctx = leaseCtx{Context: ctx, h: h}
	}
	c.mu.Lock()
	lost, closed := h.lost, c.closed
	if lost == nil {
		h.levels = append(h.levels, lv)
	}
	c.mu.Unlock()
	switch {
	case lost != nil:
		lv.cancel(lost)
		return nil, lost
	case closed:
		// Close ran since the grant and ended every other hold's contexts;
		// this one ends the same way, and Unlock still releases it.
		lv.cancel(ErrClosed)
	case h.lease && !time.Now().Before(h.localDeadline()):
		// The lease ran out before this level was made (a grant whose
		// reply came late): the context is born ended, as a context made
		// with a past deadline would be, not when the timer gets to it.
		h.lose(h.expiredCause.Load())
	}
	return ctx, nil
}

// takeLevel marks lv released, reporting false if it already was (a second
// Unlock with the same context), and whether the hold was lost, and why.
func (h *hold) takeLevel(lv *level) (ok bool, lost error) {
	c := h.m.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if lv.released {
		return false, nil
	}
	lv.released = true
	h.levels = slices.DeleteFunc(h.levels, func(x *level) bool { return x == lv })
	return true, h.lost
}

// end marks h done at its last release. It reports whether h still had the
// gate's baton (it is then the caller's to pass on) and why h was lost, if
// it was: then nothing is left to release.
func (h *hold) end() (baton bool, lost error) {
	c := h.m.c
	c.mu.Lock()
	defer c.mu.Unlock()
	h.done = true
	delete(c.holds, h)
	baton, h.baton = h.baton, false
	if h.lost == nil {
		c.obs.ended(h.m.metricKind(), h.m.name, h.granted, nil) // a lost hold was counted when lost
	}
	return baton, h.lost
}

// lose ends h because the lock is no longer held: every level's context is
// cancelled with cause, and the gate's baton passes on, since the lock is
// free in Redis or soon will be. It is the watchdog's loss callback, so it
// must not block.
func (h *hold) lose(cause error) {
	c := h.m.c
	c.mu.Lock()
	if h.done || h.lost != nil {
		c.mu.Unlock()
		return
	}
	if !errors.Is(cause, ErrLockLost) {
		cause = fmt.Errorf("%w: %w", ErrLockLost, cause)
	}
	h.lost = cause
	c.obs.ended(h.m.metricKind(), h.m.name, h.granted, cause)
	delete(c.holds, h)
	baton := h.baton
	h.baton = false
	levels := h.levels
	h.levels = nil
	c.mu.Unlock()
	for _, lv := range levels {
		lv.cancel(h.lost)
	}
	if baton {
		c.leaveGate(h.g, h.m, false)
	}
}

// endLevels cancels every level's context with cause, leaving the hold in
// place (Close: the lock is still held, and Unlock still releases it).
func (h *hold) endLevels(cause error) {
	c := h.m.c
	c.mu.Lock()
	levels := slices.Clone(h.levels)
	c.mu.Unlock()
	for _, lv := range levels {
		lv.cancel(cause)
	}
}
