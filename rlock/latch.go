package rlock

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/latchkey/latchkey/internal/luascripts"
	"github.com/latchkey/latchkey/notify"
)

// latchZeroMargin is how much longer than its setter's retries a latch's
// zero is kept: for the last retry, sent before their end, to reach Redis.
const latchZeroMargin = time.Second

// LatchRecheck bounds how long an Await sleeps without reading its latch
// again: not a poll, but a net for a broadcast Redis drops without ending
// the subscription (a publish lost in a failover).
const LatchRecheck = time.Minute

// CountDownLatch is a handle on one named, distributed count-down latch:
// TrySetCount gives it a count, every CountDown takes one off, and every
// Await, in any process, returns once the count reaches zero, which ends
// the round so that the latch can be set again. Get it from
// Client.CountDownLatch; handles are safe for concurrent use. A latch has
// no owner and, while set, no expiry; its zero stays in Redis for the
// setter's ReleaseTimeout and a second (see TrySetCount), then goes.
type CountDownLatch struct {
	c    *Client
	name string
	keys luascripts.LatchKeys
	err  error // invalid name, reported by every method
}

// CountDownLatch returns a handle on the count-down latch called name.
// Names are Mutex's (a Mutex of the same name is another object).
func (c *Client) CountDownLatch(name string) *CountDownLatch {
	keys, err := lockKeys(c.opts.Prefix, name)
	if err == nil {
		err = c.latchkeyOnly("CountDownLatch")
	}
	return &CountDownLatch{c: c, name: name, keys: luascripts.NewLatchKeys(keys.Lock), err: err}
}

// Name is the latch's name.
func (l *CountDownLatch) Name() string { return l.name }

// TrySetCount gives the latch the count n (> 0, else ErrInvalidArgument)
// and starts a new round, if the latch is not set (absent, or counted down
// to zero). It reports false, changing nothing, when a count is set already.
// A call whose reply is lost is sent again, as the same call, until
// Options.ReleaseTimeout after it was first sent: an error then means the
// count may be set. A retry finds its round even if the count reached zero
// meanwhile (and reports true, setting nothing): the zero is kept that
// long, and a second more.
func (l *CountDownLatch) TrySetCount(ctx context.Context, n int64) (bool, error) {
	if err := ready(ctx, l.err); err != nil {
		return false, err
	}
	if n <= 0 {
		return false, fmt.Errorf("%w: latch count %d must be positive", ErrInvalidArgument, n)
	}
	// The round id tells an Await that the latch was set again after its zero.
	round, err := uuid.NewRandom()
	if err != nil {
		return false, fmt.Errorf("latchkey: latch %q: generating the round id: %w", l.name, err)
	}
	// The retries end ReleaseTimeout after the first call is sent; the
	// round's zero, which comes after that call ran, is kept longer.
	deadline, keep := time.Now().Add(l.c.opts.ReleaseTimeout), l.c.opts.ReleaseTimeout+latchZeroMargin
	ok, err := luascripts.RunLatchSet(ctx, l.c.rc, l.keys, n, round.String(), keep)
	if luascripts.Classify(err) == luascripts.Unknown {
		// It may have run: the same round id makes a retry report its own
		// count as set, where a new call would say false, and its zero
		// as its own, where a new call would set the count again.
		rctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline)
		defer cancel()
		retry := retryBackoff()
		for luascripts.Classify(err) == luascripts.Unknown && retry.Sleep(rctx) {
			ok, err = luascripts.RunLatchSet(rctx, l.c.rc, l.keys, n, round.String(), keep)
		}
	}
	if err != nil {
		return false, fmt.Errorf("latchkey: set count of latch %q: %w", l.name, err)
	}
	return ok, nil
}

// CountDown takes one off the latch's count; the call that reaches zero
// wakes every Await with one message. On a latch that is not set it does
// nothing, as Java's does. A CountDown whose reply is lost is not retried,
// since a second run could count one too many: an error other than
// Redis' own refusal means it may have counted.
func (l *CountDownLatch) CountDown(ctx context.Context) error {
	if err := ready(ctx, l.err); err != nil {
		return err
	}
	st, err := luascripts.RunLatchCountDown(ctx, l.c.rc, l.keys, l.c.wake.Sharded, notify.WakeAllPayload)
	if err != nil {
		return fmt.Errorf("latchkey: count down latch %q: %w", l.name, err)
	}
	if st == luascripts.CountDownWoke {
		l.c.obs.add(wakeups, kindCountDownLatch, l.name, 1, plain)
	}
	return nil
}

// Count is the latch's count: 0 when it is not set.
func (l *CountDownLatch) Count(ctx context.Context) (int64, error) {
	if err := ready(ctx, l.err); err != nil {
		return 0, err
	}
	st, err := l.read(ctx)
	return st.Count, err
}

// Await blocks until the round of the latch it found ends (nil, even if
// the latch was set again since; at once when it is not set), ctx ends
// (its error), or the client closes (ErrClosed). It waits on pub/sub, and
// retries transient Redis errors until ctx ends.
func (l *CountDownLatch) Await(ctx context.Context) (err error) {
	if err := ready(ctx, l.err); err != nil {
		return err
	}
	if l.c.isClosed() {
		return ErrClosed
	}
	obs := l.c.obs.begin(ctx, kindCountDownLatch, l.name)
	defer func() { obs.endWait(ctx, err) }()
	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer context.AfterFunc(l.c.closing, func() { cancel(ErrClosed) })()

	// A latch that is not set needs no subscription; a failed read is
	// retried below.
	st, err := l.read(cctx)
	switch {
	case err == nil && st.Count == 0:
		return nil
	case err != nil && !l.retryable(cctx, err):
		return ended(ctx, cctx, err)
	}
	round, known := st.Round, err == nil

	sub, err := l.c.subscribe(cctx, l.keys.Channel, time.Time{}, nil)
	if err != nil {
		return ended(ctx, cctx, fmt.Errorf("latchkey: await latch %q: %w", l.name, err))
	}
	defer sub.Release()
	var lastErr error
	retry := retryBackoff()
	for {
		// The mark comes before the read, so a zero after the read wakes Wait.
		mark := sub.Mark()
		st, err := l.read(cctx)
		wait := LatchRecheck
		switch {
		case err == nil && (st.Count == 0 || known && st.Round != round): // zero, or a new round
			return nil
		case err == nil:
			lastErr = nil
			retry.Reset()
			if !known {
				round, known = st.Round, true
			}
		case l.retryable(cctx, err):
			lastErr, wait = err, retry.Next()
		default:
			return ended(ctx, cctx, err)
		}
		l.c.onWait(obs, l.name)
		if _, err := sub.Wait(cctx, mark, wait); err != nil {
			return ended(ctx, cctx, withLast(err, lastErr))
		}
	}
}

func (l *CountDownLatch) read(ctx context.Context) (luascripts.LatchState, error) {
	st, err := luascripts.ReadLatch(ctx, l.c.rc, l.keys)
	if err != nil {
		return st, fmt.Errorf("latchkey: read latch %q: %w", l.name, err)
	}
	return st, nil
}

// retryable: the call may clear (retried), and the caller still waits.
func (l *CountDownLatch) retryable(ctx context.Context, err error) bool {
	return ctx.Err() == nil && retried(err)
}
