package integration

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/rlock"
)

// TestDo: Do holds the lock exactly while fn runs, returns fn's error, and
// releases on error and on panic.
func TestDo(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx := context.Background()
		c := lockClient(t, tp, rlock.Options{})
		name := lockName(t)
		other := lockClient(t, tp, rlock.Options{}).Mutex(name)

		errFn := errors.New("fn failed")
		err := c.Do(ctx, name, func(lctx context.Context) error {
			_, ok, err := other.TryLock(ctx)
			require.NoError(t, err)
			require.False(t, ok, "another owner got the lock while fn ran")
			n, err := c.Mutex(name).HoldCount(lctx)
			require.NoError(t, err)
			require.Equal(t, 1, n, "fn's context carries the hold")
			return errFn
		})
		require.ErrorIs(t, err, errFn)
		tryAndRelease(t, ctx, other, "Do returned with the lock still held")

		require.PanicsWithValue(t, "boom", func() {
			_ = c.Do(ctx, name, func(context.Context) error { panic("boom") })
		})
		tryAndRelease(t, ctx, other, "a panicking fn left the lock held")

		called := false
		require.ErrorIs(t, c.Do(ctx, "", func(context.Context) error { called = true; return nil }), rlock.ErrInvalidName)
		require.False(t, called, "fn ran without the lock")
		require.ErrorIs(t, c.Do(ctx, name, nil), rlock.ErrInvalidArgument)
	})
}

// TestDoReportsLostLock: a lock lost while fn ran makes Do fail even though
// fn returned nil, and fn's context carried the loss.
func TestDoReportsLostLock(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		c := lockClient(t, tp, rlock.Options{})
		name := lockName(t)
		err := c.Do(context.Background(), name, func(lctx context.Context) error {
			<-lctx.Done() // the lease's end
			require.ErrorIs(t, context.Cause(lctx), rlock.ErrLockLost)
			return nil
		}, rlock.WithLease(300*time.Millisecond))
		require.ErrorIs(t, err, rlock.ErrNotHeld)
		require.ErrorIs(t, err, rlock.ErrLockLost)
		awaitExpiry(t, tp, name)
	})
}

// awaitExpiry waits for the lock called name to expire in Redis: a hold
// declared lost at its local deadline is not released, and its key lasts
// the lease's drift margin longer.
func awaitExpiry(t *testing.T, tp topology, name string) {
	t.Helper()
	rc := redisClient(t, tp)
	require.Eventually(t, func() bool { return !exists(t, rc, "latchkey:{"+name+"}") }, 5*time.Second, 10*time.Millisecond,
		"the lock's key outlived its lease")
}

// TestUnlockAfterLeaseDeadline: once a fixed lease's local deadline has
// passed, Unlock reports the hold lost (no release), however the lease's
// timer and the context's deadline are ordered. Before, an Unlock right
// after the context's deadline fired could still run the release, and
// succeed, when it beat the lease's timer: the outcome depended on which
// of two timers for the same instant ran first.
func TestUnlockAfterLeaseDeadline(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		name := lockName(t)
		m := lockClient(t, tp, rlock.Options{}).Mutex(name)
		for range 5 {
			lctx := mustLock(t, context.Background(), m, rlock.WithLease(200*time.Millisecond))
			<-lctx.Done()
			err := m.Unlock(lctx)
			require.ErrorIs(t, err, rlock.ErrNotHeld)
			require.ErrorIs(t, err, rlock.ErrLockLost)
			awaitExpiry(t, tp, name)
		}
	})
}

// TestLocker: goroutines sharing one sync.Locker exclude each other, and
// misuse panics as sync.Mutex's does.
func TestLocker(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		c := lockClient(t, tp, rlock.Options{})
		name := lockName(t)
		l := rlock.Locker(ctx, c.Mutex(name))

		const goroutines, rounds = 4, 25
		var inside, overlaps atomic.Int32
		total := 0 // guarded by l alone: the race detector checks that too
		var wg sync.WaitGroup
		for range goroutines {
			wg.Go(func() {
				for range rounds {
					l.Lock()
					if inside.Add(1) != 1 {
						overlaps.Add(1)
					}
					total++
					inside.Add(-1)
					l.Unlock()
				}
			})
		}
		wg.Wait()
		require.Zero(t, overlaps.Load())
		require.Equal(t, goroutines*rounds, total)

		// Another client sees the Locker's hold.
		other := lockClient(t, tp, rlock.Options{}).Mutex(name)
		l.Lock()
		_, ok, err := other.TryLock(ctx)
		require.NoError(t, err)
		require.False(t, ok, "the Locker's hold did not exclude another client")
		l.Unlock()
		tryAndRelease(t, ctx, other, "Locker.Unlock left the lock held")

		require.PanicsWithValue(t, `latchkey: unlock of unlocked Locker of "`+name+`"`, l.Unlock)
	})
}

// TestLockerPanicsWhenItCannotLock: a Locker whose context ended, whose
// client closed or whose name is invalid panics instead of hanging or
// pretending to hold.
func TestLockerPanicsWhenItCannotLock(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		c := lockClient(t, tp, rlock.Options{})
		name := lockName(t)
		holder := lockClient(t, tp, rlock.Options{}).Mutex(name)
		hctx := mustLock(t, context.Background(), holder)
		defer func() { require.NoError(t, holder.Unlock(hctx)) }()

		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		require.Panics(t, rlock.Locker(ctx, c.Mutex(name)).Lock, "a Locker whose context ended while waiting")
		require.Panics(t, rlock.Locker(context.Background(), c.Mutex("")).Lock, "an invalid name")

		closed := lockClient(t, tp, rlock.Options{})
		require.NoError(t, closed.Close())
		require.Panics(t, rlock.Locker(context.Background(), closed.Mutex(name)).Lock, "a closed client")
	})
}

// tryAndRelease requires m to be free: TryLock takes it, Unlock gives it
// back.
func tryAndRelease(t *testing.T, ctx context.Context, m *rlock.Mutex, what string) {
	t.Helper()
	lctx, ok, err := m.TryLock(ctx)
	require.NoError(t, err)
	require.True(t, ok, what)
	require.NoError(t, m.Unlock(lctx))
}
