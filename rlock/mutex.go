package rlock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"github.com/latchkey/latchkey/internal/luascripts"
)

// Mutex is a handle on one named, reentrant, distributed lock. Get it from
// Client.Mutex or Client.SpinMutex.
//
// A handle is one owner. Lock through the same handle again and it
// re-enters; so does Lock through any handle of the same Client and name
// when called with a context that an earlier Lock returned. Each Lock needs
// its own Unlock; the lock is released at the last one. Goroutines that must
// exclude each other therefore need handles of their own (they are cheap),
// and must not pass lock contexts to each other. The methods are safe for
// concurrent use.
type Mutex struct {
	c       *Client
	name    string
	key     string
	channel string
	fence   string // the fencing-token counter
	queue   string // the wait queue of clients with waiters
	inbox   string // the channel on which this client's waiters are woken
	owner   string
	spin    bool
	err     error // invalid name, reported by every method
}

// Name is the lock's name.
func (m *Mutex) Name() string { return m.name }

// Key is the Redis key of the lock hash.
func (m *Mutex) Key() string { return m.key }

// Lock blocks until it holds the lock or ctx ends. It returns a context
// derived from ctx that carries the ownership (pass it to nested calls to
// re-enter) and is cancelled when this hold ends: normally by the matching
// Unlock, or with cause ErrLockLost when the lock is lost.
//
// The returned context ends when ctx does, too: a deadline on ctx bounds
// the hold as well as the wait. To bound only the wait, use TryLock with
// WithWait.
//
// Without WithLease the lock's lease is Options.WatchdogTimeout and the
// watchdog renews it until Unlock. With WithLease(d) it expires d after the
// acquire was sent. Transient Redis errors (a dropped connection) are
// retried until ctx ends; errors Redis itself returns end the call.
func (m *Mutex) Lock(ctx context.Context, opts ...LockOption) (context.Context, error) {
	lo, err := m.check(ctx, opts, false)
	if err != nil {
		return nil, err
	}
	return m.acquire(ctx, lo, time.Time{})
}

// TryLock tries once to take the lock; with WithWait(d) it waits up to d.
// It reports false (with a nil error) when the lock stayed busy. On success
// the context is as Lock's. ctx still bounds everything: if it ends first,
// TryLock returns its error.
func (m *Mutex) TryLock(ctx context.Context, opts ...LockOption) (context.Context, bool, error) {
	lo, err := m.check(ctx, opts, true)
	if err != nil {
		return nil, false, err
	}
	deadline := time.Now().Add(lo.wait)
	lctx, err := m.acquire(ctx, lo, deadline)
	if errors.Is(err, errBusy) {
		return nil, false, nil
	}
	return lctx, err == nil, err
}

// errBusy ends a TryLock whose wait ran out.
var errBusy = errors.New("busy")

// Unlock releases one hold: the innermost Lock of the owner that ctx carries
// (a context returned by Lock) or else of this handle. The lock itself is
// released, and one waiter woken, at the last hold. It returns ErrNotHeld
// when that owner holds no lock, changing nothing. Unlock ignores ctx's
// cancellation, so `defer m.Unlock(lctx)` works even when lctx has ended; its
// Redis call is bounded by Options.ReleaseTimeout instead. If that call fails
// the hold still ends locally and the lock expires within its lease.
func (m *Mutex) Unlock(ctx context.Context) error {
	if err := m.checkCtx(ctx); err != nil {
		return err
	}
	owner := m.ownerFor(ctx)
	hk := holdKey{m.key, owner}
	lv, wd, last := m.c.popLevel(hk)
	if wd != nil {
		// Stop renewing before releasing: a renewal that found the key
		// just deleted would otherwise report a loss for a normal release.
		wd.Stop()
	}
	if lv != nil {
		defer lv.cancel(nil)
	}

	var token int64
	if lv != nil {
		token = lv.token
	}
	// After the loss signal nothing is held here any more, so a retried
	// release that finds nothing held did not release anything either.
	held := !(lv == nil && errors.Is(context.Cause(ctx), ErrLockLost))
	status, err := m.releaseHold(ctx, owner, token, last, held)
	if err != nil {
		return err
	}
	if status == luascripts.ReleaseNotHeld {
		m.c.dropHold(hk, m.name)
		if lv != nil {
			return fmt.Errorf("%w: %q was lost before Unlock", ErrNotHeld, m.name)
		}
		return fmt.Errorf("%w: %q", ErrNotHeld, m.name)
	}
	return nil
}

// releaseHold releases one hold of owner (of grant token, 0 if unknown).
// At the hold's last level (last), if another goroutine of this client waits
// for the lock, the release hands the lock over to it (see heirs.go).
func (m *Mutex) releaseHold(ctx context.Context, owner string, token int64, last, held bool) (luascripts.ReleaseStatus, error) {
	var h *heir
	var yield bool
	if last {
		h, yield = m.c.promiseHeir(m.key)
	}
	r, sent, err := m.release(ctx, owner, token, h, yield, held)
	switch {
	case h != nil && err == nil && r.Status == luascripts.ReleaseHandedOver:
		m.c.tell(h, handover{handed: true, token: r.Token, sent: sent})
		return luascripts.Released, nil
	case h != nil:
		m.c.tell(h, handover{unknown: err != nil})
	case err == nil && r.Status == luascripts.Released:
		m.c.resetStreak(m.key)
	}
	return r.Status, err
}

// release runs the release script for one hold of owner. A retry of a call
// whose reply was lost carries the same release id and grant token, so it
// neither drops a second hold nor touches a newer grant; and when the
// caller believed it held the lock (held), a retry that finds the hold gone
// means the first call did release it. sent is when the first call was
// sent: a handed-over lease runs from there.
func (m *Mutex) release(ctx context.Context, owner string, token int64, h *heir, yield, held bool) (r luascripts.ReleaseReply, sent time.Time, err error) {
	tok, heirOwner, heirLease, yieldArg := "", "", "0", ""
	if token > 0 {
		tok = strconv.FormatInt(token, 10)
	}
	if h != nil {
		heirOwner, heirLease = h.owner, luascripts.Millis(h.m.lease(h.lo))
	}
	if yield {
		yieldArg = "y"
	}
	args := []string{owner, m.c.notifyArg, "0", "", strconv.FormatUint(m.c.rid.Add(1), 10), m.c.handoffArg,
		heirOwner, heirLease, yieldArg, m.c.id, "0"}
	sent = time.Now()
	v, retried, err := m.runRelease(ctx, args, tok)
	if err != nil {
		return r, sent, fmt.Errorf("latchkey: unlock %q: %w (the lock expires within its lease)", m.name, err)
	}
	r, err = luascripts.ParseRelease(v)
	if err == nil && retried && held && r.Status == luascripts.ReleaseNotHeld {
		r.Status = luascripts.Released
	}
	return r, sent, err
}

// runRelease runs the release script with args, retrying a call whose reply
// was lost (a connection reset after the send, or no connection at all)
// until ReleaseTimeout, whatever ctx does. Retries are marked as such and
// carry token (see release.lua). retried reports that an earlier call may
// have run.
func (m *Mutex) runRelease(ctx context.Context, args []string, token string) (v []int64, retried bool, err error) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.c.opts.ReleaseTimeout)
	defer cancel()
	keys := []string{m.key, m.channel, m.fence, m.queue}
	backoff := m.c.opts.SpinBackoffMin
	for ; ; retried = true {
		if retried {
			args[3], args[10] = token, "1"
		}
		v, err = luascripts.Release.Exec(rctx, m.c.rc, keys, args).AsIntSlice()
		if err == nil {
			return v, retried, nil
		}
		if _, isRedis := rueidis.IsRedisErr(err); isRedis || errors.Is(err, rueidis.ErrClosing) {
			return nil, retried, err
		}
		timer := time.NewTimer(backoff)
		select {
		case <-timer.C:
		case <-rctx.Done():
			timer.Stop()
			return nil, retried, err
		}
		backoff = min(backoff*2, m.c.opts.SpinBackoffMax)
	}
}

// Token returns the fencing token of the hold that the owner ctx carries (or
// else this handle) has on the lock, or ErrNotHeld. Tokens rise strictly
// from grant to grant of one lock, across all clients; re-entries share
// their grant's token. Pass it with every write to a resource the lock
// protects, and have the resource reject a token below the highest it has
// seen: that is what stops a holder that paused past its lease (see
// docs/safety.md). Token does no I/O.
func (m *Mutex) Token(ctx context.Context) (int64, error) {
	if err := m.checkCtx(ctx); err != nil {
		return 0, err
	}
	if t := m.c.token(holdKey{m.key, m.ownerFor(ctx)}); t > 0 {
		return t, nil
	}
	return 0, fmt.Errorf("%w: %q (no fencing token without a hold)", ErrNotHeld, m.name)
}

// IsLocked reports whether anyone holds the lock.
func (m *Mutex) IsLocked(ctx context.Context) (bool, error) {
	r, err := m.inspect(ctx)
	return r.Held, err
}

// HoldCount is the number of holds that the owner ctx carries (or else this
// handle) has on the lock, as Redis counts them: 0 when it holds none.
func (m *Mutex) HoldCount(ctx context.Context) (int, error) {
	r, err := m.inspect(ctx)
	return int(r.Count), err
}

// TTL is the lock's remaining lease: 0 when it is not locked, and -1ns for
// a key without expiry (not written by latchkey).
func (m *Mutex) TTL(ctx context.Context) (time.Duration, error) {
	r, err := m.inspect(ctx)
	switch {
	case err != nil || !r.Held:
		return 0, err
	case r.PTTL < 0:
		return -1, nil
	}
	return r.PTTL, nil
}

func (m *Mutex) inspect(ctx context.Context) (luascripts.InspectReply, error) {
	if err := m.checkCtx(ctx); err != nil {
		return luascripts.InspectReply{}, err
	}
	if ctx.Err() != nil {
		return luascripts.InspectReply{}, ctxErr(ctx)
	}
	v, err := luascripts.Inspect.Exec(ctx, m.c.rc, []string{m.key}, []string{m.ownerFor(ctx)}).AsIntSlice()
	if err != nil {
		return luascripts.InspectReply{}, fmt.Errorf("latchkey: inspect %q: %w", m.name, err)
	}
	return luascripts.ParseInspect(v)
}

func (m *Mutex) checkCtx(ctx context.Context) error {
	if ctx == nil {
		return fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	return m.err
}

func (m *Mutex) check(ctx context.Context, opts []LockOption, try bool) (lockOptions, error) {
	if err := m.checkCtx(ctx); err != nil {
		return lockOptions{}, err
	}
	lo, err := buildLockOptions(opts, try)
	if err != nil {
		return lo, err
	}
	if m.c.isClosed() {
		return lo, ErrClosed
	}
	if ctx.Err() != nil {
		return lo, ctxErr(ctx)
	}
	return lo, nil
}

func (m *Mutex) ownerFor(ctx context.Context) string {
	if owner, ok := ctx.Value(ownerKey{m.c, m.key}).(string); ok {
		return owner
	}
	return m.owner
}

func (m *Mutex) lease(lo lockOptions) time.Duration {
	if lo.leaseSet {
		return lo.lease
	}
	return m.c.wd.Options().Timeout
}

// try is one run of the acquire script with what grant needs to know.
type try struct {
	luascripts.AcquireReply
	sent time.Time // when the script was sent: leases and deadlines run from here
	held int64     // the owner's local hold count when it was sent
}

// queueing says whether an attempt is made by a waiter who will wait for a
// wake-up (its client is then queued if refused), and whether others of its
// client wait too (its client is then queued again if it acquires).
type queueing struct{ waiting, others bool }

// attempt runs the acquire script once. If the outcome is unknown (the
// connection failed or ctx ended after the command may have been sent) it
// undoes the acquisition in case it happened, so no lock is left that
// nobody knows it holds, and returns the error.
func (m *Mutex) attempt(ctx context.Context, owner string, lo lockOptions, q queueing) (try, error) {
	t := try{held: m.c.heldCount(holdKey{m.key, owner}), sent: time.Now()}
	flags := ""
	switch {
	case q.waiting && q.others:
		flags = "wr"
	case q.waiting:
		flags = "w"
	}
	keys := []string{m.key, m.fence, m.queue}
	v, err := luascripts.Acquire.Exec(ctx, m.c.rc, keys, []string{owner, luascripts.Millis(m.lease(lo)), m.c.id, flags}).AsIntSlice()
	if err == nil {
		t.AcquireReply, err = luascripts.ParseAcquire(v)
	}
	if hook := m.c.opts.OnAttempt; hook != nil {
		hook(m.name, t.Acquired)
	}
	if err != nil {
		if _, isRedis := rueidis.IsRedisErr(err); !isRedis && !errors.Is(err, luascripts.ErrUnexpectedReply) {
			m.undo(owner, t.held+1)
			return t, &unknownOutcomeError{name: m.name, err: err}
		}
		return t, fmt.Errorf("latchkey: acquire %q: %w", m.name, err)
	}
	return t, nil
}

// undo releases owner's hold if, and only if, its count is exactly count:
// that is the state an acquisition we cannot confirm would have left.
func (m *Mutex) undo(owner string, count int64) {
	args := []string{owner, m.c.notifyArg, strconv.FormatInt(count, 10), "", "", m.c.handoffArg, "", "0", "", m.c.id, "0"}
	_, _, _ = m.runRelease(context.Background(), args, "")
}

// unknownOutcomeError is an acquire that may or may not have reached Redis;
// it has been undone. Lock retries it while ctx lasts.
type unknownOutcomeError struct {
	name string
	err  error
}

func (e *unknownOutcomeError) Error() string {
	return fmt.Sprintf("latchkey: acquire %q: outcome unknown, undone: %v", e.name, e.err)
}

func (e *unknownOutcomeError) Unwrap() error { return e.err }

// transient reports whether err is worth retrying: an acquire whose outcome
// was unknown for a reason other than the caller's context or a closed
// rueidis client.
func transient(ctx context.Context, err error) bool {
	var u *unknownOutcomeError
	return errors.As(err, &u) && ctx.Err() == nil && !errors.Is(err, rueidis.ErrClosing)
}
