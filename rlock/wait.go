package rlock

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/latchkey/latchkey/internal/luascripts"
	"github.com/latchkey/latchkey/notify"
)

// acquire takes the lock for the owner ctx carries (or the handle's),
// waiting until ctx ends (deadline zero) or until deadline (TryLock), in
// which case it returns errBusy.
func (m *Mutex) acquire(ctx context.Context, lo lockOptions, deadline time.Time) (context.Context, error) {
	owner := m.ownerFor(ctx)
	if !m.spin && deadline.IsZero() {
		// Others in this process already wait on this lock: the lock is
		// very likely busy, so join them without the usual first try.
		if sub := m.c.hub.Join(m.inbox); sub != nil {
			return m.pubsubLoop(ctx, sub, owner, lo, deadline, true)
		}
	}
	r, err := m.attempt(ctx, owner, lo, queueing{})
	switch {
	case err == nil && r.Acquired:
		return m.c.grant(ctx, m, owner, r, lo)
	case err != nil && !transient(ctx, err):
		return nil, m.ended(ctx, err)
	case !deadline.IsZero() && !time.Now().Before(deadline):
		if err != nil {
			return nil, err
		}
		return nil, errBusy
	}
	if m.spin {
		return m.spinWait(ctx, owner, lo, deadline, r.PTTL)
	}
	return m.pubsubWait(ctx, owner, lo, deadline)
}

// pubsubWait is the notified wait. The protocol that loses no wake-up:
// subscribe and have it confirmed; then, in a loop, take the subscription's
// mark, try to acquire, and wait for a message, a change of subscription
// since the mark, or the holder's remaining TTL, whichever comes first. An
// unlock after the try publishes a message we will get; a resubscription
// after the try changes the mark; and a message that is lost anyway costs at
// most the TTL, after which the lock is free or someone else holds it.
func (m *Mutex) pubsubWait(ctx context.Context, owner string, lo lockOptions, deadline time.Time) (context.Context, error) {
	sctx := ctx
	if !deadline.IsZero() {
		var cancel context.CancelFunc
		sctx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	sub, err := m.c.hub.Subscribe(sctx, m.inbox)
	if err != nil {
		if ctx.Err() == nil && sctx.Err() != nil {
			return nil, errBusy
		}
		return nil, m.ended(ctx, err)
	}
	return m.pubsubLoop(ctx, sub, owner, lo, deadline, false)
}

// pubsubLoop is pubsubWait after the subscription is confirmed; it releases
// sub. A waiter that joined others of its client (joined) first sleeps until
// the holder's lease ends as they last saw it, without a try: while a client
// has waiters, it is in the lock's queue, or one of its waiters is trying
// and will queue it again if it acquires with others left (see won).
func (m *Mutex) pubsubLoop(ctx context.Context, sub *notify.Subscription, owner string, lo lockOptions, deadline time.Time, joined bool) (lctx context.Context, err error) {
	released := false
	h := m.c.addHeir(ctx, m, owner, lo)
	defer func() {
		switch res := m.c.removeHeir(h); {
		case res.handed && err != nil:
			// Handed the lock as we gave up: pass it on (or release it).
			_, _ = m.releaseHold(context.Background(), owner, res.token, true, true)
		case res.unknown && err != nil:
			m.undoHandover(owner)
		}
		if !released {
			sub.Release()
		}
	}()

	var (
		lastErr error
		woken   bool // the last Wait took a message meant for one waiter
		retry   = m.c.opts.SpinBackoffMin
	)
	if joined {
		mark := sub.Mark()
		if wait := time.Until(sub.Hint()); wait > 0 && (deadline.IsZero() || time.Until(deadline) > wait) {
			m.c.beginWait(h)
			m.onWait()
			wake, err := sub.WaitFor(ctx, mark, wait, h.signal)
			if err != nil {
				return nil, m.ended(ctx, err)
			}
			woken = m.woke(h, wake)
		}
	}
	for {
		mark := sub.Mark()
		if !m.c.beginTry(h) {
			// An Unlock of this client is handing the lock to us.
			res := m.c.takeOutcome(h)
			if res.handed {
				released = true
				return m.inherit(ctx, sub, owner, res, lo)
			}
			if res.unknown {
				m.undoHandover(owner)
			}
			continue
		}
		others := sub.Waiters() > 1
		r, err := m.attempt(ctx, owner, lo, queueing{waiting: true, others: others})
		var wait time.Duration
		switch {
		case err == nil && r.Acquired:
			released = true
			return m.won(ctx, sub, owner, r, lo, others)
		case err == nil:
			if r.PTTL >= 0 {
				sub.SetHint(r.sent.Add(r.PTTL))
			}
			woken, lastErr, retry = false, nil, m.c.opts.SpinBackoffMin
			wait = m.ttlBound(r.PTTL)
		case transient(ctx, err):
			// The acquire may not have run; a wake-up we took is passed
			// on below, and we try again after a short backoff.
			lastErr, wait = err, retry
			retry = min(retry*2, m.c.opts.SpinBackoffMax)
		default:
			if woken {
				m.passOn(sub)
			}
			return nil, m.ended(ctx, err)
		}
		if !deadline.IsZero() {
			left := time.Until(deadline)
			if left <= 0 {
				if woken {
					m.passOn(sub)
				}
				return nil, busyOr(lastErr)
			}
			wait = min(wait, left)
		}
		if woken {
			// The message we took was for a try that could not run.
			sub.PassOn()
		}
		m.c.beginWait(h)
		m.onWait()
		wake, err := sub.WaitFor(ctx, mark, wait, h.signal)
		if err != nil {
			return nil, m.ended(ctx, withLast(err, lastErr))
		}
		woken = m.woke(h, wake)
	}
}

// woke interprets a Wait's result: whether it took a wake-up meant for one
// waiter. A handover's signal is put back for the loop's top to take with
// its outcome.
func (m *Mutex) woke(h *heir, wake notify.Wake) bool {
	if wake == notify.Signalled {
		h.signal <- struct{}{}
	}
	return wake == notify.WokenOne
}

// inherit is a pub/sub waiter handed the lock by an Unlock of its client:
// a grant like any other, leased from when that release was sent.
func (m *Mutex) inherit(ctx context.Context, sub *notify.Subscription, owner string, res handover, lo lockOptions) (context.Context, error) {
	sub.Release()
	t := try{AcquireReply: luascripts.AcquireReply{Acquired: true, Count: 1, Token: res.token}, sent: res.sent, held: m.c.heldCount(holdKey{m.key, owner})}
	return m.c.grant(ctx, m, owner, t, lo)
}

// undoHandover gives back a hold that a release whose reply never came may
// have handed to owner: owner was waiting, so a hold of exactly one more
// than it knows of can only be that handover. Left alone, owner's next try
// would re-enter it, and the lock would outlive owner's last Unlock by a
// lease; an acquire whose outcome is unknown is undone the same way.
func (m *Mutex) undoHandover(owner string) {
	m.undo(owner, m.c.heldCount(holdKey{m.key, owner})+1)
}

// won is a pub/sub waiter's successful try: it leaves the subscription and,
// if waiters of its client joined after the try was sent (which did not ask
// for the client to be queued again), queues the client for them.
func (m *Mutex) won(ctx context.Context, sub *notify.Subscription, owner string, r try, lo lockOptions, requeued bool) (context.Context, error) {
	if sub.Leave() > 0 && !requeued {
		qctx, cancel := context.WithTimeout(context.Background(), m.c.opts.ReleaseTimeout)
		ttl := luascripts.Millis(m.lease(lo) + queueSlack)
		_ = luascripts.Enqueue.Exec(qctx, m.c.rc, []string{m.queue}, []string{m.c.id, ttl}).Error()
		cancel()
	}
	return m.c.grant(ctx, m, owner, r, lo)
}

// queueSlack is how much longer than a lease a wait queue is kept (the
// scripts use the same figure).
const queueSlack = 10 * time.Second

// passOn gives up a wake-up this waiter took without acting on it: to
// another waiter of this client, or, when it is the client's last, to the
// next waiting client, so that the release's one wake-up is not lost. The
// wake-up of a waiter whose context ended as the message came is lost all
// the same; the others' TTL-bounded waits cover that.
func (m *Mutex) passOn(sub *notify.Subscription) {
	if sub.Waiters() > 1 {
		sub.PassOn()
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), m.c.opts.ReleaseTimeout)
	defer cancel()
	_ = luascripts.Pass.Exec(ctx, m.c.rc, []string{m.key, m.channel, m.queue}, []string{m.c.notifyArg, m.c.id, m.c.handoffArg}).Error()
}

// spinWait polls with exponential backoff and jitter, never sleeping past the
// holder's remaining TTL.
func (m *Mutex) spinWait(ctx context.Context, owner string, lo lockOptions, deadline time.Time, pttl time.Duration) (context.Context, error) {
	backoff := m.c.opts.SpinBackoffMin
	var lastErr error
	for {
		// Equal jitter: half the backoff for sure, half at random, so that
		// pollers that collided once drift apart.
		sleep := backoff/2 + rand.N(backoff/2+1)
		if lastErr == nil {
			sleep = min(sleep, m.ttlBound(pttl))
		}
		if !deadline.IsZero() {
			left := time.Until(deadline)
			if left <= 0 {
				return nil, busyOr(lastErr)
			}
			sleep = min(sleep, left)
		}
		m.onWait()
		timer := time.NewTimer(sleep)
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return nil, m.ended(ctx, withLast(ctxErr(ctx), lastErr))
		case <-m.c.done:
			timer.Stop()
			return nil, ErrClosed
		}
		backoff = min(backoff*2, m.c.opts.SpinBackoffMax)
		r, err := m.attempt(ctx, owner, lo, queueing{})
		switch {
		case err == nil && r.Acquired:
			return m.c.grant(ctx, m, owner, r, lo)
		case err == nil:
			lastErr, pttl = nil, r.PTTL
		case transient(ctx, err):
			lastErr = err
		default:
			return nil, m.ended(ctx, err)
		}
	}
}

func (m *Mutex) onWait() {
	if hook := m.c.opts.OnWait; hook != nil {
		hook(m.name)
	}
}

// ttlBound is how long a waiter may wait given the holder's PTTL: the TTL
// itself (plus a millisecond, so that we wake after the expiry, not just
// before it), or a fixed bound for a key without expiry.
func (m *Mutex) ttlBound(pttl time.Duration) time.Duration {
	if pttl < 0 {
		return DefaultNoExpiryWait
	}
	return pttl + time.Millisecond
}

// ended maps the error that ended a wait to what Lock returns: the context's
// error when ctx ended, ErrClosed when the client closed.
func (m *Mutex) ended(ctx context.Context, err error) error {
	switch {
	case errors.Is(err, notify.ErrClosed) || (m.c.isClosed() && ctx.Err() == nil):
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
