package integration

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/rlock"
	"github.com/latchkey/latchkey/watchdog"
)

// Regression tests of issue 21's defects ("ready for strangers") in the
// library: each failed on the code before its fix.

// TestStrangersOptionsBounded (defect 11): options that would make the
// client spin, fail every Unlock or block a free lock for a year are
// refused with ErrInvalidOptions, and the message names the bound.
func TestStrangersOptionsBounded(t *testing.T) {
	rc := redisClient(t, topologies()[0])
	for name, tc := range map[string]struct {
		opts  rlock.Options
		bound string
	}{
		"1ns watchdog interval": {rlock.Options{WatchdogInterval: time.Nanosecond}, "MinInterval"},
		"1ns release timeout":   {rlock.Options{ReleaseTimeout: time.Nanosecond}, "MinReleaseTimeout"},
		"year handoff window":   {rlock.Options{HandoffWindow: rlock.MaxLease}, "MaxHandoffWindow"},
		"huge renew batch":      {rlock.Options{RenewBatchSize: 1 << 30}, "MaxBatchSize"},
		"long prefix":           {rlock.Options{Prefix: strings.Repeat("p", 257)}, "MaxPrefixLen"},
		"invalid UTF-8 prefix":  {rlock.Options{Prefix: "app\xff"}, "UTF-8"},
	} {
		t.Run(name, func(t *testing.T) {
			c, err := rlock.NewClient(rc, tc.opts)
			if err == nil {
				c.Close()
			}
			require.ErrorIs(t, err, rlock.ErrInvalidOptions)
			require.Contains(t, err.Error(), tc.bound)
		})
	}
}

// TestStrangersFailedInnerUnlock (defect 6): an inner Unlock whose release
// never reached Redis used to drop the local level anyway, so that the
// final Unlock found a count it did not expect, reported ErrNotHeld and
// left the lock in Redis, unrenewed, for up to a lease. Now the failed
// release is completed by a retry of that Unlock, or by the hold's next
// call, and Redis counts it once.
func TestStrangersFailedInnerUnlock(t *testing.T) {
	for _, retry := range []bool{true, false} {
		t.Run(fmt.Sprintf("retry=%v", retry), func(t *testing.T) {
			ctx := context.Background()
			x, rc := resetFixture(t)
			m := oneConnLockClient(t, proxied(x), rlock.Options{ReleaseTimeout: 300 * time.Millisecond}).Mutex(lockName(t))
			outer := mustLock(t, ctx, m)
			inner := mustLock(t, outer, m)
			require.Equal(t, []string{"2"}, holdCounts(t, rc, m.Key()))

			// The release is swallowed on its way to Redis, and its
			// connection closed when the blackhole goes: it never runs.
			x.blackhole(t, "drop", "upstream")
			require.Error(t, m.Unlock(inner), "a release that cannot reach Redis must fail")
			x.remove(t, "drop")
			require.Equal(t, []string{"2"}, holdCounts(t, rc, m.Key()), "the release must not have run")

			if retry {
				require.NoError(t, m.Unlock(inner), "a retry of the failed Unlock completes it")
				require.Equal(t, []string{"1"}, holdCounts(t, rc, m.Key()))
				require.ErrorIs(t, m.Unlock(inner), rlock.ErrNotHeld, "once done, the level is unlocked")
			}
			require.NoError(t, m.Unlock(outer), "the final Unlock must release the lock")
			require.False(t, exists(t, rc, m.Key()), "the lock outlived its final Unlock")
		})
	}
}

// TestStrangersDroppedLockContext (defect 13): Lock, then Unlock with the
// parent context instead of the one Lock returned, used to leave the hold
// renewed by the watchdog until Close. Once the lock context is
// unreachable the hold is released, with a Warn that names the lock and
// where Lock was called.
func TestStrangersDroppedLockContext(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx := context.Background()
		rc := redisClient(t, tp)
		logs := &logCapture{}
		r, _, observed := observe(t)
		m := lockClient(t, tp, observed(rlock.Options{Logger: slog.New(logs)})).Mutex(lockName(t))
		lockAndDrop(t, ctx, rc, m)
		awaitCond(t, 20*time.Second, "the dropped hold to be released", func() bool {
			runtime.GC()
			return !exists(t, rc, m.Key())
		})
		require.True(t, logs.saw(slog.LevelWarn, "dropped without its Unlock"), "no Warn: %v", logs.all())
		require.True(t, logs.saw(slog.LevelWarn, "lockAndDrop"), "the Warn must say where Lock was called: %v", logs.all())
		require.True(t, logs.saw(slog.LevelWarn, m.Name()), "the Warn must name the lock: %v", logs.all())
		require.EqualValues(t, 1, r.value("latchkey.lock.leaked"))
	})
}

// lockAndDrop locks m and makes the mistake: it unlocks with ctx, not the
// lock context, which it then drops. The lock is checked to be still held
// while the lock context is reachable: once this returns, a collection may
// release it at any moment (a CI run saw it gone before the next line).
//
//go:noinline
func lockAndDrop(t *testing.T, ctx context.Context, rc rueidis.Client, m *rlock.Mutex) {
	lctx, err := m.Lock(ctx)
	require.NoError(t, err)
	require.ErrorIs(t, m.Unlock(ctx), rlock.ErrNotHeld)
	runtime.GC()
	require.True(t, exists(t, rc, m.Key()), "a hold whose lock context is still reachable was released")
	runtime.KeepAlive(lctx)
}

// TestStrangersSemaphoreExact (defect 5): Lua numbers are doubles, so a
// size of 2^62 over-granted (a holder of 2^62 permits and a request for
// one more both got in), stored counts as "4.6e+18" and broke Inspect.
// Sizes are now bounded to 2^53-1, where every count is exact, and the
// largest one works end to end.
func TestStrangersSemaphoreExact(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx := context.Background()
		c := lockClient(t, tp, rlock.Options{})
		_, _, err := c.Semaphore(lockName(t), 1<<62).TryAcquire(ctx, 1<<62)
		require.ErrorIs(t, err, rlock.ErrInvalidArgument, "a size beyond 2^53-1 cannot be counted exactly")
		_, err = c.Semaphore(lockName(t), math.MaxInt64).Available(ctx)
		require.ErrorIs(t, err, rlock.ErrInvalidArgument)

		const most = 1<<53 - 1
		s := c.Semaphore(lockName(t), most)
		all, ok, err := s.TryAcquire(ctx, most-1)
		require.NoError(t, err)
		require.True(t, ok)
		one, ok, err := s.TryAcquire(ctx, 1)
		require.NoError(t, err)
		require.True(t, ok, "the last permit is free")
		_, ok, err = s.TryAcquire(ctx, 1)
		require.NoError(t, err)
		require.False(t, ok, "every permit is held: no over-grant")
		free, err := s.Available(ctx)
		require.NoError(t, err)
		require.Zero(t, free)
		info, err := c.InspectSemaphore(ctx, s.Name())
		require.NoError(t, err)
		var held int64
		for _, h := range info.Holders {
			held += h.Permits
		}
		require.EqualValues(t, most, held, "Inspect reads the counts exactly")
		require.NoError(t, s.Release(one))
		require.NoError(t, s.Release(all))
		free, err = s.Available(ctx)
		require.NoError(t, err)
		require.EqualValues(t, most, free)
	})
}

// TestStrangersWrongTypeKeyCostsOnlyItsLock (defect 4): a lock key written
// over with another type (WRONGTYPE for the renew script's HEXISTS) used
// to fail the whole renewal call, so every lease in its batch ended with
// ErrExpired. Now only that lock is lost (gone), and the others of the
// batch are renewed on.
func TestStrangersWrongTypeKeyCostsOnlyItsLock(t *testing.T) {
	ctx := context.Background()
	tp := topologies()[0] // one batch: on standalone every key shares it
	rc := redisClient(t, tp)
	c := lockClient(t, tp, rlock.Options{WatchdogTimeout: 600 * time.Millisecond, WatchdogInterval: 200 * time.Millisecond})
	var ms []*rlock.Mutex
	var lctxs []context.Context
	for range 3 {
		m := c.Mutex(lockName(t))
		ms = append(ms, m)
		lctxs = append(lctxs, mustLock(t, ctx, m))
	}
	require.NoError(t, rc.Do(ctx, rc.B().Set().Key(ms[0].Key()).Value("not a lock").Build()).Error())
	requireLost(t, lctxs[0], 10*time.Second, "the lock whose key was overwritten")
	require.ErrorIs(t, context.Cause(lctxs[0]), watchdog.ErrGone)

	// Past a whole lease of renewals after the loss, the others still hold.
	renewed := c.WatchdogStats().Renewed
	awaitCond(t, 10*time.Second, "the other locks' renewals to go on", func() bool {
		return c.WatchdogStats().Renewed >= renewed+8
	})
	for i, lctx := range lctxs[1:] {
		require.NoError(t, lctx.Err(), "lock %d of the batch was lost with the overwritten one: %v", i+1, context.Cause(lctx))
		require.NoError(t, ms[i+1].Unlock(lctx))
	}
	require.NoError(t, rc.Do(ctx, rc.B().Del().Key(ms[0].Key()).Build()).Error())
}
