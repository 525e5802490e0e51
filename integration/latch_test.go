package integration

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/rlock"
)

// latchKey is the Redis key of the latch called name, with the default prefix.
func latchKey(name string) string { return "latchkey:{" + name + "}:latch" }

// requireLatchZero asserts that the latch called name is at zero: not set,
// kept only for its setter's retries (a default ReleaseTimeout and a
// second at most), then gone.
func requireLatchZero(t *testing.T, rc rueidis.Client, name string) {
	t.Helper()
	key := latchKey(name)
	count, err := rc.Do(context.Background(), rc.B().Hget().Key(key).Field("count").Build()).ToString()
	require.NoError(t, err, "the latch's zero")
	require.Equal(t, "0", count, "the latch's zero")
	ttl, err := rc.Do(context.Background(), rc.B().Pttl().Key(key).Build()).AsInt64()
	require.NoError(t, err)
	require.Positive(t, ttl, "the latch's zero expires")
	require.LessOrEqual(t, time.Duration(ttl)*time.Millisecond, rlock.DefaultReleaseTimeout+time.Second, "the latch's zero expires")
}

// awaitResult is what an awaiting goroutine reports: its error, and the
// count the test had not yet counted down when Await returned.
type awaitResult struct {
	err  error
	left int64
}

// startAwaiters starts n goroutines per latch handle (each handle of a
// client made with att.options), each calling Await once and reporting on
// the returned channel, and returns once all of them sleep. left is read
// when an Await returns; nil for none.
func startAwaiters(t *testing.T, ctx context.Context, att *attempts, latches []*rlock.CountDownLatch, n int, left *atomic.Int64) <-chan awaitResult {
	t.Helper()
	name := latches[0].Name()
	base := att.count(waitKey(name))
	results := make(chan awaitResult, n*len(latches))
	for _, l := range latches {
		for range n {
			go func() {
				err := l.Await(ctx)
				r := awaitResult{err: err}
				if left != nil {
					r.left = left.Load()
				}
				results <- r
			}()
		}
	}
	await(t, att.reached(waitKey(name), base+n*len(latches)), 20*time.Second, "every Await to sleep")
	return results
}

// collect returns n results, failing the test if they take longer than d.
func collect(t *testing.T, results <-chan awaitResult, n int, d time.Duration, what string) []awaitResult {
	t.Helper()
	out := make([]awaitResult, 0, n)
	timer := time.NewTimer(d)
	defer timer.Stop()
	for range n {
		select {
		case r := <-results:
			out = append(out, r)
		case <-timer.C:
			t.Fatalf("after %v, %d of %d awaiters returned: %s", d, len(out), n, what)
		}
	}
	return out
}

// twoClients returns handles on one new latch in two clients (two
// processes) made with att.options.
func twoClients(t *testing.T, tp topology, att *attempts) (l1, l2 *rlock.CountDownLatch) {
	t.Helper()
	name := lockName(t)
	return lockClient(t, tp, att.options(rlock.Options{})).CountDownLatch(name),
		lockClient(t, tp, att.options(rlock.Options{})).CountDownLatch(name)
}

// setCount sets l's count to n, failing the test unless it was not set.
func setCount(t *testing.T, ctx context.Context, l *rlock.CountDownLatch, n int64) {
	t.Helper()
	ok, err := l.TrySetCount(ctx, n)
	require.NoError(t, err)
	require.True(t, ok, "latch %q was set already", l.Name())
}

// TestLatchWakesEveryWaiter: awaiters in two clients (two processes) all
// return after the last CountDown and not before; counting down below zero
// sleeps nobody's wait; a count-down that does not reach zero wakes nobody;
// zero deletes the latch, which can then be set again.
func TestLatchWakesEveryWaiter(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		att := newAttempts()
		l1, l2 := twoClients(t, tp, att)
		name := l1.Name()
		rc := redisClient(t, tp)

		const count, perClient = 3, 4
		setCount(t, ctx, l1, count)
		for _, l := range []*rlock.CountDownLatch{l1, l2} {
			ok, err := l.TrySetCount(ctx, 5)
			require.NoError(t, err)
			require.False(t, ok, "a set latch was set again")
			n, err := l.Count(ctx)
			require.NoError(t, err)
			require.EqualValues(t, count, n)
		}

		var left atomic.Int64
		left.Store(count)
		results := startAwaiters(t, ctx, att, []*rlock.CountDownLatch{l1, l2}, perClient, &left)
		sleeping := att.count(waitKey(name))
		for i := range count {
			require.Empty(t, results, "an Await returned with %d count-downs to go", count-i)
			// Counted here before Redis counts: an Await that returns
			// before the last CountDown finds left > 0.
			left.Add(-1)
			require.NoError(t, []*rlock.CountDownLatch{l1, l2}[i%2].CountDown(ctx))
			if i < count-1 {
				n, err := l2.Count(ctx)
				require.NoError(t, err)
				require.EqualValues(t, count-1-i, n)
			}
		}
		for _, r := range collect(t, results, 2*perClient, 20*time.Second, "after the last CountDown") {
			require.NoError(t, r.err)
			require.Zero(t, r.left, "an Await returned before the count reached zero")
		}
		require.Equal(t, sleeping, att.count(waitKey(name)), "an Await woke before zero: the count-downs before it must publish nothing")

		requireLatchZero(t, rc, name)
		n, err := l1.Count(ctx)
		require.NoError(t, err)
		require.Zero(t, n)
		require.NoError(t, l2.CountDown(ctx), "a count-down of a latch at zero is a no-op")
		requireLatchZero(t, rc, name)

		// Zero lets it be set again, for a new round.
		setCount(t, ctx, l2, 1)
		results = startAwaiters(t, ctx, att, []*rlock.CountDownLatch{l2, l1}, 1, nil)
		require.NoError(t, l1.CountDown(ctx))
		for _, r := range collect(t, results, 2, 20*time.Second, "the second round's zero") {
			require.NoError(t, r.err)
		}
		requireLatchZero(t, rc, name)
	})
}

// TestLatchAwaitNotSet: Await of a latch that is not set returns at once,
// without sleeping (nor subscribing).
func TestLatchAwaitNotSet(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		att := newAttempts()
		c := lockClient(t, tp, att.options(rlock.Options{}))
		name := lockName(t)
		l := c.CountDownLatch(name)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for range 3 {
			require.NoError(t, l.Await(ctx))
		}
		setCount(t, ctx, l, 1)
		require.NoError(t, l.CountDown(ctx))
		require.NoError(t, l.Await(ctx), "after zero")
		require.Zero(t, att.count(waitKey(name)), "an Await slept on a latch that was not set")
	})
}

// TestLatchAwaitEnds: an Await ends with ErrClosed when its client closes
// and with its context's error when that ends; neither disturbs the latch
// or the other clients' Awaits.
func TestLatchAwaitEnds(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		att := newAttempts()
		closing := lockClient(t, tp, att.options(rlock.Options{}))
		other := lockClient(t, tp, att.options(rlock.Options{}))
		name := lockName(t)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		l := other.CountDownLatch(name)
		setCount(t, ctx, l, 1)

		// Close.
		results := startAwaiters(t, ctx, att, []*rlock.CountDownLatch{closing.CountDownLatch(name)}, 3, nil)
		require.NoError(t, closing.Close())
		for _, r := range collect(t, results, 3, 10*time.Second, "Close to end the Awaits") {
			require.ErrorIs(t, r.err, rlock.ErrClosed)
		}
		require.ErrorIs(t, closing.CountDownLatch(name).Await(ctx), rlock.ErrClosed, "Await after Close")

		// Cancellation, with and without a cause, and a deadline.
		cause := errors.New("caller gave up")
		cctx, ccancel := context.WithCancelCause(ctx)
		results = startAwaiters(t, cctx, att, []*rlock.CountDownLatch{l}, 2, nil)
		ccancel(cause)
		for _, r := range collect(t, results, 2, 10*time.Second, "cancellation to end the Awaits") {
			require.ErrorIs(t, r.err, context.Canceled)
			require.ErrorIs(t, r.err, cause)
		}
		dctx, dcancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer dcancel()
		require.ErrorIs(t, l.Await(dctx), context.DeadlineExceeded)
		require.ErrorIs(t, l.Await(dctx), context.DeadlineExceeded, "an ended context, before any I/O")

		n, err := l.Count(ctx)
		require.NoError(t, err)
		require.EqualValues(t, 1, n, "ending Awaits changed the count")
		results = startAwaiters(t, ctx, att, []*rlock.CountDownLatch{l}, 2, nil)
		require.NoError(t, l.CountDown(ctx))
		for _, r := range collect(t, results, 2, 10*time.Second, "the zero") {
			require.NoError(t, r.err)
		}
	})
}

// TestLatchResetRace: the latch reaches zero and is set again at once, while
// Awaits of the first round sleep. Every one of them returns: the message
// wakes them, and the round id tells them that the count they find now is
// a new round's, not theirs.
func TestLatchResetRace(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		att := newAttempts()
		l1, l2 := twoClients(t, tp, att)
		setCount(t, ctx, l1, 1)
		const rounds, perClient = 10, 3
		for round := range rounds {
			results := startAwaiters(t, ctx, att, []*rlock.CountDownLatch{l1, l2}, perClient, nil)
			// Back to back, from either client: zero, then a new round.
			setter := []*rlock.CountDownLatch{l1, l2}[round%2]
			require.NoError(t, setter.CountDown(ctx))
			setCount(t, ctx, setter, 1)
			for _, r := range collect(t, results, 2*perClient, 20*time.Second, fmt.Sprintf("round %d: Awaits of the ended round", round)) {
				require.NoError(t, r.err)
			}
		}
		require.NoError(t, l2.CountDown(ctx))
		requireLatchZero(t, redisClient(t, tp), l1.Name())
	})
}

// TestLatchAndLockOfOneName: a latch and a lock may share a name; neither
// touches the other's keys. (Bad arguments are rlock's unit tests: they
// fail before any I/O.)
func TestLatchAndLockOfOneName(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx := context.Background()
		c := lockClient(t, tp, rlock.Options{})
		name := lockName(t)
		l, m := c.CountDownLatch(name), c.Mutex(name)
		lctx := mustLock(t, ctx, m)
		setCount(t, ctx, l, 1) // the lock of the same name must not block it
		require.NoError(t, l.CountDown(ctx))
		require.Equal(t, 1, holdCount(t, lctx, m), "the latch touched the lock of the same name")
		require.NoError(t, m.Unlock(lctx))
	})
}

// TestLatchSurvivesLostSubscription: the pub/sub connections of sleeping
// Awaits are killed; the resubscription wakes them, they read the latch
// and sleep again, and the zero, counted down at once (maybe while they
// are still resubscribing, when its message is lost), still ends every
// one of them well within LatchRecheck.
func TestLatchSurvivesLostSubscription(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		att := newAttempts()
		l1, l2 := twoClients(t, tp, att)
		name := l1.Name()
		setCount(t, ctx, l1, 1)

		const perClient = 3
		results := startAwaiters(t, ctx, att, []*rlock.CountDownLatch{l1, l2}, perClient, nil)
		slept := att.count(waitKey(name))
		require.Positive(t, killPubSubClients(t, tp), "no pub/sub connection to kill")
		await(t, att.reached(waitKey(name), slept+2*perClient), 20*time.Second, "the Awaits to be woken by the lost subscription")

		require.NoError(t, l2.CountDown(ctx))
		// Sooner than LatchRecheck: woken, not rescued by the safety net.
		const within = 20 * time.Second
		require.Less(t, within, rlock.LatchRecheck)
		for _, r := range collect(t, results, 2*perClient, within, "after the zero that followed the kill") {
			require.NoError(t, r.err)
		}
		requireLatchZero(t, redisClient(t, tp), name)
	})
}
