package rlock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/redis/rueidis"

	"github.com/latchkey/latchkey/internal/luascripts"
	"github.com/latchkey/latchkey/notify"
)

// acquire takes the lock for a new owner: it enters the gate (gate.go),
// then, unless the previous local holder handed the lock over, contends in
// Redis until ctx ends or deadline (TryLock; zero for Lock) passes, when it
// returns errBusy. noWait tries once and never waits.
func (m *Mutex) acquire(ctx context.Context, lo lockOptions, deadline time.Time, noWait bool) (context.Context, error) {
	g, b, err := m.c.enter(ctx, m, lo, deadline, noWait)
	if err != nil {
		return nil, err
	}
	if b.granted {
		m.c.contenders.Done()
		return m.grant(ctx, g, b.owner, b.token, b.sent, lo)
	}
	if b.owner != "" {
		m.undoHandover(b.owner)
	}
	if m.spin && g.sub != nil {
		// A pub/sub handle of this client contended before and left its
		// client queued; a poller never queues, so it leaves first.
		m.leave()
		g.sub.Release()
		g.sub = nil
	}
	// First a plain try, unless this client is already subscribed (then it
	// is queued, and a plain try would not keep its place): a free lock
	// needs no subscription, and no watch on Close either, since the one
	// call ends on its own.
	var first *try
	if m.spin || g.sub == nil {
		owner, t, err := m.attempt(ctx, lo, false)
		switch {
		case err == nil && t.Acquired:
			m.c.contenders.Done()
			return m.grant(ctx, g, owner, t.Token, t.sent, lo)
		case err != nil && !transient(ctx, err):
			m.c.leaveGate(g, m, true)
			return nil, ended(ctx, ctx, err)
		case noWait || (!deadline.IsZero() && !time.Now().Before(deadline)):
			m.c.leaveGate(g, m, true)
			return nil, busyOr(err)
		}
		first = &t
	}
	// Close cancels the contender's calls and waits, so that it can take
	// its client off the queue before Close returns.
	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(m.c.closing, func() { cancel(ErrClosed) })
	defer stop()

	owner, t, err := m.contend(cctx, g, lo, deadline, first)
	if err != nil {
		m.c.leaveGate(g, m, true)
		return nil, ended(ctx, cctx, err)
	}
	m.c.dropSub(g)
	m.c.contenders.Done()
	return m.grant(ctx, g, owner, t.Token, t.sent, lo)
}

// grant turns a grant to owner into a hold with its first level.
func (m *Mutex) grant(ctx context.Context, g *gate, owner string, token int64, sent time.Time, lo lockOptions) (context.Context, error) {
	h := m.newHold(g, owner, token, lo)
	if m.c.isClosed() {
		// Close ended every hold's context; this one would be born ended.
		_ = m.releaseLast(h) // a failed release expires within its lease
		return nil, ErrClosed
	}
	if lo.leaseSet {
		h.setLease(sent, lo.lease)
	}
	lctx, err := h.addLevel(ctx)
	h.keep(sent)
	return lctx, err
}

// undoHandover gives back a grant that an unconfirmed handover may have
// made to owner (the release's reply never came), before this waiter
// contends under an owner id of its own. Left alone, that grant would keep
// the lock from everyone until its lease ran out; if the undo fails too,
// it does.
func (m *Mutex) undoHandover(owner string) {
	_ = m.undo(owner, 1)
}

// try is one run of the acquire script, and when it was sent: leases and
// deadlines run from there.
type try struct {
	luascripts.AcquireReply
	sent time.Time
}

// contend is the baton holder's part after a refused first try (first;
// nil when the client was subscribed already and skipped it): wait for a
// wake-up, or poll for spin, between tries until the lock is taken.
func (m *Mutex) contend(ctx context.Context, g *gate, lo lockOptions, deadline time.Time, first *try) (string, try, error) {
	if m.spin {
		return m.spinWait(ctx, lo, deadline, first.PTTL)
	}
	return m.pubsubWait(ctx, g, lo, deadline)
}

// pubsubWait is the notified wait. The protocol that loses no wake-up:
// subscribe and have it confirmed; then, in a loop, take the subscription's
// mark, try to acquire (queueing the client if refused), and wait for a
// message, a change of subscription since the mark, or the holder's
// remaining TTL, whichever comes first. A release after the try finds the
// client queued and publishes a message we will get; a resubscription after
// the try changes the mark; and a message lost anyway costs at most the
// TTL, after which the lock is free or someone else holds it.
func (m *Mutex) pubsubWait(ctx context.Context, g *gate, lo lockOptions, deadline time.Time) (string, try, error) {
	if g.sub == nil {
		sctx := ctx
		if !deadline.IsZero() {
			var cancel context.CancelFunc
			sctx, cancel = context.WithDeadline(ctx, deadline)
			defer cancel()
		}
		sub, err := m.c.hub.Subscribe(sctx, m.inbox)
		if err != nil {
			if ctx.Err() == nil && sctx.Err() != nil {
				return "", try{}, errBusy
			}
			return "", try{}, err
		}
		g.sub = sub
	}
	var lastErr error
	retry := m.c.opts.SpinBackoffMin
	for {
		mark := g.sub.Mark()
		owner, t, err := m.attempt(ctx, lo, true)
		var wait time.Duration
		switch {
		case err == nil && t.Acquired:
			return owner, t, nil
		case err == nil:
			lastErr, retry = nil, m.c.opts.SpinBackoffMin
			wait = ttlBound(t.PTTL)
		case transient(ctx, err):
			// The try may not have run: try again after a short backoff.
			lastErr, wait = err, retry
			retry = min(retry*2, m.c.opts.SpinBackoffMax)
		default:
			return "", t, err
		}
		var open bool
		if wait, open = boundWait(wait, deadline); !open {
			return "", t, busyOr(lastErr)
		}
		m.onWait(lo)
		if _, err := g.sub.Wait(ctx, mark, wait); err != nil {
			return "", t, withLast(err, lastErr)
		}
	}
}

// spinWait polls with exponential backoff and jitter, never sleeping past the
// holder's remaining TTL.
func (m *Mutex) spinWait(ctx context.Context, lo lockOptions, deadline time.Time, pttl time.Duration) (string, try, error) {
	backoff := m.c.opts.SpinBackoffMin
	var lastErr error
	for {
		d := jitter(backoff)
		if lastErr == nil {
			d = min(d, ttlBound(pttl))
		}
		var open bool
		if d, open = boundWait(d, deadline); !open {
			return "", try{}, busyOr(lastErr)
		}
		m.onWait(lo)
		if !sleep(ctx, nil, d) {
			return "", try{}, withLast(context.Cause(ctx), lastErr)
		}
		backoff = min(backoff*2, m.c.opts.SpinBackoffMax)
		owner, t, err := m.attempt(ctx, lo, false)
		switch {
		case err == nil && t.Acquired:
			return owner, t, nil
		case err == nil:
			lastErr, pttl = nil, t.PTTL
		case transient(ctx, err):
			lastErr = err
		default:
			return "", t, err
		}
	}
}

// attempt runs the acquire script once for a new owner id. If the outcome
// is unknown (the connection failed or ctx ended after the command may have
// been sent) it undoes the grant in case it happened, so that no lock is
// left that nobody knows it holds, and returns the error. The next attempt
// uses another owner id, so a grant that arrives after its undo (on another
// connection) is a stranger's, not ours to re-enter.
func (m *Mutex) attempt(ctx context.Context, lo lockOptions, waiter bool) (string, try, error) {
	owner := m.c.newOwner()
	t := try{sent: time.Now()}
	var err error
	t.AcquireReply, err = luascripts.RunAcquire(ctx, m.c.rc, m.keys, luascripts.AcquireArgs{
		Owner: owner, Lease: m.lease(lo), Client: m.c.id, Waiter: waiter, Sync: m.c.opts.sync(), About: m.c.about,
	})
	if hook := m.c.opts.OnAttempt; hook != nil {
		hook(m.name, t.Acquired && err == nil)
	}
	if err != nil && t.Acquired {
		return owner, try{}, m.c.notReplicated(m.name, err, m.undo(owner, 1))
	}
	if err != nil {
		if _, isRedis := rueidis.IsRedisErr(err); !isRedis && !errors.Is(err, luascripts.ErrUnexpectedReply) {
			return owner, t, m.c.unknownOutcome(m.name, err, m.undo(owner, 1))
		}
		return owner, t, fmt.Errorf("latchkey: acquire %q: %w", m.name, err)
	}
	return owner, t, nil
}

func (m *Mutex) onWait(lo lockOptions) {
	lo.obs.waiting()
	if hook := m.c.opts.OnWait; hook != nil {
		hook(m.name)
	}
}

// boundWait cuts a wait d short at deadline (zero: none); it reports false
// when the deadline has passed already.
func boundWait(d time.Duration, deadline time.Time) (time.Duration, bool) {
	if deadline.IsZero() {
		return d, true
	}
	left := time.Until(deadline)
	return min(d, left), left > 0
}

// jitter is equal jitter: half of backoff for sure, half at random, so
// that pollers that collided once drift apart.
func jitter(backoff time.Duration) time.Duration {
	return backoff/2 + rand.N(backoff/2+1)
}

// ttlBound is how long a waiter may wait given the holder's PTTL: the TTL
// itself (plus a millisecond, so that we wake after the expiry, not just
// before it), or a fixed bound for a key without expiry.
func ttlBound(pttl time.Duration) time.Duration {
	if pttl < 0 {
		return DefaultNoExpiryWait
	}
	return pttl + time.Millisecond
}

// ended maps the error that ended a wait to what Lock (or Await) returns:
// ErrClosed when the client closed, the caller's context error when ctx
// ended. cctx is ctx, or ctx with Close's cancellation (cause ErrClosed).
func ended(ctx, cctx context.Context, err error) error {
	switch {
	case errors.Is(err, notify.ErrClosed) || errors.Is(context.Cause(cctx), ErrClosed) && ctx.Err() == nil:
		return ErrClosed
	case ctx.Err() != nil && !errors.Is(err, ctx.Err()):
		return withLast(ctxErr(ctx), err)
	}
	return err
}

func busyOr(lastErr error) error {
	if lastErr != nil {
		return lastErr
	}
	return errBusy
}

// withLast adds the last transient error to the error that ended a wait, so
// that "context deadline exceeded" after a minute of a dead Redis says why.
func withLast(err, last error) error {
	if last == nil || err == nil {
		return err
	}
	return &endedError{err: err, last: last}
}

type endedError struct{ err, last error }

func (e *endedError) Error() string   { return e.err.Error() + " (last error: " + e.last.Error() + ")" }
func (e *endedError) Unwrap() []error { return []error{e.err, e.last} }
