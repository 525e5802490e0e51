package integration

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/rlock"
)

// The Redisson protocol's tests: latchkey clients with ProtocolRedisson
// against the emulated Java clients of redisson_emulator_test.go, both
// ways, on standalone Redis and on the Cluster.

// redissonLease is the fixed lease of the holders in the wake-up tests:
// a waiter that gets the lock well within it (redissonWoken) was woken by
// the unlock message, not by the lease running out.
const (
	redissonLease = 30 * time.Second
	redissonWoken = 5 * time.Second
)

// redissonNames returns a fresh lock name without braces and one with a
// hash tag of its own, and deletes their keys (Redisson's token counters
// too: they are not latchkey's) when the test ends.
func redissonNames(t *testing.T, rc rueidis.Client) []string {
	t.Helper()
	names := []string{lockName(t), "app:{" + lockName(t) + "}:lock"}
	t.Cleanup(func() {
		for _, n := range names {
			_ = rc.Do(context.Background(), rc.B().Del().Key(n).Build()).Error()
			_ = rc.Do(context.Background(), rc.B().Del().Key(javaTokenKey(n)).Build()).Error()
		}
	})
	return names
}

// forEachRedissonName runs f for each topology and each of redissonNames.
func forEachRedissonName(t *testing.T, f func(t *testing.T, tp topology, rc rueidis.Client, name string)) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		rc := redisClient(t, tp)
		for i, name := range redissonNames(t, rc) {
			t.Run([]string{"plain", "braces"}[i], func(t *testing.T) { f(t, tp, rc, name) })
		}
	})
}

func redissonOptions(opts rlock.Options) rlock.Options {
	opts.Protocol = rlock.ProtocolRedisson
	return opts
}

// TestRedissonExclusion: Go goroutines (two clients, two each, on Mutex
// and SpinMutex) and Java threads (two emulated clients, two each) do
// unprotected read-modify-write cycles of one Redis counter under the same
// lock. Any overlap loses an increment, so the count must come out exact.
func TestRedissonExclusion(t *testing.T) {
	const rounds = 25
	forEachRedissonName(t, func(t *testing.T, tp topology, rc rueidis.Client, name string) {
		ctx := context.Background()
		counter := "test:{" + lockName(t) + "}:counter"
		t.Cleanup(func() { _ = rc.Do(ctx, rc.B().Del().Key(counter).Build()).Error() })
		increment := func() error {
			n, err := rc.Do(ctx, rc.B().Get().Key(counter).Build()).AsInt64()
			if err != nil && !rueidis.IsRedisNil(err) {
				return err
			}
			return rc.Do(ctx, rc.B().Set().Key(counter).Value(strconv.FormatInt(n+1, 10)).Build()).Error()
		}
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for c := range 2 {
			locks := lockClient(t, tp, redissonOptions(rlock.Options{}))
			m := locks.Mutex(name)
			if c == 1 {
				m = locks.SpinMutex(name)
			}
			for range 2 {
				wg.Go(func() {
					for range rounds {
						lctx, err := m.Lock(ctx)
						if err == nil {
							err = increment()
							err = errors.Join(err, m.Unlock(lctx))
						}
						if err != nil {
							errs <- fmt.Errorf("go: %w", err)
							return
						}
					}
				})
			}
		}
		for range 2 {
			l := newJavaClient(t, tp, 30*time.Second).lock(name, false)
			for thread := range int64(2) {
				wg.Go(func() {
					for range rounds {
						_, err := l.Lock(ctx, thread+1, 0)
						if err == nil {
							err = increment()
							err = errors.Join(err, l.Unlock(ctx, thread+1))
						}
						if err != nil {
							errs <- fmt.Errorf("java: %w", err)
							return
						}
					}
				})
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		n, err := rc.Do(ctx, rc.B().Get().Key(counter).Build()).AsInt64()
		require.NoError(t, err)
		require.Equal(t, int64(8*rounds), n, "an increment was lost: two holders overlapped")
		require.False(t, exists(t, rc, name), "the lock is free at the end")
	})
}

// TestRedissonWake: a waiter on one side is woken by the other side's
// unlock message. The holder's lease is redissonLease, so a waiter that
// gets the lock within redissonWoken can only have been woken by the
// message.
func TestRedissonWake(t *testing.T) {
	forEachRedissonName(t, func(t *testing.T, tp topology, _ rueidis.Client, name string) {
		ctx := context.Background()
		att := newAttempts()
		m := lockClient(t, tp, redissonOptions(att.options(rlock.Options{}))).Mutex(name)
		java := newJavaClient(t, tp, 30*time.Second)
		l := java.lock(name, false)

		t.Run("GoWokenByJava", func(t *testing.T) {
			_, err := l.Lock(ctx, 1, redissonLease)
			require.NoError(t, err)
			done := startWaiter(t, ctx, m, att) // subscribed, then refused
			unlocked := time.Now()
			require.NoError(t, l.Unlock(ctx, 1))
			requireAcquired(t, done, redissonWoken, "the Go waiter was not woken by the Java unlock")
			// The figure for the "within 100 ms"; a bound here would be a timed test.
			t.Logf("WAKE java-unlock->go-acquired %v", time.Since(unlocked))
		})

		t.Run("JavaWokenByGo", func(t *testing.T) {
			lctx := mustLock(t, ctx, m, rlock.WithLease(redissonLease))
			done := make(chan error, 1)
			go func() {
				_, err := l.Lock(ctx, 2, 0)
				if err == nil {
					err = l.Unlock(ctx, 2)
				}
				done <- err
			}()
			await(t, javaWaiting(java, name), 10*time.Second, "the Java waiter to wait")
			unlocked := time.Now()
			require.NoError(t, m.Unlock(lctx))
			requireAcquired(t, done, redissonWoken, "the Java waiter was not woken by the Go unlock")
			t.Logf("WAKE go-unlock->java-acquired-and-unlocked %v", time.Since(unlocked))
		})
	})
}

// javaWaiting returns a channel closed once one of java's threads waits
// for name's unlock message.
func javaWaiting(java *javaClient, name string) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		for w := range java.waits {
			if w == name {
				return
			}
		}
	}()
	return ch
}

// TestRedissonReentry: each side re-enters its own hold, counted in its
// field as Redisson counts, and the other side stays out until the last
// unlock. Inspect reads a Java holder (no record: owner and count only).
func TestRedissonReentry(t *testing.T) {
	forEachRedissonName(t, func(t *testing.T, tp topology, rc rueidis.Client, name string) {
		ctx := context.Background()
		locks := lockClient(t, tp, redissonOptions(rlock.Options{}))
		m := locks.Mutex(name)
		l := newJavaClient(t, tp, 30*time.Second).lock(name, false)

		outer := mustLock(t, ctx, m)
		inner := mustLock(t, outer, m)
		require.Equal(t, 2, holdCount(t, inner, m))
		fields, err := rc.Do(ctx, rc.B().Hgetall().Key(name).Build()).AsStrMap()
		require.NoError(t, err)
		require.Len(t, fields, 1)
		for owner, count := range fields {
			require.Regexp(t, "^"+locks.ID()+":[0-9]+$", owner, "Redisson's field: <uuid>:<n>")
			require.Equal(t, "2", count)
		}
		ok, err := l.TryLock(ctx, 1, 0)
		require.NoError(t, err)
		require.False(t, ok, "Java got in while Go held")
		require.NoError(t, m.Unlock(inner))
		ok, err = l.TryLock(ctx, 1, 0)
		require.NoError(t, err)
		require.False(t, ok, "Java got in after Go's inner unlock")
		require.NoError(t, m.Unlock(outer))

		_, err = l.Lock(ctx, 1, 0)
		require.NoError(t, err)
		_, err = l.Lock(ctx, 1, 0)
		require.NoError(t, err)
		info, err := locks.Inspect(ctx, name)
		require.NoError(t, err)
		require.Len(t, info.Holders, 1)
		require.Equal(t, l.owner(1), info.Holders[0].Owner)
		require.Equal(t, int64(2), info.Holders[0].Count)
		require.Greater(t, info.LeaseLeft, time.Duration(0))
		require.Empty(t, info.Damaged)
		_, ok, err = m.TryLock(ctx)
		require.NoError(t, err)
		require.False(t, ok, "Go got in while Java held")
		require.NoError(t, l.Unlock(ctx, 1))
		_, ok, err = m.TryLock(ctx)
		require.NoError(t, err)
		require.False(t, ok, "Go got in after Java's inner unlock")
		require.NoError(t, l.Unlock(ctx, 1))
		require.ErrorIs(t, l.Unlock(ctx, 1), errIllegalMonitorState)
		lctx, ok, err := m.TryLock(ctx)
		require.NoError(t, err)
		require.True(t, ok, "Go could not take the lock Java freed")
		require.NoError(t, m.Unlock(lctx))
	})
}

// TestRedissonForceUnlock: Java's forceUnlock reaches a Go holder kept by
// the watchdog as ErrLockLost (its renewal finds the field gone), and
// Go's ForceUnlock wakes a Java waiter at once.
func TestRedissonForceUnlock(t *testing.T) {
	forEachRedissonName(t, func(t *testing.T, tp topology, _ rueidis.Client, name string) {
		ctx := context.Background()
		locks := lockClient(t, tp, redissonOptions(rlock.Options{WatchdogTimeout: 3 * time.Second}))
		m := locks.Mutex(name)
		java := newJavaClient(t, tp, 30*time.Second)
		l := java.lock(name, false)

		lctx := mustLock(t, ctx, m)
		ok, err := l.ForceUnlock(ctx)
		require.NoError(t, err)
		require.True(t, ok)
		requireLost(t, lctx, 10*time.Second, "the Go holder never learnt of Java's forceUnlock")
		require.ErrorIs(t, m.Unlock(lctx), rlock.ErrNotHeld)

		_, err = l.Lock(ctx, 1, redissonLease)
		require.NoError(t, err)
		done := make(chan error, 1)
		go func() {
			_, err := l.Lock(ctx, 2, redissonLease)
			if err == nil {
				err = l.Unlock(ctx, 2)
			}
			done <- err
		}()
		await(t, javaWaiting(java, name), 10*time.Second, "the Java waiter to wait")
		ok, err = locks.ForceUnlock(ctx, name)
		require.NoError(t, err)
		require.True(t, ok)
		requireAcquired(t, done, redissonWoken, "the Java waiter was not woken by Go's ForceUnlock")
	})
}

// TestRedissonTokens: Go's tokens and RFencedLock's come from one counter,
// so they rise across both sides; a Java re-entry takes a token, as does a
// Go one, whose level still reports its grant's token.
func TestRedissonTokens(t *testing.T) {
	forEachRedissonName(t, func(t *testing.T, tp topology, _ rueidis.Client, name string) {
		ctx := context.Background()
		m := lockClient(t, tp, redissonOptions(rlock.Options{})).Mutex(name)
		l := newJavaClient(t, tp, 30*time.Second).lock(name, true)

		t1, err := l.Lock(ctx, 1, 0)
		require.NoError(t, err)
		t2, err := l.Lock(ctx, 1, 0)
		require.NoError(t, err)
		require.Equal(t, t1+1, t2, "RFencedLock takes a token at a re-entry")
		require.NoError(t, l.Unlock(ctx, 1))
		require.NoError(t, l.Unlock(ctx, 1))

		outer := mustLock(t, ctx, m)
		g1, err := m.Token(outer)
		require.NoError(t, err)
		require.Equal(t, t2+1, g1, "Go's grant takes the next token of the same counter")
		inner := mustLock(t, outer, m)
		g2, err := m.Token(inner)
		require.NoError(t, err)
		require.Equal(t, g1, g2, "a re-entered level reports its grant's token")
		require.NoError(t, m.Unlock(inner))
		require.NoError(t, m.Unlock(outer))

		t3, err := l.Lock(ctx, 1, 0)
		require.NoError(t, err)
		require.Equal(t, g1+2, t3, "Go's re-entry took a token too, as RFencedLock's would")
		require.NoError(t, l.Unlock(ctx, 1))
	})
}

// TestRedissonElectionRefused: an Election has no Redisson counterpart, so
// a ProtocolRedisson client refuses it, as it refuses RWMutex and the rest,
// before any I/O. It used to build the election on the Redisson Mutex's
// side, whose watchdog renews the Redisson hash, while the election took
// latchkey's lock hash: the leader's lease was never renewed.
func TestRedissonElectionRefused(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx := context.Background()
		rc := redisClient(t, tp)
		name := lockName(t)
		locks := lockClient(t, tp, redissonOptions(rlock.Options{WatchdogTimeout: time.Second}))
		e := locks.Election(name)
		lctx, err := e.Campaign(ctx, "v")
		require.ErrorIs(t, err, rlock.ErrInvalidOptions, "Campaign")
		require.Nil(t, lctx)
		_, err = e.Leader(ctx)
		require.ErrorIs(t, err, rlock.ErrInvalidOptions, "Leader")
		_, open := <-e.Observe(ctx)
		require.False(t, open, "Observe delivered a leader")
		n, err := rc.Do(ctx, rc.B().Exists().Key(name, "latchkey:{"+name+"}").Build()).AsInt64()
		require.NoError(t, err)
		require.Zero(t, n, "a refused election wrote a key")
	})
}

// TestRedissonUnpairedBraces: names whose Redisson channel would hash to
// another Cluster slot than the lock ("a}b", "a{b", "a{}b") are refused
// only on a Cluster, where Redisson cannot use them either; on standalone
// Redis (and Sentinel) Redisson uses them without trouble, so latchkey
// shares them: Lock, Inspect, exclusion of a Java holder and Unlock.
func TestRedissonUnpairedBraces(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx := context.Background()
		rc := redisClient(t, tp)
		locks := lockClient(t, tp, redissonOptions(rlock.Options{}))
		for _, suffix := range []string{"}b", "{b", "{}b"} {
			name := lockName(t) + suffix
			t.Cleanup(func() {
				_ = rc.Do(context.Background(), rc.B().Del().Key(name).Build()).Error()
				_ = rc.Do(context.Background(), rc.B().Del().Key(javaTokenKey(name)).Build()).Error()
			})
			m := locks.Mutex(name)
			if tp.cluster {
				_, err := m.Lock(ctx)
				require.ErrorIs(t, err, rlock.ErrInvalidName, "%q on a Cluster", name)
				_, err = locks.Inspect(ctx, name)
				require.ErrorIs(t, err, rlock.ErrInvalidName, "Inspect %q on a Cluster", name)
				continue
			}
			lctx, err := m.Lock(ctx)
			require.NoError(t, err, "%q off a Cluster", name)
			info, err := locks.Inspect(ctx, name)
			require.NoError(t, err)
			require.Len(t, info.Holders, 1)
			ok, err := newJavaClient(t, tp, 30*time.Second).lock(name, false).TryLock(ctx, 1, 0)
			require.NoError(t, err)
			require.False(t, ok, "Java got in while Go held %q", name)
			require.NoError(t, m.Unlock(lctx))
			require.False(t, exists(t, rc, name), "%q was not released", name)
		}
	})
}
