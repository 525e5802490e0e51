package rlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/rueidis"

	"github.com/latchkey/latchkey/internal/luascripts"
)

// Mutex is a handle on one named, reentrant, distributed lock. Get it from
// Client.Mutex or Client.SpinMutex.
//
// Ownership works as with sync.Mutex: a handle is not an owner, and any
// number of goroutines may share one; each Lock is a new owner that
// excludes every other, in this process and elsewhere. A Lock re-enters
// only when its context carries a hold of the lock: the context an earlier
// Lock of the same Client returned, or one derived from it. So a function
// that is passed the lock context can lock again without deadlocking, and
// each Lock needs its own Unlock; the lock is released at the last.
//
// Goroutines started with a context derived from a lock context (an
// errgroup's, say) are part of that owner: their Locks re-enter instead of
// excluding each other. Give such goroutines the context you had before
// Lock if they must exclude each other.
type Mutex struct {
	c     *Client
	name  string
	keys  luascripts.Keys
	inbox string // the channel on which this client's waiters are woken
	spin  bool
	err   error // invalid name, reported by every method
}

// Name is the lock's name.
func (m *Mutex) Name() string { return m.name }

// Key is the Redis key of the lock hash.
func (m *Mutex) Key() string { return m.keys.Lock }

// Lock blocks until it holds the lock or ctx ends. It returns a context
// derived from ctx that carries the hold (pass it to nested calls that may
// lock again: they re-enter) and is cancelled when this hold ends: normally
// by the matching Unlock, or with cause ErrLockLost when the lock is lost.
//
// If ctx already carries a hold of this lock, Lock re-enters it at once,
// without waiting; it fails with ErrLockLost if that hold was lost.
//
// The returned context ends when ctx does, too: a deadline on ctx bounds
// the hold as well as the wait. To bound only the wait, use TryLock with
// WithWait.
//
// Without WithLease the lock's lease is Options.WatchdogTimeout and the
// watchdog renews it until Unlock. With WithLease(d) it expires d after the
// acquire was sent, and the returned context's deadline is a drift margin
// before that. A re-entry shares the lease (or the watchdog) of the Lock it
// re-enters: a WithLease given to it is checked but not applied, so code
// that always passes one works nested too. Transient Redis errors (a
// dropped connection) are retried until ctx ends; errors Redis itself
// returns end the call.
func (m *Mutex) Lock(ctx context.Context, opts ...LockOption) (context.Context, error) {
	lo, err := m.check(ctx, opts, false)
	if err != nil {
		return nil, err
	}
	if lv := m.carried(ctx); lv != nil {
		return m.reenter(ctx, lv, lo)
	}
	lo.obs = m.c.obs.begin(ctx, m.metricKind(), m.name)
	lctx, err := m.acquire(ctx, lo, time.Time{}, false)
	lo.obs.end(ctx, err)
	return lctx, err
}

// TryLock is Lock that gives up when the lock is busy: at once, or after
// waiting up to WithWait(d). It reports false (with a nil error) when the
// lock stayed busy; another goroutine of this Client holding or waiting for
// the lock counts as busy. On success the context is as Lock's. ctx still
// bounds everything: if it ends first, TryLock returns its error. A context
// that carries a hold re-enters, as with Lock.
func (m *Mutex) TryLock(ctx context.Context, opts ...LockOption) (context.Context, bool, error) {
	lo, err := m.check(ctx, opts, true)
	if err != nil {
		return nil, false, err
	}
	var lctx context.Context
	if lv := m.carried(ctx); lv != nil {
		lctx, err = m.reenter(ctx, lv, lo)
	} else {
		lo.obs = m.c.obs.begin(ctx, m.metricKind(), m.name)
		lctx, err = m.acquire(ctx, lo, time.Now().Add(lo.wait), lo.wait == 0)
		lo.obs.end(ctx, err)
	}
	return tried(lctx, err)
}

// errBusy ends a TryLock whose wait ran out.
var errBusy = errors.New("busy")

// tried is what a Try call returns for an acquire's outcome: errBusy is a
// plain "no", with a nil error.
func tried(lctx context.Context, err error) (context.Context, bool, error) {
	if errors.Is(err, errBusy) {
		return nil, false, nil
	}
	return lctx, err == nil, err
}

// reenter takes one more hold for the owner of lv. It never waits for
// anyone: the owner holds the lock already. Its lease options were checked
// but do not apply: the hold keeps the lease, or the watchdog, it has.
func (m *Mutex) reenter(ctx context.Context, lv *level, lo lockOptions) (context.Context, error) {
	h := lv.h
	h.io.Lock()
	defer h.io.Unlock()
	if lost := m.c.lostOrDone(h); lost != nil {
		return nil, lost
	}
	retry := m.c.opts.SpinBackoffMin
	for {
		n, err := luascripts.RunReenter(ctx, m.c.rc, m.keys, h.owner)
		if hook := m.c.opts.OnAttempt; hook != nil {
			hook(m.name, err == nil && n > 0)
		}
		switch {
		case err == nil && n == 0:
			h.stopKeeper()
			h.lose(fmt.Errorf("%q %w", m.name, errFoundGone))
			return nil, m.c.lostOrDone(h)
		case err == nil:
			h.count = n
			m.c.obs.reentered(m.metricKind(), m.name)
			return h.addLevel(ctx)
		}
		if _, isRedis := rueidis.IsRedisErr(err); isRedis || errors.Is(err, luascripts.ErrUnexpectedReply) {
			return nil, fmt.Errorf("latchkey: re-enter %q: %w", m.name, err)
		}
		// The outcome is unknown: take back the hold it may have added.
		undoErr := m.undo(h.owner, h.count+1)
		err = m.c.unknownOutcome(m.name, err, undoErr)
		if !transient(ctx, err) || undoErr != nil {
			return nil, ended(ctx, ctx, err)
		}
		if !sleep(ctx, m.c.closing, retry) {
			return nil, ended(ctx, ctx, withLast(ctxErr(ctx), err))
		}
		retry = min(retry*2, m.c.opts.SpinBackoffMax)
	}
}

// isDone reports whether h's last level was unlocked.
func (c *Client) isDone(h *hold) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return h.done
}

// lostOrDone returns why h can no longer be re-entered, or nil.
func (c *Client) lostOrDone(h *hold) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case h.lost != nil:
		return h.lost
	case h.done:
		return fmt.Errorf("%w: %q: the context carries a hold that was unlocked", ErrNotHeld, h.m.name)
	}
	return nil
}

// Unlock releases the hold that ctx carries (a context Lock returned, or
// one derived from it): its innermost level. The lock itself is released,
// and the next waiter woken, at the last level. Unlock returns ErrNotHeld,
// changing nothing, when ctx carries no hold of this lock, when that level
// was already unlocked, or when the hold was lost before.
//
// Unlock ignores ctx's cancellation, so `defer m.Unlock(lctx)` works even
// when lctx has ended; its Redis call is bounded by Options.ReleaseTimeout
// instead, and retried while its reply is lost. If it still fails, the hold
// ends locally and the lock expires within its lease.
func (m *Mutex) Unlock(ctx context.Context) error {
	if err := m.checkCtx(ctx); err != nil {
		return err
	}
	lv := m.carried(ctx)
	if lv == nil {
		return fmt.Errorf("%w: %q: the context carries no hold of this lock (pass the context Lock returned)", ErrNotHeld, m.name)
	}
	h := lv.h
	h.io.Lock()
	defer h.io.Unlock()
	if h.lease && !time.Now().Before(h.localDeadline()) {
		// The lease's local deadline passed: the hold is lost whether or
		// not its timer has run yet. Without this, an Unlock racing that
		// timer (say, right after the context's own deadline fired)
		// would release or report the loss depending on which ran first.
		h.lose(h.expiredCause.Load())
	}
	ok, lost := h.takeLevel(lv)
	switch {
	case !ok:
		return fmt.Errorf("%w: %q: this level was already unlocked", ErrNotHeld, m.name)
	case lost != nil:
		lv.cancel(lost)
		return fmt.Errorf("%w: %w", ErrNotHeld, lost)
	}
	defer lv.cancel(nil)
	if h.count > 1 {
		r, err := m.runRelease(luascripts.ReleaseArgs{Owner: h.owner, Count: h.count, Sync: m.c.opts.sync()})
		switch {
		case err != nil:
			// Most likely it ran (Redis was reachable a moment ago); if not,
			// the last release finds a count it does not expect, reports
			// ErrNotHeld, and the lock expires within its lease.
			h.count--
			return err
		case r.Status == luascripts.ReleaseNotHeld:
			h.stopKeeper()
			h.lose(fmt.Errorf("%q was found gone at Unlock", m.name))
			return fmt.Errorf("%w: %q was lost before Unlock", ErrNotHeld, m.name)
		}
		h.count = int64(r.Status)
		return nil
	}
	return m.releaseLast(h)
}

// releaseLast releases h's last hold. If another goroutine of this client
// waits for the lock, the release hands it straight over (see gate.go);
// either way the gate's baton passes on.
func (m *Mutex) releaseLast(h *hold) error {
	h.stopKeeper()
	hasBaton, lost := h.end()
	if lost != nil {
		return fmt.Errorf("%w: %w", ErrNotHeld, lost)
	}
	args := luascripts.ReleaseArgs{Owner: h.owner, Count: 1, Wake: m.c.wake, Sync: m.c.opts.sync()}
	var w *gateWaiter
	if hasBaton {
		if w = m.c.chooseHeir(h.g); w != nil {
			args.Heir, args.HeirLease, args.HeirAbout = m.c.newOwner(), m.lease(w.lo), m.c.about
		}
	}
	sent := time.Now()
	r, err := m.runRelease(args)
	h.count = 0
	switch {
	case w != nil:
		b := baton{}
		switch {
		case err == nil && r.Status == luascripts.ReleaseHandedOver:
			b = baton{granted: true, owner: args.Heir, token: r.Token, sent: sent}
		case err != nil:
			// The handover may have happened unseen: the heir takes it back
			// before it contends, with a ReleaseTimeout of its own.
			b = baton{owner: args.Heir}
		}
		m.c.handedOver(h.g, w, b)
	case hasBaton:
		m.c.leaveGate(h.g, m, false)
	}
	if err != nil {
		return err
	}
	if r.Status == luascripts.ReleaseNotHeld {
		return fmt.Errorf("%w: %q was lost before Unlock", ErrNotHeld, m.name)
	}
	if r.Woke {
		m.c.obs.woke(m.metricKind(), m.name, 1)
	}
	return nil
}

// runRelease runs the release script, retrying a call whose reply was lost
// (a connection reset after the send, or no connection at all) until
// ReleaseTimeout, whatever the caller's context does. The script is
// idempotent for a retry (see release.lua).
func (m *Mutex) runRelease(args luascripts.ReleaseArgs) (luascripts.ReleaseReply, error) {
	ctx, cancel := context.WithTimeout(context.Background(), m.c.opts.ReleaseTimeout)
	defer cancel()
	backoff := m.c.opts.SpinBackoffMin
	for {
		r, err := luascripts.RunRelease(ctx, m.c.rc, m.keys, args)
		if err == nil {
			return r, nil
		}
		var notSynced *luascripts.NotReplicatedError
		if errors.As(err, &notSynced) {
			// It ran: r stands. Only a failover now could undo it.
			return r, fmt.Errorf("%w: unlock %q: released on the master, %w: a failover now could bring the hold back until its lease ends", ErrNotReplicated, m.name, notSynced)
		}
		if _, isRedis := rueidis.IsRedisErr(err); isRedis || errors.Is(err, rueidis.ErrClosing) || errors.Is(err, luascripts.ErrUnexpectedReply) || !sleep(ctx, nil, backoff) {
			return r, fmt.Errorf("latchkey: unlock %q: %w (the lock expires within its lease)", m.name, err)
		}
		args.Retry = true
		backoff = min(backoff*2, m.c.opts.SpinBackoffMax)
	}
}

// undo takes back a hold that a call of unknown outcome may have given
// owner: it releases one hold if owner's count is count, the count that
// call would have left, and does nothing if the call never ran.
func (m *Mutex) undo(owner string, count int64) error {
	_, err := m.runRelease(luascripts.ReleaseArgs{Owner: owner, Count: count, Wake: m.c.wake, Retry: true})
	return err
}

// leave takes this client off the lock's wait queue, passing on a
// reservation made for it. It is best effort, bounded by leaveTimeout (or
// a shorter ReleaseTimeout) because a waiter that gives up, and Close,
// wait for it. If Redis cannot be reached the entry stays until the queue
// expires; a release then wakes nobody there (the publish finds no
// subscriber) and the other waiters' TTL-bounded waits cover the rest.
func (m *Mutex) leave() {
	ctx, cancel := context.WithTimeout(context.Background(), min(m.c.opts.ReleaseTimeout, leaveTimeout))
	defer cancel()
	_, _ = luascripts.RunLeave(ctx, m.c.rc, m.keys, m.c.id, m.c.wake)
}

// leaveTimeout bounds the leave script: one round trip, so a second is
// plenty when Redis answers at all.
const leaveTimeout = time.Second

// Token returns the fencing token of the hold that ctx carries, even when
// that hold was lost, or ErrNotHeld when it carries none or was unlocked. Tokens rise strictly from grant to grant of one lock, across
// all clients; re-entries share their grant's token. Pass it with every
// write to a resource the lock protects, and have the resource reject a
// token below the highest it has seen: that is what stops a holder that
// paused past its lease (see docs/safety.md). Token does no I/O.
func (m *Mutex) Token(ctx context.Context) (int64, error) {
	if err := m.checkCtx(ctx); err != nil {
		return 0, err
	}
	lv := m.carried(ctx)
	if lv == nil {
		return 0, fmt.Errorf("%w: %q: the context carries no hold (no fencing token without one)", ErrNotHeld, m.name)
	}
	// A lost hold still has its token: a holder that does not know yet
	// must present it, and the resource refuses it once a newer one wrote.
	if m.c.isDone(lv.h) {
		return 0, fmt.Errorf("%w: %q: the context carries a hold that was unlocked", ErrNotHeld, m.name)
	}
	return lv.h.token, nil
}

// IsLocked reports whether anyone holds the lock.
func (m *Mutex) IsLocked(ctx context.Context) (bool, error) {
	r, err := m.inspect(ctx, "")
	return r.Held, err
}

// HoldCount is the number of holds that the owner ctx carries has on the
// lock, as Redis counts them: 0 when ctx carries no hold or it was lost.
func (m *Mutex) HoldCount(ctx context.Context) (int, error) {
	owner := ""
	if ctx != nil {
		if lv := m.carried(ctx); lv != nil {
			owner = lv.h.owner
		}
	}
	r, err := m.inspect(ctx, owner)
	return int(r.Count), err
}

// TTL is the lock's remaining lease: 0 when it is not locked, and -1ns for
// a key without expiry (not written by latchkey).
func (m *Mutex) TTL(ctx context.Context) (time.Duration, error) {
	r, err := m.inspect(ctx, "")
	switch {
	case err != nil || !r.Held:
		return 0, err
	case r.PTTL < 0:
		return -1, nil
	}
	return r.PTTL, nil
}

func (m *Mutex) inspect(ctx context.Context, owner string) (luascripts.InspectReply, error) {
	if err := m.checkCtx(ctx); err != nil {
		return luascripts.InspectReply{}, err
	}
	if ctx.Err() != nil {
		return luascripts.InspectReply{}, ctxErr(ctx)
	}
	r, err := luascripts.RunInspect(ctx, m.c.rc, m.keys, owner)
	if err != nil {
		return r, fmt.Errorf("latchkey: inspect %q: %w", m.name, err)
	}
	return r, nil
}

func (m *Mutex) checkCtx(ctx context.Context) error { return checkCtx(ctx, m.err) }

func (m *Mutex) check(ctx context.Context, opts []LockOption, try bool) (lockOptions, error) {
	return m.c.checkCall(ctx, m.err, opts, try)
}

func (m *Mutex) lease(lo lockOptions) time.Duration { return m.c.lease(lo) }

// unknownOutcome makes the error of a call that may or may not have
// reached Redis, after undo tried to take its effect back, and tells the
// Logger: Warn when undone, Error when the undo failed too (a hold may
// then stay until its lease ends).
func (c *Client) unknownOutcome(name string, err, undo error) *unknownOutcomeError {
	if l := c.opts.Logger; l != nil {
		if undo != nil {
			l.Error("latchkey: call of unknown outcome could not be undone; a hold may stay until its lease ends", "lock", name, "error", err, "undo_error", undo)
		} else {
			l.Warn("latchkey: call of unknown outcome undone", "lock", name, "error", err)
		}
	}
	return &unknownOutcomeError{name: name, err: err, undo: undo}
}

// unknownOutcomeError is a call that may or may not have reached Redis; it
// has been undone, unless undo says why not.
type unknownOutcomeError struct {
	name string
	err  error
	undo error
}

func (e *unknownOutcomeError) Error() string {
	if e.undo != nil {
		return fmt.Sprintf("latchkey: acquire %q: outcome unknown: %v; the undo failed too (%v): a hold may remain until its lease ends", e.name, e.err, e.undo)
	}
	return fmt.Sprintf("latchkey: acquire %q: outcome unknown, undone: %v", e.name, e.err)
}

func (e *unknownOutcomeError) Unwrap() error { return e.err }

// transient reports whether err is worth retrying: a call whose outcome
// was unknown for a reason other than the caller's context or a closed
// rueidis client.
func transient(ctx context.Context, err error) bool {
	var u *unknownOutcomeError
	return errors.As(err, &u) && ctx.Err() == nil && !errors.Is(err, rueidis.ErrClosing)
}

// sleep waits d, or until ctx or closing (if not nil) ends; it reports
// whether the full d passed.
func sleep(ctx context.Context, closing context.Context, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	var closed <-chan struct{}
	if closing != nil {
		closed = closing.Done()
	}
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
	case <-closed:
	}
	return false
}
