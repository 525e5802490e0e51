package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/rlock"
	"github.com/latchkey/latchkey/rlock/fenced"
	"github.com/latchkey/latchkey/watchdog"
)

// A slow network and a partition between the holder and Redis. The holder's
// client goes through an in-process toxiproxy; waiters talk to Redis
// directly.

// TestFaultLatency: every reply to the holder's client arrives later than
// its lease. An acquire either fails with the caller's deadline (and is
// undone), or returns a lock whose remaining validity is what is left of the
// lease after the wait, which here is nothing: the context is already
// cancelled with ErrLockLost. A faster client gets the lock when the lease
// runs out, and the slow holder's late write is fenced off.
func TestFaultLatency(t *testing.T) {
	ctx := faultCtx(t)
	const latency = 600 * time.Millisecond
	const lease = 400 * time.Millisecond
	x, rc := resetFixture(t)
	slow := oneConnLockClient(t, proxied(x), rlock.Options{WatchdogTimeout: lease})
	x.add(t, toxic{Name: "slow", Type: "latency", Stream: "downstream", Attributes: map[string]int{"latency": int(latency / time.Millisecond)}})

	t.Run("deadline", func(t *testing.T) {
		m := slow.Mutex(lockName(t))
		lctx, cancel := context.WithTimeout(ctx, lease/2)
		defer cancel()
		_, err := m.Lock(lctx, rlock.WithLease(lease))
		require.ErrorIs(t, err, context.DeadlineExceeded)
		// Lock waited for the undo's reply, so the undo has run.
		require.False(t, exists(t, rc, m.Key()), "the acquire whose reply came too late must be undone")
	})

	t.Run("validity", func(t *testing.T) {
		m := slow.Mutex(lockName(t))
		start := time.Now()
		lctx, err := m.Lock(ctx, rlock.WithLease(lease))
		elapsed := time.Since(start)
		require.NoError(t, err)
		deadline, ok := rlock.LeaseEnd(lctx)
		require.True(t, ok)
		validity := time.Until(deadline)
		require.LessOrEqual(t, validity, lease-elapsed+time.Millisecond, "validity beyond what is left of the lease")
		require.ErrorIs(t, context.Cause(lctx), rlock.ErrLockLost, "the lease ran out before the reply came")
		require.ErrorIs(t, m.Unlock(lctx), rlock.ErrNotHeld, "the lock expired on the server")
		logFault(t, "latency-validity: acquisitions=1 elapsed=%v validity=%v", elapsed.Round(time.Millisecond), validity.Round(time.Millisecond))
	})

	t.Run("watchdog", func(t *testing.T) {
		m := slow.Mutex(lockName(t))
		lctx, err := m.Lock(ctx)
		require.NoError(t, err)
		granted := time.Now()
		await(t, lctx.Done(), 10*lease, "the loss signal of a lock whose renewals cannot keep up")
		lossSignal := time.Since(granted)
		cause := context.Cause(lctx)
		require.ErrorIs(t, cause, rlock.ErrLockLost)
		require.ErrorIs(t, cause, watchdog.ErrExpired)
		require.Less(t, lossSignal, lease/3+time.Second, "within a renewal period of the grant (plus slack)")
		require.ErrorIs(t, m.Unlock(lctx), rlock.ErrNotHeld)
		logFault(t, "latency-watchdog: acquisitions=1 loss_signal=%v cause=%q", lossSignal.Round(time.Millisecond), cause)
	})

	t.Run("checkers", func(t *testing.T) {
		name := lockName(t)
		set := newLockSet(t)
		att := newAttempts()
		fast := lockClient(t, topologies()[0], rlock.Options{WatchdogTimeout: lease, OnAttempt: att.hook})
		m := slow.Mutex(name)
		slowDone := make(chan struct{})
		go func() {
			defer close(slowDone)
			set.cycle(ctx, m, "slow", rlock.WithLease(lease))
		}()
		require.Eventually(t, func() bool { return exists(t, rc, m.Key()) }, 10*time.Second, time.Millisecond, "the slow acquire to run")
		start := time.Now()
		set.cycle(ctx, fast.Mutex(name), "fast", rlock.WithLease(lease))
		nextHolder := time.Since(start)
		await(t, slowDone, 10*time.Second, "the slow holder to finish")
		r := set.report(t, "latency")
		r.nextHolder = nextHolder
		r.extra = fmt.Sprintf("latency=%v lease=%v lost_holds=%d", latency, lease, r.stats.LostHolds)
		r.check(t)
		require.Equal(t, 1, r.stats.StaleRejected, "the slow holder's claim must be fenced off")
	})
}

// TestFaultBlackhole: the holder is cut off from Redis (nothing passes
// either way). Its renewals cannot get through, so its context is
// cancelled with ErrLockLost (ErrExpired) at the local deadline, a lease
// after the last renewal was sent, which is no later than the server lets
// the key expire; a waiter then gets the lock, and the cut-off holder's late
// write is fenced off.
func TestFaultBlackhole(t *testing.T) {
	ctx := faultCtx(t)
	x, _ := resetFixture(t)
	name := lockName(t)
	set := newLockSet(t)
	h := oneConnLockClient(t, proxied(x), rlock.Options{WatchdogTimeout: faultLease}).Mutex(name)
	hctx := mustLock(t, ctx, h)
	token, err := h.Token(hctx)
	require.NoError(t, err)
	lost := whenDone(hctx)
	value, err := set.store.Claim(ctx, token) // the holder has read the set
	require.NoError(t, err)

	att := newAttempts()
	w := lockClient(t, topologies()[0], rlock.Options{WatchdogTimeout: faultLease, OnAttempt: att.hook}).Mutex(name)
	waiterDone := make(chan struct{})
	go func() {
		defer close(waiterDone)
		set.cycle(ctx, w, "waiter")
	}()
	await(t, att.reached(name, 2), 10*time.Second, "the waiter to block")

	x.blackhole(t, "cut-up", "upstream")
	x.blackhole(t, "cut-down", "downstream")
	cut := time.Now()
	var lostAt time.Time
	select {
	case lostAt = <-lost:
	case <-time.After(10 * faultLease):
		t.Fatal("no loss signal for a holder cut off from Redis")
	}
	cause := context.Cause(hctx)
	require.ErrorIs(t, cause, rlock.ErrLockLost)
	require.ErrorIs(t, cause, watchdog.ErrExpired)
	await(t, waiterDone, 10*faultLease, "the waiter to get the lock")
	lossSignal := lostAt.Sub(cut)
	nextHolder := set.snapshot().FirstAcquired.Sub(cut)
	require.Less(t, lossSignal, faultLease+time.Second, "the loss signal must come by the local deadline, a lease after the last renewal (plus slack)")

	// The holder, unaware or careless, finishes its read-modify-write.
	err = set.store.Write(ctx, token, value+" cut-off")
	require.ErrorIs(t, err, fenced.ErrStale)
	set.record(func(st *lockSetStats) { st.StaleRejected++ })
	x.remove(t, "cut-up")
	x.remove(t, "cut-down")
	require.ErrorIs(t, h.Unlock(hctx), rlock.ErrNotHeld)

	r := set.report(t, "blackhole")
	r.lossSignal, r.nextHolder = lossSignal, nextHolder
	r.extra = fmt.Sprintf("holder_told_first=%v loss_cause=%q", lossSignal < nextHolder, cause)
	r.check(t)
}
