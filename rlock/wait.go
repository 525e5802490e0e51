package rlock

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

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
		if sub := m.c.hub.Join(m.channel); sub != nil {
			return m.pubsubLoop(ctx, sub, owner, lo, deadline)
		}
	}
	r, err := m.attempt(ctx, owner, lo)
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
	sub, err := m.c.hub.Subscribe(sctx, m.channel)
	if err != nil {
		if ctx.Err() == nil && sctx.Err() != nil {
			return nil, errBusy
		}
		return nil, m.ended(ctx, err)
	}
	return m.pubsubLoop(ctx, sub, owner, lo, deadline)
}

// pubsubLoop is pubsubWait after the subscription is confirmed; it releases sub.
func (m *Mutex) pubsubLoop(ctx context.Context, sub *notify.Subscription, owner string, lo lockOptions, deadline time.Time) (context.Context, error) {
	defer sub.Release()

	var (
		lastErr error
		woken   bool // the last Wait took a message meant for one waiter
		retry   = m.c.opts.SpinBackoffMin
	)
	for {
		mark := sub.Mark()
		r, err := m.attempt(ctx, owner, lo)
		var wait time.Duration
		switch {
		case err == nil && r.Acquired:
			return m.c.grant(ctx, m, owner, r, lo)
		case err == nil:
			woken, lastErr, retry = false, nil, m.c.opts.SpinBackoffMin
			wait = m.ttlBound(r.PTTL)
		case transient(ctx, err):
			// The acquire may not have run; a wake-up we took is passed
			// on below, and we try again after a short backoff.
			lastErr, wait = err, retry
			retry = min(retry*2, m.c.opts.SpinBackoffMax)
		default:
			if woken {
				sub.PassOn()
			}
			return nil, m.ended(ctx, err)
		}
		if !deadline.IsZero() {
			left := time.Until(deadline)
			if left <= 0 {
				if woken {
					sub.PassOn()
				}
				return nil, busyOr(lastErr)
			}
			wait = min(wait, left)
		}
		if woken {
			// The message we took was for a try that could not run.
			sub.PassOn()
		}
		wake, err := sub.Wait(ctx, mark, wait)
		if err != nil {
			return nil, m.ended(ctx, withLast(err, lastErr))
		}
		woken = wake == notify.WokenOne
	}
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
		r, err := m.attempt(ctx, owner, lo)
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
