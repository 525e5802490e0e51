package rlock

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/latchkey/latchkey/internal/luascripts"
	"github.com/latchkey/latchkey/watchdog"
)

// hold is one owner's hold on one side of a lock: the local mirror of its
// field in Redis. Each Lock of the owner adds a level with a context of its
// own; each Unlock ends one, and the last releases the hold.
type hold struct {
	sd    *side
	t     *turn  // the turn an exclusive hold keeps; nil for other sides
	owner string // never reused: each new owner gets a fresh id
	token int64  // the grant's fencing token; re-entries share it
	lease bool   // kept by a fixed lease rather than the watchdog
	// ttl is the longest lease set on the hold's keys, which PEXPIRE GT
	// never shortens: their TTL is at most that. Guarded by io.
	ttl     time.Duration
	granted time.Time       // for the hold-time metric
	base    context.Context // the grant's parent: a writer's read hold derives from it
	// leveled: a level was added, so the grant reached its caller (an
	// acquisition). A grant given back before (after Close, or after its
	// caller gave up) records no hold time.
	leveled atomic.Bool

	// io serialises the owner's calls to Redis, so that count equals the
	// owner's count there and a lost reply can be retried or undone exactly.
	io    sync.Mutex
	count int64
	// pending is the level of an Unlock of unknown outcome: its release is
	// re-sent, as a retry, before the owner's next call (see settle).
	pending *level

	// Guarded by Client.mu.
	levels []*level
	baton  bool  // this hold has its turn's baton, to pass on when it ends
	done   bool  // the last level was unlocked
	lost   error // why the hold was lost (ErrLockLost), once it was

	// The keeper, set once at the grant: watchdog entries (one per group
	// of kept keys), or a fixed lease's timer, its local deadline (with
	// its monotonic clock reading: a step of the wall clock must not move it)
	// and why its contexts end then (Extend moves them).
	entries      []*watchdog.Entry
	expiry       *time.Timer
	deadline     atomic.Pointer[time.Time]
	expiredCause atomic.Pointer[leaseEndError]
	// extendUnseen: an Extend may have set a lease in Redis that the local
	// deadline does not count (its reply came late, or never), so the
	// hold's end at that deadline also releases it (expire).
	extendUnseen atomic.Bool
}

// level is one Lock's share of a hold.
type level struct {
	h        *hold
	cancel   context.CancelCauseFunc // written under Client.mu (end), read by its Unlock and under mu
	released bool                    // guarded by Client.mu
	callers  []uintptr               // the stack of the Lock call, for the leak warning
	cleanup  runtime.Cleanup
}

// levelKey is the context key under which a lock context carries its level,
// so that a Lock called with it (or a context derived from it) re-enters.
type levelKey struct {
	c   *Client
	key string
}

// carried returns the level that ctx carries for the side key, if any.
func (c *Client) carried(ctx context.Context, key string) *level {
	lv, _ := ctx.Value(levelKey{c, key}).(*level)
	return lv
}

// adopt registers grant t as a hold of count one, with tn's baton if any:
// then the hold is what the turn's waiters wait behind (turn.last).
func (c *Client) adopt(sd *side, tn *turn, t try, lo lockOptions) *hold {
	h := &hold{sd: sd, t: tn, owner: t.owner, token: t.Token, lease: lo.leaseSet, ttl: c.lease(lo), count: 1, baton: tn != nil}
	if c.obs != nil {
		h.granted = time.Now()
	}
	var own *refusal
	if tn != nil {
		own = c.ownHold(h, t)
	}
	c.mu.Lock()
	c.holds[h] = struct{}{}
	if tn != nil {
		tn.last = own
	}
	c.mu.Unlock()
	return h
}

// newHold turns grant t into a hold with its first level, derived from
// parent, and starts its keeper; the lease runs from t.sent.
func (c *Client) newHold(parent context.Context, sd *side, tn *turn, t try, lo lockOptions) (context.Context, error) {
	h := c.adopt(sd, tn, t, lo)
	h.base = parent
	switch {
	case c.isClosed():
		_ = h.releaseLast() // born after Close; a failed release expires within its lease
		return nil, ErrClosed
	case parent.Err() != nil:
		// Granted as the caller gave up (a handover racing its ctx in
		// enterTurn's select): given back, as attempt gives a late grant.
		_ = h.releaseLast()
		return nil, ctxErr(parent)
	}
	if h.lease {
		h.setLease(t.sent, lo.lease)
	}
	lctx, err := h.addLevel(parent)
	h.keep(t.sent)
	return lctx, err
}

// keep starts h's keeper once its first level exists, so that a loss
// ends that level rather than racing its creation.
func (h *hold) keep(sent time.Time) {
	c := h.sd.c
	if h.lease {
		timer := time.AfterFunc(time.Until(h.localDeadline()), h.expire)
		c.mu.Lock()
		h.expiry = timer
		c.mu.Unlock()
		return
	}
	entries := make([]*watchdog.Entry, 0, len(h.sd.keep))
	for i, g := range h.sd.keep {
		entries = append(entries, c.wd.Add(g[0], h.owner, sent, func(cause error) {
			if errors.As(cause, new(*luascripts.NotReplicatedError)) {
				cause = fmt.Errorf("%w: %w", ErrNotReplicated, cause) // lost to renewals the replicas did not acknowledge
			}
			release := noRelease
			if errors.Is(cause, watchdog.ErrExpired) {
				release = watchdog.DriftMargin(c.wd.Options().Timeout) // a renewal may still land
			}
			h.lose(i, cause, release)
		}, g[1:]...))
	}
	c.mu.Lock()
	h.entries = entries
	c.mu.Unlock()
}

// setLease sets a leased hold's local deadline, the deadline of its
// levels' contexts: a drift margin before a lease sent at sent runs out.
func (h *hold) setLease(sent time.Time, lease time.Duration) {
	h.expiredCause.Store(&leaseEndError{name: h.sd.name, what: h.sd.what, lease: lease})
	d := sent.Add(lease - watchdog.DriftMargin(lease))
	h.deadline.Store(&d)
}

// leaseEnd is when h's lease runs out in Redis as this client counts it:
// the last grant, renewal or Extend it saw plus that lease (the local
// deadline is a drift margin earlier). ok is false before the keeper
// started (newHold): then only the grant's lease is known.
func (h *hold) leaseEnd() (end time.Time, ok bool) {
	if h.lease {
		d, cause := h.deadline.Load(), h.expiredCause.Load()
		if d == nil || cause == nil {
			return time.Time{}, false
		}
		return d.Add(watchdog.DriftMargin(cause.lease)), true
	}
	c := h.sd.c
	c.mu.Lock()
	entries := h.entries
	c.mu.Unlock()
	if len(entries) == 0 {
		return time.Time{}, false
	}
	// Outside c.mu: Deadline takes the watchdog's lock.
	timeout := c.wd.Options().Timeout
	return entries[0].Deadline().Add(watchdog.DriftMargin(timeout)), true
}

// localDeadline is a leased hold's current local deadline; the zero time,
// long past, before setLease.
func (h *hold) localDeadline() time.Time {
	if d := h.deadline.Load(); d != nil {
		return *d
	}
	return time.Time{}
}

// lockCtx is the context a Lock returns; only its caller refers to it, so
// the runtime tells when it is dropped without its Unlock (leaked). A
// leased hold's timer, not a deadline of the context's own, ends it: its
// Deadline is its parent's, since Extend moves the lease's end and a
// context's deadline must never move (a timeout derived from it would be
// dropped). LeaseEnd reads the lease's end.
type lockCtx struct {
	context.Context
	lease *hold
}

// leaseEndKey is the context key LeaseEnd looks up.
type leaseEndKey struct{}

func (c *lockCtx) Value(key any) any {
	if _, ok := key.(leaseEndKey); ok && c.lease != nil {
		return earlier(c.lease.localDeadline(), c.Context.Value(key))
	}
	return c.Context.Value(key)
}

// earlier is the earlier of d and the lease end outer (a time.Time, or
// nil for none).
func earlier(d time.Time, outer any) time.Time {
	if o, ok := outer.(time.Time); ok && o.Before(d) {
		return o
	}
	return d
}

// LeaseEnd reports when ctx ends for a lease: the earliest local deadline
// of the WithLease holds it carries (a lock context, or one derived from
// it), each a drift margin before the lock's expiry in Redis and moved by
// Extend. ok is false when ctx carries no leased hold: a watchdog hold
// lasts until its Unlock or its loss. Check it before a step that must
// not outlive the lock, as ctx.Deadline is not: a context's deadline
// never moves, and Extend would move this one.
func LeaseEnd(ctx context.Context) (end time.Time, ok bool) {
	if ctx == nil {
		return time.Time{}, false
	}
	end, ok = ctx.Value(leaseEndKey{}).(time.Time)
	return end, ok
}

// stopKeeper stops renewing (or timing) h, except entry skip (whose loss
// callback is running and would wait for itself; -1: none), so that no loss
// is reported for a normal Unlock. Call it without Client.mu: Stop waits
// for a loss callback in progress, which takes Client.mu.
func (h *hold) stopKeeper(skip int) {
	c := h.sd.c
	c.mu.Lock()
	entries, expiry := h.entries, h.expiry
	c.mu.Unlock()
	for i, e := range entries {
		if i != skip {
			e.Stop()
		}
	}
	if expiry != nil {
		expiry.Stop()
	}
}

// leaseEndError is the cause a fixed lease's contexts end with, formatted
// only when asked: every leased grant makes one, few are read.
type leaseEndError struct {
	name  string
	what  string // the side: "lock", "read lock", "write lock", "permits"
	lease time.Duration
}

func (e *leaseEndError) Error() string {
	its := "its"
	switch {
	case e.what == "permits":
		its = "its permits'"
	case e.what != "lock":
		its = "its " + e.what + "'s"
	}
	return fmt.Sprintf("%v: %q: %s lease of %v is about to run out (take a longer lease, or omit WithLease to have the watchdog renew it)", ErrLockLost, e.name, its, e.lease)
}

func (e *leaseEndError) Unwrap() error { return ErrLockLost }

// addLevel makes the context a Lock returns: derived from parent, carrying
// the level, ended by its Unlock or the hold's loss.
func (h *hold) addLevel(parent context.Context) (context.Context, error) {
	c := h.sd.c
	lv := &level{h: h, callers: make([]uintptr, 16)}
	lv.callers = lv.callers[:runtime.Callers(3, lv.callers)]
	inner := context.WithValue(parent, levelKey{c, h.sd.key}, lv)
	inner, lv.cancel = context.WithCancelCause(inner)
	ctx := &lockCtx{Context: inner}
	if h.lease {
		ctx.lease = h
	}
	lv.cleanup = runtime.AddCleanup(ctx, (*level).leaked, lv)
	c.mu.Lock()
	lost, closed := h.lost, c.closed
	if lost == nil {
		h.levels = append(h.levels, lv)
		h.leveled.Store(true)
	}
	c.mu.Unlock()
	switch {
	case lost != nil:
		lv.cancel(lost)
		return nil, lost
	case closed:
		lv.cancel(ErrClosed) // as Close ended the others; Unlock still releases it
	case h.lease && !time.Now().Before(h.localDeadline()):
		// Born past its deadline (a late reply), as a context would be.
		h.expire()
	}
	return ctx, nil
}

// leaked runs when lv's context became unreachable while still held: warn
// and unlock it in a goroutine that Close awaits. A cleanup must not block:
// the runtime runs the process's cleanups on one goroutine (or a few), and
// the Logger's handler may block (a full pipe, a synchronous sink), so the
// Warn is logged on that goroutine too.
func (lv *level) leaked() {
	h := lv.h
	c := h.sd.c
	c.mu.Lock()
	live := lv.live()
	if live {
		c.leaks.Add(1)
	}
	c.mu.Unlock()
	if !live {
		return
	}
	c.obs.add(leaks, h.sd.metric, h.sd.name, 1, plain)
	go func() {
		defer c.leaks.Done()
		if l := c.opts.Logger; l != nil {
			l.Warn("latchkey: a lock context was dropped without its Unlock; unlocking it (call Unlock with the context Lock returned)",
				"lock", h.sd.name, "kind", h.sd.what, "locked_at", lv.lockedAt())
		}
		// Until lv is gone: an unlock that could not complete the owner's
		// pending release leaves lv held, with nobody else to unlock it. A
		// failed release of the last level expires within its lease.
		retry := luascripts.Backoff{Min: 10 * time.Millisecond, Max: time.Second}
		for h.unlock(lv) != nil {
			c.mu.Lock()
			live := lv.live()
			c.mu.Unlock()
			if !live || sleep(context.Background(), c.closing, retry.Next()) != nil {
				return
			}
		}
	}()
}

// live reports whether lv is still held by a client that is not closed.
// Guarded by Client.mu.
func (lv *level) live() bool {
	return !lv.released && !lv.h.done && lv.h.lost == nil && !lv.h.sd.c.closed
}

// lockedAt is the first frame of lv's Lock call outside this package.
func (lv *level) lockedAt() string {
	frames := runtime.CallersFrames(lv.callers)
	for {
		f, more := frames.Next()
		if !strings.HasPrefix(f.Function, "github.com/latchkey/latchkey/rlock.") {
			return fmt.Sprintf("%s (%s:%d)", f.Function, f.File, f.Line)
		}
		if !more {
			return "unknown"
		}
	}
}

// reenter takes one more hold for lv's owner, without waiting; an unknown
// outcome is undone and retried until ctx ends. The hold keeps its lease,
// or its watchdog.
func (h *hold) reenter(ctx context.Context, lv *level) (context.Context, error) {
	sd, c := h.sd, h.sd.c
	h.io.Lock()
	defer h.io.Unlock()
	if lost := h.lostOrDone(); lost != nil {
		return nil, lost
	}
	if _, err := h.settle(); err != nil {
		return nil, err
	}
	retry := retryBackoff()
	for {
		// Awaited past ctx's end (see attempt): no late re-entry after an undo.
		rctx, stop := uncut(ctx, c.opts.ReleaseTimeout)
		n, err := sd.reenter(rctx, h.owner)
		stop()
		if hook := c.opts.OnAttempt; hook != nil {
			hook(sd.name, err == nil && n > 0)
		}
		switch {
		case err == nil && n == 0:
			h.lose(-1, h.foundGone("a re-entry"), noRelease)
			return nil, h.lostOrDone()
		case err == nil && ctx.Err() != nil:
			// Re-entered after the caller gave up: given back; a failed
			// release is re-sent as a failed Unlock's is.
			h.count = n - 1
			if _, err := sd.runRelease(luascripts.ReleaseArgs{Owner: h.owner, Count: n, Retry: true, Sync: c.opts.sync()}); err != nil && !errors.Is(err, ErrNotReplicated) {
				h.pending = &level{}
			}
			return nil, ctxErr(ctx)
		case err == nil:
			h.count = n
			c.obs.add(acquisitions, sd.metric, sd.name, 1, reentry)
			return h.addLevel(ctx)
		case luascripts.Classify(err) == luascripts.Permanent:
			return nil, fmt.Errorf("latchkey: re-enter the %s %q: %w", sd.what, sd.name, err)
		}
		// The outcome is unknown: take back the hold it may have added.
		undoErr := sd.undo(h.owner, h.count+1)
		if undoErr != nil {
			// Redis may count one hold more than h: settle re-sends the
			// undo before the owner's next call, as a failed Unlock's.
			h.pending = &level{}
		}
		err = c.unknownOutcome(sd.name, err, undoErr)
		if !transient(ctx, err) || undoErr != nil {
			return nil, ended(ctx, ctx, err)
		}
		if serr := sleep(ctx, c.closing, retry.Next()); serr != nil {
			return nil, withLast(serr, err)
		}
	}
}

// unlock ends lv: the last level releases the hold, any other drops one.
// A level already unlocked, or a hold lost before, is ErrNotHeld.
func (h *hold) unlock(lv *level) error {
	sd := h.sd
	h.io.Lock()
	defer h.io.Unlock()
	if h.lease && !time.Now().Before(h.localDeadline()) {
		// Lost at the deadline whether or not its timer ran yet, so that an
		// Unlock racing the timer reports the loss either way.
		h.expire()
	}
	settled, err := h.settle()
	switch {
	case err != nil && h.count <= 1:
		// The last level, and Redis still does not take the earlier
		// release: the hold ends here and expires within its lease, as the
		// error says, rather than being renewed for ever.
		if ok, _ := h.takeLevel(lv); ok {
			h.abandon()
			lv.cancel(nil)
		}
		return err
	case err != nil || settled == lv:
		return err // a retry of lv's failed Unlock, now done
	}
	ok, lost := h.takeLevel(lv)
	switch {
	case !ok:
		return fmt.Errorf("%w: %q: this %s level was already unlocked", ErrNotHeld, sd.name, sd.what)
	case lost != nil:
		lv.cancel(lost)
		return fmt.Errorf("%w: %w", ErrNotHeld, lost)
	}
	if h.count <= 1 {
		err := h.releaseLast()
		if errors.Is(err, ErrLockLost) {
			lv.cancel(err)
		}
		lv.cancel(nil)
		return err
	}
	defer lv.end()
	r, err := sd.runRelease(luascripts.ReleaseArgs{Owner: h.owner, Count: h.count, Sync: sd.c.opts.sync()})
	switch {
	case err != nil && !errors.Is(err, ErrNotReplicated):
		// Unknown outcome: re-sent before the owner's next call (settle).
		h.count--
		h.pending = lv
		return fmt.Errorf("%w; it is completed by a retry of this Unlock or by the hold's next Lock or Unlock", err)
	case r.Left < 0:
		h.lose(-1, h.foundGone("its release"), noRelease)
		return fmt.Errorf("%w: %q: the %s was lost before its release", ErrNotHeld, sd.name, sd.what)
	}
	h.count = r.Left
	return err
}

// end ends lv's context and lets go of it: a level kept as pending must not
// keep its context's parents reachable (a dropped outer level would never
// be found leaked).
func (lv *level) end() {
	c := lv.h.sd.c
	c.mu.Lock()
	cancel := lv.cancel
	lv.cancel = func(error) {} // under mu: Close's endLevels reads it
	c.mu.Unlock()
	cancel(nil)
}

// settle re-sends the release of a failed Unlock (h.pending) as a retry,
// which the script counts once, and returns that level. Holds h.io.
func (h *hold) settle() (*level, error) {
	lv := h.pending
	if lv == nil || h.lostOrDone() != nil {
		return nil, nil // a lost hold has nothing left to release
	}
	sd := h.sd
	r, err := sd.runRelease(luascripts.ReleaseArgs{Owner: h.owner, Count: h.count + 1, Retry: true, Sync: sd.c.opts.sync()})
	switch {
	case err != nil && !errors.Is(err, ErrNotReplicated):
		return nil, err
	case r.Left < 0:
		h.lose(-1, h.foundGone("its release"), noRelease)
		return nil, fmt.Errorf("%w: %w", ErrNotHeld, h.lostOrDone())
	}
	h.pending = nil
	return lv, nil
}

// abandon ends h at its last level without its release, which Redis did
// not take: the keeper stops, the baton passes on, and the release goes on
// in the background (releaseLost) until Redis takes it, the lease could
// have run out, or Close.
func (h *hold) abandon() {
	sd, c := h.sd, h.sd.c
	h.stopKeeper(-1)
	hasBaton, lost := h.end()
	if hasBaton {
		c.leaveTurn(h.t, sd, false, false)
	}
	if lost != nil {
		return
	}
	h.recordEnd(nil)
	c.mu.Lock()
	release := !c.closed
	if release {
		c.leaks.Add(1)
	}
	c.mu.Unlock()
	if release {
		go h.releaseLost(0)
	}
}

// releaseLast releases h's last hold, handing an exclusive lock straight
// to a local waiter (turn.go); either way the turn's baton passes on.
func (h *hold) releaseLast() error {
	sd, c := h.sd, h.sd.c
	h.stopKeeper(-1)
	hasBaton, lost := h.end()
	if lost != nil {
		return fmt.Errorf("%w: %w", ErrNotHeld, lost)
	}
	req := luascripts.ReleaseArgs{Owner: h.owner, Count: 1, Sync: c.opts.sync()}
	var w *turnWaiter
	if hasBaton {
		if w = c.chooseHeir(h.t, sd); w != nil {
			req.Heir, req.HeirLease = c.newOwner(), c.lease(w.lo)
			// Only an heir whose lease may end first needs the TTL read
			// (waiters were told at most h.ttl).
			req.HeirCheck = h.ttl > req.HeirLease
		}
	}
	sent := time.Now()
	r, err := sd.runRelease(req)
	h.count = 0
	switch {
	case w != nil:
		var b try
		switch {
		case err == nil && r.Handed:
			b.Acquired, b.Token, b.owner, b.sent = true, r.Token, req.Heir, sent
		case err != nil:
			// Maybe handed unseen: the heir undoes it before contending.
			b.owner = req.Heir
		}
		c.handedOver(h.t, w, b)
	case hasBaton:
		c.leaveTurn(h.t, sd, false, false)
	}
	if r.Left < 0 {
		// Lost before this Unlock, though no watchdog or timer saw it.
		lost = fmt.Errorf("%w: %w", ErrLockLost, h.foundGone("its release"))
	}
	h.recordEnd(lost) // a hold lost earlier was counted by lose
	switch {
	case err != nil && !errors.Is(err, ErrNotReplicated):
		return err
	case lost != nil:
		return fmt.Errorf("%w: %w", ErrNotHeld, lost)
	}
	return err
}

// recordEnd records h's end, its hold time and its loss when cause is not
// nil, if a caller had it: a grant given back before it reached one (a
// handover after its waiter gave up, a grant after Close or after the
// caller's ctx ended) was counted as no acquisition, so it has no hold
// time either, and hold counts do not exceed acquisitions.
func (h *hold) recordEnd(cause error) {
	if h.leveled.Load() {
		h.sd.c.obs.ended(h.sd.metric, h.sd.name, h.granted, cause)
	}
}

// takeLevel marks lv released (false: it already was) and says why the
// hold was lost, if it was.
func (h *hold) takeLevel(lv *level) (ok bool, lost error) {
	c := h.sd.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if lv.released {
		return false, nil
	}
	lv.released = true
	lv.cleanup.Stop()
	h.levels = slices.DeleteFunc(h.levels, func(x *level) bool { return x == lv })
	return true, h.lost
}

// end marks h done at its last release, taking its baton, and says why h
// was lost, if it was: then nothing is left to release.
func (h *hold) end() (baton bool, lost error) {
	c := h.sd.c
	c.mu.Lock()
	defer c.mu.Unlock()
	h.done = true
	delete(c.holds, h)
	baton, h.baton = h.baton, false
	return baton, h.lost
}

// foundGone is the loss cause of a hold that a call (at) found gone.
func (h *hold) foundGone(at string) error {
	return fmt.Errorf("%q: the %s %w at %s", h.sd.name, h.sd.what, errFoundGone, at)
}

// expire ends a fixed-lease hold at its local deadline: the timer's
// callback, or a call that finds the deadline passed. After an Extend that
// may have pushed the lease out in Redis unseen it releases the hold too,
// which would otherwise stay locked for that lease with nobody holding it.
func (h *hold) expire() {
	cause := h.expiredCause.Load()
	release := noRelease
	if h.extendUnseen.Load() {
		release = watchdog.DriftMargin(cause.lease)
	}
	h.lose(-1, cause, release)
}

// noRelease is lose's release for a hold that Redis no longer has.
const noRelease time.Duration = -1

// lose ends h, no longer held: its keeper stops, the baton passes on and
// its levels' contexts end with cause. It is the loss callback of watchdog
// entry from (-1: the lease timer, or a call that found the hold gone), so
// it must not block. A release of 0 or more gives back, that long after,
// what Redis may still hold (releaseLost). It reports whether it ended h
// (false: ended before).
func (h *hold) lose(from int, cause error, release time.Duration) bool {
	c := h.sd.c
	c.mu.Lock()
	if h.done || h.lost != nil {
		c.mu.Unlock()
		return false
	}
	// Counted with the loss, under the lock Close takes: a Close that
	// follows the contexts' end (the holder's cue) awaits the release.
	if c.closed {
		release = noRelease // a hold still kept at Close expires (Close's contract)
	}
	if release >= 0 {
		c.leaks.Add(1)
	}
	if !errors.Is(cause, ErrLockLost) {
		cause = fmt.Errorf("%w: %w", ErrLockLost, cause)
	}
	h.lost = cause
	h.recordEnd(cause)
	delete(c.holds, h)
	baton, levels := h.baton, h.levels
	h.baton, h.levels = false, nil
	c.mu.Unlock()
	h.stopKeeper(from)
	if baton {
		// Before the contexts end (the holder's cue): a holder reacting to
		// the loss with TryLock must not find the turn still busy, with
		// nobody holding the lock. Not queued (the grant dequeued the
		// client): no I/O.
		c.leaveTurn(h.t, h.sd, false, false)
	}
	for _, lv := range levels {
		lv.cancel(cause)
	}
	if afterLossHint != nil {
		afterLossHint()
	}
	if release >= 0 {
		go h.releaseLost(release)
	}
	return true
}

// afterLossHint, set only by tests, runs in lose once the baton has passed
// on and the hold's contexts have ended, and before its release starts.
var afterLossHint func()

// releaseLost gives back, best effort, a hold that ended at its local
// deadline: the watchdog's, or a fixed lease's after an Extend of unseen
// outcome (expire); or one whose last Unlock Redis did not take (abandon).
// It runs in the background, counted in c.leaks by its caller, and tries
// again until the hold's longest lease could have run out or Close.
// Its lease may still run in Redis (the drift margin), longer if a renewal
// or Extend already sent lands after the loss, and no Unlock releases a
// lost hold; the scripts release only this owner's holds. It waits margin
// first, until the lease the holder counted on could have run out in
// Redis: the margin is the holder's head start to stop before anyone else
// gets the lock (docs/safety.md). Close does not cut that wait, which
// would cut the head start short, and awaits the release: at most the
// margin longer.
func (h *hold) releaseLost(margin time.Duration) {
	defer h.sd.c.leaks.Done()
	time.Sleep(margin)
	// io only for the count: nothing else sends for a lost hold (each
	// call checks first), and an Unlock of it must not wait on these
	// calls, which take up to ReleaseTimeout each when Redis is away.
	h.io.Lock()
	n := h.count
	if h.pending != nil {
		n++ // a failed Unlock's release may not have run
	}
	until := time.Now().Add(h.ttl) // no lease set on the keys outlives it
	h.io.Unlock()
	retry := luascripts.Backoff{Min: 10 * time.Millisecond, Max: time.Second}
	for n > 0 {
		r, err := h.sd.runRelease(luascripts.ReleaseArgs{Owner: h.owner, Count: n, Retry: true})
		switch {
		case err == nil && r.Left == n-1:
			n--
			continue
		case err == nil:
			return // no longer this owner's: expired, or forced
		}
		// Redis does not take it now: again, while it may still hold.
		if !time.Now().Before(until) || sleep(context.Background(), h.sd.c.closing, retry.Next()) != nil {
			return
		}
	}
}

// lostOrDone returns why h can no longer be re-entered, or nil.
func (h *hold) lostOrDone() error {
	c := h.sd.c
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case h.lost != nil:
		return h.lost
	case h.done:
		return fmt.Errorf("%w: %q: the context carries a %s that was unlocked", ErrNotHeld, h.sd.name, h.sd.what)
	}
	return nil
}

// held returns nil if lv is still held, else ErrNotHeld with the reason.
func (lv *level) held() error {
	c := lv.h.sd.c
	c.mu.Lock()
	released := lv.released
	c.mu.Unlock()
	if released {
		return fmt.Errorf("%w: %q: this level was already unlocked", ErrNotHeld, lv.h.sd.name)
	}
	err := lv.h.lostOrDone()
	if err != nil && !errors.Is(err, ErrNotHeld) {
		return fmt.Errorf("%w: %w", ErrNotHeld, err)
	}
	return err
}

// endLevels ends every level's context with cause, the hold staying in
// place (Close: Unlock still releases it).
func (h *hold) endLevels(cause error) {
	c := h.sd.c
	c.mu.Lock()
	cancels := make([]context.CancelCauseFunc, len(h.levels))
	for i, lv := range h.levels {
		cancels[i] = lv.cancel // an Unlock's end may replace it meanwhile
	}
	c.mu.Unlock()
	for _, cancel := range cancels {
		cancel(cause)
	}
}

// extend pushes out the lease of lv's fixed-lease hold: see Mutex.Extend.
func (h *hold) extend(lv *level, lease time.Duration) error {
	sd, c := h.sd, h.sd.c
	if !h.lease {
		return fmt.Errorf("%w: the %s %q is kept by the watchdog for as long as it is held; Extend applies to holds taken WithLease", ErrInvalidArgument, sd.what, sd.name)
	}
	h.io.Lock()
	defer h.io.Unlock()
	if err := lv.held(); err != nil {
		return err
	}
	// Set before the deadline is read: whenever the hold ends at it from
	// here on, this call may have run in Redis unseen (expire releases it).
	h.extendUnseen.Store(true)
	deadline := h.localDeadline()
	if !time.Now().Before(deadline) {
		h.expire()
		return fmt.Errorf("%w: %w", ErrNotHeld, h.expiredCause.Load())
	}
	h.ttl = max(h.ttl, lease) // counted before the call: it may run unseen
	// Past the current deadline the hold is lost whatever the reply says.
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	sent := time.Now()
	held, err := luascripts.RunRenewHold(ctx, c.rc, sd.keep, h.owner, lease, c.opts.sync())
	var notSynced *luascripts.NotReplicatedError
	switch {
	case errors.As(err, &notSynced) && held:
		// A failover could undo it: the hold keeps its deadline.
		return fmt.Errorf("%w: extend %q: %w (the lease stands as it was)", ErrNotReplicated, sd.name, notSynced)
	case err != nil && notSynced == nil:
		// If it ran, Redis keeps the hold longer than we count on: safe,
		// and released if the hold ends at its deadline (extendUnseen).
		return fmt.Errorf("latchkey: extend %q: %w (the lease stands as it was)", sd.name, err)
	case !held:
		h.lose(-1, h.foundGone("Extend"), noRelease)
		return fmt.Errorf("%w: %q: the %s was lost before Extend", ErrNotHeld, sd.name, sd.what)
	}
	later := sent.Add(lease - watchdog.DriftMargin(lease))
	if !later.After(deadline) {
		return nil
	}
	if !h.expiry.Stop() {
		// The timer fired while the call was out: lost, and stays so;
		// its expire releases what this call extended.
		return fmt.Errorf("%w: %w", ErrNotHeld, h.expiredCause.Load())
	}
	h.setLease(sent, lease)
	h.expiry.Reset(time.Until(later))
	if lease >= h.ttl {
		// The new deadline counts every lease set before, seen or not.
		h.extendUnseen.Store(false)
	}
	return nil
}

// carriedLevel is every primitive's first step in Unlock, Extend and
// Token: check, then find the level of side key that ctx carries.
func (c *Client) carriedLevel(ctx context.Context, handleErr error, key, name, what string) (*level, error) {
	if err := checkCtx(ctx, handleErr); err != nil {
		return nil, err
	}
	if lv := c.carried(ctx, key); lv != nil {
		return lv, nil
	}
	return nil, fmt.Errorf("%w: %q: the context carries no %s of it (pass the context that this Client's lock call returned)", ErrNotHeld, name, what)
}

// extendCarried is every primitive's Extend.
func (c *Client) extendCarried(lctx context.Context, handleErr error, key, name, what string, lease time.Duration) error {
	if err := checkCtx(lctx, handleErr); err != nil {
		return err
	}
	if _, err := buildLockOptions([]LockOption{WithLease(lease)}, false); err != nil {
		return err
	}
	lv, err := c.carriedLevel(lctx, nil, key, name, what)
	if err != nil {
		return err
	}
	// Reachable until done: else a collection while the call waits would
	// take the level for a dropped one (leaked) and unlock it.
	defer runtime.KeepAlive(lctx)
	return lv.h.extend(lv, lease)
}

// unlockCarried is every primitive's Unlock.
func (c *Client) unlockCarried(ctx context.Context, handleErr error, key, name, what string) error {
	lv, err := c.carriedLevel(ctx, handleErr, key, name, what)
	if err != nil {
		return err
	}
	defer runtime.KeepAlive(ctx) // as in extendCarried
	return lv.h.unlock(lv)
}

// tokenCarried is every primitive's Token: the fencing token even of a
// lost hold (a holder that does not know yet must present it, and the
// resource refuses it once a newer one wrote), or ErrNotHeld.
func (c *Client) tokenCarried(ctx context.Context, handleErr error, key, name, what string) (int64, error) {
	lv, err := c.carriedLevel(ctx, handleErr, key, name, what)
	if err != nil {
		return 0, err
	}
	if err := lv.h.lostOrDone(); err != nil && !errors.Is(err, ErrLockLost) {
		return 0, err
	}
	return lv.h.token, nil
}
