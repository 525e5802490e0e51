package integration

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/rlock"
)

// Regression tests of defects found by reading option and primitive
// combinations (2026-11-28): each failed on the code before its fix.

// countingClient counts the commands sent through Do, which is how the
// library runs its scripts (rueidis' Lua.Exec).
type countingClient struct {
	rueidis.Client
	n *atomic.Int64
}

func (c countingClient) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	c.n.Add(1)
	return c.Client.Do(ctx, cmd)
}

// TestRegressObserveIdleWithDefaults: an observer of an election nobody
// leads waits for an announcement, with Options left at their defaults.
// Its backstop wait was Options.WatchdogTimeout as given, 0 unless set, so
// it read the leader back to back for as long as nobody led (`latchkey
// leader --watch` connects with the defaults).
func TestRegressObserveIdleWithDefaults(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		var n atomic.Int64
		c, err := rlock.NewClient(countingClient{redisClient(t, tp), &n}, rlock.Options{})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, c.Close()) })
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		leaders := c.Election(lockName(t)).Observe(ctx)
		require.Equal(t, rlock.Leadership{}, <-leaders, "nobody leads")
		before := n.Load()
		// No event marks "nothing happened": the check is what a
		// half-second of nobody leading costs, with a wide margin.
		time.Sleep(500 * time.Millisecond)
		require.LessOrEqual(t, n.Load()-before, int64(2), "commands sent by an idle observer in 500 ms")
		cancel()
		for range leaders {
		}
	})
}

// TestRegressLockerHopelessPanics: a sync.Locker whose Lock can never
// succeed (its handle refuses the client's protocol, or ctx carries a read
// hold of the RWMutex it would write-lock) panics with the cause, as it
// does for an invalid name, instead of retrying forever.
func TestRegressLockerHopelessPanics(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx := context.Background()
		name := lockName(t)
		redisson := lockClient(t, tp, redissonOptions(rlock.Options{}))
		requireLockPanics(t, rlock.Locker(ctx, redisson.RWMutex(name)), rlock.ErrInvalidOptions)
		requireLockPanics(t, rlock.RLocker(ctx, redisson.RWMutex(name)), rlock.ErrInvalidOptions)
		requireLockPanics(t, rlock.Locker(ctx, redisson.MultiMutex(name, name+"-b")), rlock.ErrInvalidOptions)

		rw := lockClient(t, tp, rlock.Options{}).RWMutex(name)
		rctx, err := rw.RLock(ctx)
		require.NoError(t, err)
		requireLockPanics(t, rlock.Locker(rctx, rw), rlock.ErrUpgrade)
		require.NoError(t, rw.RUnlock(rctx))
	})
}

// requireLockPanics calls l.Lock and requires a panic whose value is an
// error wrapping want, within a bound a retrying Lock would not meet.
func requireLockPanics(t *testing.T, l interface{ Lock() }, want error) {
	t.Helper()
	got := make(chan any, 1)
	go func() {
		defer func() { got <- recover() }()
		l.Lock()
	}()
	select {
	case v := <-got:
		err, ok := v.(error)
		require.True(t, ok, "Lock returned or panicked with %v, not an error", v)
		require.ErrorIs(t, err, want)
	case <-time.After(10 * time.Second):
		// Lock retries with a context that never ends: the goroutine
		// cannot be stopped, so the test binary's leak check reports it.
		require.FailNow(t, fmt.Sprintf("Lock neither panicked nor returned in 10s (want a panic wrapping %v)", want))
	}
}

// TestRegressMultiMutexDroppedContext: a MultiMutex lock context dropped
// without its Unlock is released after a collection, as a Mutex's is
// (TestStrangersDroppedLockContext). The multi-lock watched each member's
// lock context with context.AfterFunc, which registered the watch as a
// child of the member's hold, so the Client kept every member's lock
// context reachable and the watchdog renewed the members until Close.
func TestRegressMultiMutexDroppedContext(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx := context.Background()
		rc := redisClient(t, tp)
		c := lockClient(t, tp, rlock.Options{})
		name := lockName(t)
		names := []string{name + "-a", name + "-b"}
		multiLockAndDrop(t, ctx, rc, c, names)
		awaitCond(t, 20*time.Second, "the dropped multi-lock's members to be released", func() bool {
			runtime.GC()
			return !exists(t, rc, c.Mutex(names[0]).Key()) && !exists(t, rc, c.Mutex(names[1]).Key())
		})
	})
}

// multiLockAndDrop locks names as one MultiMutex and drops its lock
// context, checking that the members are held while it is reachable.
//
//go:noinline
func multiLockAndDrop(t *testing.T, ctx context.Context, rc rueidis.Client, c *rlock.Client, names []string) {
	lctx, err := c.MultiMutex(names...).Lock(ctx)
	require.NoError(t, err)
	runtime.GC()
	for _, n := range names {
		require.True(t, exists(t, rc, c.Mutex(n).Key()), "member %q of a reachable multi-lock was released", n)
	}
	runtime.KeepAlive(lctx)
}
