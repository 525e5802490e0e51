package integration

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/internal/luascripts"
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

// scripted fails every call of the script whose SHA-1 is fail, while on,
// as a connection lost before its reply would (the outcome is unknown), and
// holds every call of the script hold until gate closes or the call's
// context ends.
type scripted struct {
	rueidis.Client
	fail, hold string
	on         *atomic.Bool
	fails      *atomic.Int64 // calls failed
	held       *atomic.Int64 // calls held at the gate
	gate       chan struct{}
}

func (c scripted) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	if args := cmd.Commands(); c.on.Load() && len(args) > 1 && args[0] == "EVALSHA" {
		switch args[1] {
		case c.fail:
			c.fails.Add(1)
			return rueidis.NewErrorResult(io.ErrUnexpectedEOF)
		case c.hold:
			c.held.Add(1)
			select {
			case <-c.gate:
			case <-ctx.Done():
			}
		}
	}
	return c.Client.Do(ctx, cmd)
}

func shaOf(s *luascripts.Script) string {
	sum := sha1.Sum([]byte(s.Source()))
	return hex.EncodeToString(sum[:])
}

// TestRegressRetryCutByClose: a Mutex re-entry or an RWMutex downgrade
// retrying calls of unknown outcome returns ErrClosed when Close ends its
// pause. The re-entry returned a nil context with a nil error (the pause's
// end was mapped through the caller's context, which Close ends only at its
// last step), the downgrade the outcome-unknown error. A waiter of the same
// client, whose leave call is held, keeps Close from its last step until
// the call has returned.
func TestRegressRetryCutByClose(t *testing.T) {
	for _, tc := range []struct {
		name string
		fail *luascripts.Script
		// hold takes the first hold; again is the call that retries.
		hold  func(ctx context.Context, c *rlock.Client, name string) (context.Context, error)
		again func(c *rlock.Client, name string, lctx context.Context) (context.Context, error)
		force func(c *rlock.Client, ctx context.Context, name string) (bool, error)
	}{
		{"mutex re-entry", luascripts.Reenter,
			func(ctx context.Context, c *rlock.Client, name string) (context.Context, error) {
				return c.Mutex(name).Lock(ctx)
			},
			func(c *rlock.Client, name string, lctx context.Context) (context.Context, error) {
				return c.Mutex(name).Lock(lctx)
			},
			(*rlock.Client).ForceUnlock},
		{"rwmutex downgrade", luascripts.RWRead,
			func(ctx context.Context, c *rlock.Client, name string) (context.Context, error) {
				return c.RWMutex(name).Lock(ctx)
			},
			func(c *rlock.Client, name string, lctx context.Context) (context.Context, error) {
				return c.RWMutex(name).RLock(lctx)
			},
			(*rlock.Client).ForceUnlockRWMutex},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forEachTopology(t, func(t *testing.T, tp topology) {
				ctx := context.Background()
				var on atomic.Bool
				var fails atomic.Int64
				gate := make(chan struct{})
				rc := scripted{Client: redisClient(t, tp), fail: shaOf(tc.fail), hold: shaOf(luascripts.Leave), on: &on, fails: &fails, held: new(atomic.Int64), gate: gate}
				c, err := rlock.NewClient(rc, rlock.Options{})
				require.NoError(t, err)
				name := lockName(t)
				lctx, err := tc.hold(ctx, c, name)
				require.NoError(t, err)

				other := lockName(t)
				om := lockClient(t, tp, rlock.Options{}).Mutex(other)
				held := mustLock(t, ctx, om)
				waited := make(chan error, 1)
				go func() {
					_, err := c.Mutex(other).Lock(ctx)
					waited <- err
				}()
				awaitCond(t, 10*time.Second, "the other lock's waiter to queue", func() bool {
					info, err := c.Inspect(ctx, other)
					require.NoError(t, err)
					return len(info.Waiters) > 0
				})

				on.Store(true)
				type result struct {
					ctx context.Context
					err error
				}
				done := make(chan result, 1)
				go func() {
					rctx, err := tc.again(c, name, lctx)
					done <- result{rctx, err}
				}()
				awaitCond(t, 10*time.Second, "the call to retry", func() bool { return fails.Load() >= 3 })
				closed := make(chan error, 1)
				go func() { closed <- c.Close() }()
				select {
				case r := <-done:
					require.ErrorIs(t, r.err, rlock.ErrClosed)
					require.Nil(t, r.ctx)
				case <-time.After(10 * time.Second):
					require.FailNow(t, "the call did not return after Close")
				}
				close(gate)
				require.NoError(t, <-closed)
				require.ErrorIs(t, <-waited, rlock.ErrClosed)
				require.NoError(t, om.Unlock(held))
				// Close leaves the first hold to its lease: take it.
				_, err = tc.force(lockClient(t, tp, rlock.Options{}), ctx, name)
				require.NoError(t, err)
			})
		})
	}
}

// TestRegressUnlockKeepsItsContext: an Unlock waiting for the owner's
// other call is not taken for a dropped lock context. Unlock did not keep
// its context reachable, so a collection while it waited ran the leak
// cleanup: a false "dropped without its Unlock" warning, and a race for the
// release that the caller's Unlock could lose with ErrNotHeld.
func TestRegressUnlockKeepsItsContext(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx := context.Background()
		var on atomic.Bool
		held := new(atomic.Int64)
		gate := make(chan struct{})
		rc := scripted{Client: redisClient(t, tp), hold: shaOf(luascripts.Reenter), on: &on, fails: new(atomic.Int64), held: held, gate: gate}
		logs := &logCapture{}
		c, err := rlock.NewClient(rc, rlock.Options{Logger: slog.New(logs)})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, c.Close()) })
		m := c.Mutex(lockName(t))
		outer, err := m.Lock(ctx)
		require.NoError(t, err)
		inner, err := m.Lock(outer)
		require.NoError(t, err)

		// A re-entry holds the owner's calls while its script call is held.
		on.Store(true)
		reentered := make(chan error, 1)
		go func() {
			lctx, err := m.Lock(outer)
			if err == nil {
				err = m.Unlock(lctx)
			}
			reentered <- err
		}()
		awaitCond(t, 10*time.Second, "the re-entry's call to be held", func() bool { return held.Load() == 1 })
		unlocked := make(chan error, 1)
		go func(lctx context.Context) { unlocked <- m.Unlock(lctx) }(inner)
		inner = nil // the Unlock call is now the only one that refers to it
		awaitCond(t, 10*time.Second, "the Unlock to wait for the re-entry", func() bool {
			return stacksHave("(*hold).unlock")
		})
		// Nothing can be awaited here: give the collector a second to find
		// the context unreachable, if Unlock lets it be.
		deadline := time.Now().Add(time.Second)
		for time.Now().Before(deadline) && !logs.saw(slog.LevelWarn, "dropped without its Unlock") {
			runtime.GC()
			time.Sleep(10 * time.Millisecond)
		}
		close(gate)
		require.NoError(t, <-unlocked, "the caller's Unlock")
		require.NoError(t, <-reentered)
		require.False(t, logs.saw(slog.LevelWarn, "dropped without its Unlock"), "a leak was reported: %v", logs.all())
		require.NoError(t, m.Unlock(outer))
	})
}

// stacksHave reports whether some goroutine's stack has a frame naming fn.
func stacksHave(fn string) bool {
	buf := make([]byte, 1<<20)
	return strings.Contains(string(buf[:runtime.Stack(buf, true)]), fn)
}

// TestRegressLeakedUnlockRetried: a dropped lock context whose unlock
// cannot reach Redis is unlocked once Redis answers again. The leak cleanup
// tried once: when the owner's earlier failed Unlock could not be completed
// first (settle), the level stayed held, nothing tried again, and the
// watchdog kept the lock until Close.
func TestRegressLeakedUnlockRetried(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx := context.Background()
		var on atomic.Bool
		fails := new(atomic.Int64)
		raw := redisClient(t, tp)
		rc := scripted{Client: raw, fail: shaOf(luascripts.Release), on: &on, fails: fails, held: new(atomic.Int64)}
		logs := &logCapture{}
		const releaseTimeout = 200 * time.Millisecond
		c, err := rlock.NewClient(rc, rlock.Options{Logger: slog.New(logs), ReleaseTimeout: releaseTimeout})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, c.Close()) })
		m := c.Mutex(lockName(t))

		on.Store(true) // Redis stops answering releases
		lockInnerFailAndDrop(t, ctx, m)
		awaitCond(t, 10*time.Second, "the dropped context's cleanup", func() bool {
			runtime.GC()
			return logs.saw(slog.LevelWarn, "dropped without its Unlock")
		})
		// The cleanup's unlock gives up after ReleaseTimeout; no event says
		// when, so wait that long and more.
		time.Sleep(releaseTimeout + time.Second)
		on.Store(false) // Redis answers again
		awaitCond(t, 10*time.Second, "the dropped hold to be released", func() bool {
			return !exists(t, raw, m.Key())
		})
	})
}

// lockInnerFailAndDrop locks m twice, unlocks the inner level while
// releases fail (its release is left pending), and drops the outer context.
//
//go:noinline
func lockInnerFailAndDrop(t *testing.T, ctx context.Context, m *rlock.Mutex) {
	outer, err := m.Lock(ctx)
	require.NoError(t, err)
	inner, err := m.Lock(outer)
	require.NoError(t, err)
	require.Error(t, m.Unlock(inner), "a release that cannot reach Redis")
}

// TestRegressLeaseDeadlineMonotonic: a fixed lease's local deadline runs on
// the monotonic clock (docs/safety.md), so that a step of the wall clock
// cannot make a hold's context outlive its lease in Redis. The deadline
// was kept as Unix nanoseconds, which drops the monotonic reading: every
// check, timer and deadline then ran on the wall clock.
func TestRegressLeaseDeadlineMonotonic(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx := context.Background()
		c := lockClient(t, tp, rlock.Options{})
		name := lockName(t)
		monotonic := func(what string, lctx context.Context) {
			t.Helper()
			d, ok := rlock.LeaseEnd(lctx)
			require.True(t, ok, what)
			// time.Time's String ends with "m=±<seconds>" when it has a
			// monotonic clock reading.
			require.Contains(t, d.String(), " m=", "%s: the deadline has no monotonic clock reading", what)
		}
		m := c.Mutex(name)
		lctx, err := m.Lock(ctx, rlock.WithLease(10*time.Second))
		require.NoError(t, err)
		monotonic("Mutex", lctx)
		require.NoError(t, m.Extend(lctx, 20*time.Second))
		monotonic("Mutex after Extend", lctx)
		require.NoError(t, m.Unlock(lctx))

		rw := c.RWMutex(name + "-rw")
		rctx, err := rw.RLock(ctx, rlock.WithLease(10*time.Second))
		require.NoError(t, err)
		monotonic("RWMutex read", rctx)
		require.NoError(t, rw.RUnlock(rctx))

		s := c.Semaphore(name+"-sem", 2)
		pctx, err := s.Acquire(ctx, 1, rlock.WithLease(10*time.Second))
		require.NoError(t, err)
		monotonic("Semaphore", pctx)
		require.NoError(t, s.Release(pctx))
	})
}

// heldRenewals holds every pipelined renew call, while on, until gate
// closes, then sends it whatever its context says: a renewal already on
// its way when the watchdog gave its lease up.
type heldRenewals struct {
	rueidis.Client
	sha  string
	on   *atomic.Bool
	n    *atomic.Int64 // renew calls held
	sent *atomic.Int64 // renew calls let through
	gate chan struct{}
}

func (c heldRenewals) DoMulti(ctx context.Context, multi ...rueidis.Completed) []rueidis.RedisResult {
	if len(multi) > 0 {
		if args := multi[0].Commands(); len(args) > 1 && args[0] == "EVALSHA" && args[1] == c.sha {
			if !c.on.Load() {
				c.sent.Add(1)
				return c.Client.DoMulti(ctx, multi...)
			}
			c.n.Add(1)
			<-c.gate
			return c.Client.DoMulti(context.WithoutCancel(ctx), multi...)
		}
	}
	return c.Client.DoMulti(ctx, multi...)
}

// TestRegressExpiredHoldReleased: a hold the watchdog gives up at its
// deadline is released, so that a renewal that was already on its way and
// lands after the loss does not keep the lock for a whole new lease with
// nobody holding it (Unlock of a lost hold sends nothing).
func TestRegressExpiredHoldReleased(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx := context.Background()
		var on atomic.Bool
		held := new(atomic.Int64)
		gate := make(chan struct{})
		raw := redisClient(t, tp)
		const timeout = 3 * time.Second
		sent := new(atomic.Int64)
		c, err := rlock.NewClient(heldRenewals{Client: raw, sha: shaOf(luascripts.Renew), on: &on, n: held, sent: sent, gate: gate}, rlock.Options{WatchdogTimeout: timeout})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, c.Close()) })
		m := c.Mutex(lockName(t))
		lctx, err := m.Lock(ctx)
		require.NoError(t, err)
		// One renewal first: it loads the script where the lock lives, so
		// that the held one is not refused with NOSCRIPT and re-sent (by
		// then its context is over).
		awaitCond(t, 2*timeout, "a first renewal", func() bool { return sent.Load() > 0 })
		on.Store(true)
		requireLost(t, lctx, 2*timeout, "the hold whose renewal is held")
		require.NotZero(t, held.Load(), "no renewal was held")
		close(gate) // the held renewal lands now, within the lease's drift margin
		awaitCond(t, timeout/2, "the lost hold's lock to be released", func() bool {
			return !exists(t, raw, m.Key())
		})
		require.ErrorIs(t, m.Unlock(lctx), rlock.ErrNotHeld)
	})
}

// heldQueuedTries holds the Mutex acquire calls of queued waiters (the
// script's waiter flag set), while on, until gate closes.
type heldQueuedTries struct {
	rueidis.Client
	sha  string
	on   *atomic.Bool
	n    *atomic.Int64 // calls held
	gate chan struct{}
}

func (c heldQueuedTries) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	// EVALSHA sha 3 lock fence queue owner lease entry waiter ...
	if args := cmd.Commands(); c.on.Load() && len(args) > 9 && args[0] == "EVALSHA" && args[1] == c.sha && args[9] == "1" {
		c.n.Add(1)
		select {
		case <-c.gate:
		case <-ctx.Done():
		}
	}
	return c.Client.Do(ctx, cmd)
}

// TestRegressSpinBesidePubSub: a spin variant in the same client as a
// queued waiter of the same lock is a contender like any other: it counts
// that waiter as ahead of it. Its tries went as the client's own queue
// entry, so a SpinMutex took the lock kept for its client's woken Mutex
// waiter (whose next try was then refused, and which no release would tell
// again), and a SpinSemaphore's grant deleted the queued Semaphore waiter's
// entry and want.
func TestRegressSpinBesidePubSub(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx := context.Background()
		t.Run("mutex", func(t *testing.T) {
			var on atomic.Bool
			held := new(atomic.Int64)
			gate := make(chan struct{})
			c, err := rlock.NewClient(heldQueuedTries{Client: redisClient(t, tp), sha: shaOf(luascripts.Acquire), on: &on, n: held, gate: gate}, rlock.Options{})
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, c.Close()) })
			name := lockName(t)
			other := lockClient(t, tp, rlock.Options{}).Mutex(name)
			hctx := mustLock(t, ctx, other)
			got := make(chan error, 1)
			go func() {
				lctx, err := c.Mutex(name).Lock(ctx)
				if err == nil {
					err = c.Mutex(name).Unlock(lctx)
				}
				got <- err
			}()
			awaitCond(t, 10*time.Second, "the Mutex waiter to queue", func() bool {
				info, err := c.Inspect(ctx, name)
				require.NoError(t, err)
				return len(info.Waiters) > 0
			})
			on.Store(true) // its next try, once woken, waits at the gate
			require.NoError(t, other.Unlock(hctx))
			awaitCond(t, 10*time.Second, "the woken waiter's try", func() bool { return held.Load() > 0 })
			sctx, ok, err := c.SpinMutex(name).TryLock(ctx)
			require.NoError(t, err)
			if ok {
				require.NoError(t, c.SpinMutex(name).Unlock(sctx))
			}
			require.False(t, ok, "the spin try took the lock kept for the woken waiter")
			close(gate)
			require.NoError(t, <-got)
		})
		t.Run("semaphore", func(t *testing.T) {
			c := lockClient(t, tp, rlock.Options{})
			name := lockName(t)
			other := lockClient(t, tp, rlock.Options{}).Semaphore(name, 2)
			hctx, err := other.Acquire(ctx, 1)
			require.NoError(t, err)
			wctx, cancel := context.WithCancel(ctx)
			got := make(chan error, 1)
			go func() {
				_, err := c.Semaphore(name, 2).Acquire(wctx, 2)
				got <- err
			}()
			awaitCond(t, 10*time.Second, "the Semaphore waiter to queue", func() bool {
				info, err := c.InspectSemaphore(ctx, name)
				require.NoError(t, err)
				return len(info.Waiters) > 0
			})
			sctx, ok, err := c.SpinSemaphore(name, 2).TryAcquire(ctx, 1)
			require.NoError(t, err)
			if ok {
				require.NoError(t, c.SpinSemaphore(name, 2).Release(sctx))
			}
			require.False(t, ok, "the spin try took a permit the queued waiter is owed first")
			info, err := c.InspectSemaphore(ctx, name)
			require.NoError(t, err)
			require.Len(t, info.Waiters, 1, "the queued waiter's entry")
			cancel()
			require.ErrorIs(t, <-got, context.Canceled)
			require.NoError(t, other.Release(hctx))
		})
	})
}
