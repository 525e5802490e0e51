package miniredistest

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/rlock"
)

// testLocks is newLocks for a test: a fresh miniredis, closed with the test.
func testLocks(t *testing.T, opts rlock.Options) (*rlock.Client, *miniredis.Miniredis) {
	t.Helper()
	mr := miniredis.RunT(t)
	locks, done := newLocks(mr, opts)
	t.Cleanup(done)
	return locks, mr
}

// TestSupported is the promise README.md and docs/testing.md make: every
// primitive and operation below works on miniredis, with newLocks' options.
func TestSupported(t *testing.T) {
	ctx := context.Background()
	cases := map[string]func(t *testing.T, c *rlock.Client, mr *miniredis.Miniredis){
		"TryLock with a wait": func(t *testing.T, c *rlock.Client, _ *miniredis.Miniredis) {
			l, err := c.Mutex("a").Lock(ctx)
			require.NoError(t, err)
			_, ok, err := c.Mutex("a").TryLock(ctx, rlock.WithWait(20*time.Millisecond))
			require.NoError(t, err)
			require.False(t, ok, "a second owner while the lock is held")
			require.NoError(t, c.Mutex("a").Unlock(l))
		},
		"WithLease, Extend, Token, TTL": func(t *testing.T, c *rlock.Client, _ *miniredis.Miniredis) {
			m := c.Mutex("a")
			l, err := m.Lock(ctx, rlock.WithLease(10*time.Second))
			require.NoError(t, err)
			require.NoError(t, m.Extend(l, 20*time.Second))
			ttl, err := m.TTL(ctx)
			require.NoError(t, err)
			require.Greater(t, ttl, 10*time.Second)
			tok, err := m.Token(l)
			require.NoError(t, err)
			require.Positive(t, tok)
			require.NoError(t, m.Unlock(l))
		},
		"spin variants": func(t *testing.T, c *rlock.Client, _ *miniredis.Miniredis) {
			l, err := c.SpinMutex("a").Lock(ctx)
			require.NoError(t, err)
			require.NoError(t, c.SpinMutex("a").Unlock(l))
			w, err := c.SpinRWMutex("b").Lock(ctx)
			require.NoError(t, err)
			require.NoError(t, c.SpinRWMutex("b").Unlock(w))
			p, err := c.SpinSemaphore("c", 2).Acquire(ctx, 2)
			require.NoError(t, err)
			require.NoError(t, c.SpinSemaphore("c", 2).Release(p))
		},
		"Mutex re-entry, HoldCount, IsLocked, Do": func(t *testing.T, c *rlock.Client, _ *miniredis.Miniredis) {
			m := c.Mutex("a")
			outer, err := m.Lock(ctx)
			require.NoError(t, err)
			inner, err := m.Lock(outer)
			require.NoError(t, err)
			n, err := m.HoldCount(inner)
			require.NoError(t, err)
			require.Equal(t, 2, n)
			require.NoError(t, m.Unlock(inner))
			require.NoError(t, m.Unlock(outer))
			locked, err := m.IsLocked(ctx)
			require.NoError(t, err)
			require.False(t, locked)
			ran := false
			require.NoError(t, c.Do(ctx, "a", func(context.Context) error { ran = true; return nil }))
			require.True(t, ran)
		},
		"RWMutex": func(t *testing.T, c *rlock.Client, _ *miniredis.Miniredis) {
			rw := c.RWMutex("a")
			r1, err := rw.RLock(ctx)
			require.NoError(t, err)
			r2, err := c.RWMutex("a").RLock(ctx) // readers share
			require.NoError(t, err)
			_, err = rw.Lock(r1)
			require.ErrorIs(t, err, rlock.ErrUpgrade)
			require.NoError(t, rw.RUnlock(r1))
			require.NoError(t, rw.RUnlock(r2))
			w, err := rw.Lock(ctx)
			require.NoError(t, err)
			r, err := rw.RLock(w) // the writer's read: its downgrade once it unlocks
			require.NoError(t, err)
			require.NoError(t, rw.Unlock(w))
			_, ok, err := c.RWMutex("a").TryLock(ctx)
			require.NoError(t, err)
			require.False(t, ok, "a writer while the downgraded read is held")
			require.NoError(t, rw.RUnlock(r))
		},
		"Semaphore": func(t *testing.T, c *rlock.Client, _ *miniredis.Miniredis) {
			s := c.Semaphore("a", 3)
			p, err := s.Acquire(ctx, 2)
			require.NoError(t, err)
			n, err := s.Available(ctx)
			require.NoError(t, err)
			require.EqualValues(t, 1, n)
			_, ok, err := s.TryAcquire(ctx, 2)
			require.NoError(t, err)
			require.False(t, ok, "2 permits while 1 is left")
			q, ok, err := s.TryAcquire(ctx, 1)
			require.NoError(t, err)
			require.True(t, ok)
			require.NoError(t, s.Release(q))
			require.NoError(t, s.Release(p))
		},
		"Election": func(t *testing.T, c *rlock.Client, _ *miniredis.Miniredis) {
			e := c.Election("a")
			lctx, err := e.Campaign(ctx, "me")
			require.NoError(t, err)
			l, err := e.Leader(ctx)
			require.NoError(t, err)
			require.Equal(t, "me", l.Value)
			require.NoError(t, e.Resign(lctx))
			_, err = e.Leader(ctx)
			require.ErrorIs(t, err, rlock.ErrNoLeader)
		},
		"MultiMutex": func(t *testing.T, c *rlock.Client, _ *miniredis.Miniredis) {
			mm := c.MultiMutex("a", "b")
			l, err := mm.Lock(ctx)
			require.NoError(t, err)
			require.NoError(t, mm.Unlock(l))
		},
		"Locker and RLocker": func(t *testing.T, c *rlock.Client, _ *miniredis.Miniredis) {
			l := rlock.Locker(ctx, c.Mutex("a"))
			l.Lock()
			l.Unlock()
			r := rlock.RLocker(ctx, c.RWMutex("b"))
			r.Lock()
			r.Unlock()
		},
		"Inspect, List, ForceUnlock": func(t *testing.T, c *rlock.Client, _ *miniredis.Miniredis) {
			lctx, err := c.Mutex("a").Lock(ctx)
			require.NoError(t, err)
			defer runtime.KeepAlive(lctx) // a dropped lock context is unlocked
			info, err := c.Inspect(ctx, "a")
			require.NoError(t, err)
			require.NotEmpty(t, info.Holders)
			_, err = c.InspectRWMutex(ctx, "a")
			require.NoError(t, err)
			_, err = c.InspectSemaphore(ctx, "a")
			require.NoError(t, err)
			all, err := c.List(ctx, "*")
			require.NoError(t, err)
			require.Len(t, all, 1)
			ok, err := c.ForceUnlock(ctx, "a")
			require.NoError(t, err)
			require.True(t, ok)
		},
		"CountDownLatch": func(t *testing.T, c *rlock.Client, _ *miniredis.Miniredis) {
			b := c.CountDownLatch("a")
			ok, err := b.TrySetCount(ctx, 1)
			require.NoError(t, err)
			require.True(t, ok)
			require.NoError(t, b.CountDown(ctx))
			require.NoError(t, b.Await(ctx))
		},
		// A lease runs on miniredis' clock, which moves only when told:
		// FastForward expires the key, and the next owner gets the lock.
		"lease expiry by FastForward": func(t *testing.T, c *rlock.Client, mr *miniredis.Miniredis) {
			lctx, err := c.Mutex("a").Lock(ctx, rlock.WithLease(time.Second))
			require.NoError(t, err)
			defer runtime.KeepAlive(lctx) // the lease must run out, not be released
			mr.FastForward(2 * time.Second)
			// Another client, as another process: this one's own goroutines
			// take turns locally until the hold's context ends, on the real
			// clock.
			other, done := newLocks(mr, rlock.Options{})
			defer done()
			l, ok, err := other.Mutex("a").TryLock(ctx)
			require.NoError(t, err)
			require.True(t, ok, "the expired lock")
			require.NoError(t, other.Mutex("a").Unlock(l))
		},
	}
	for name, f := range cases {
		t.Run(name, func(t *testing.T) {
			c, mr := testLocks(t, rlock.Options{})
			f(t, c, mr)
		})
	}
}

// TestWakeupByPubSub: a waiter of another client is woken by the release's
// message, not by the holder's 30 s lease running out.
func TestWakeupByPubSub(t *testing.T) {
	sleeping := make(chan struct{}, 1)
	holder, mr := testLocks(t, rlock.Options{})
	waiter, done := newLocks(mr, rlock.Options{OnWait: func(string) {
		select {
		case sleeping <- struct{}{}:
		default:
		}
	}})
	t.Cleanup(done)

	l, err := holder.Mutex("a").Lock(t.Context())
	require.NoError(t, err)
	got := make(chan error, 1)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	go func() {
		w, err := waiter.Mutex("a").Lock(ctx)
		if err == nil {
			err = waiter.Mutex("a").Unlock(w)
		}
		got <- err
	}()
	<-sleeping // the waiter queued and subscribed
	require.NoError(t, holder.Mutex("a").Unlock(l))
	require.NoError(t, <-got)
}

// TestUnsupported pins what does not work on miniredis, as documented: the
// default rueidis options (rueidis takes miniredis for a one-node Cluster,
// so latchkey waits with SSUBSCRIBE, which miniredis lacks), and sharded
// pub/sub whatever the options. Only a Lock that has to wait for another
// client subscribes, so that is what fails.
func TestUnsupported(t *testing.T) {
	t.Run("default rueidis options", func(t *testing.T) {
		mr := miniredis.RunT(t)
		open := func() *rlock.Client {
			rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{mr.Addr()}, DisableCache: true})
			require.NoError(t, err)
			t.Cleanup(rc.Close)
			require.Equal(t, rueidis.ClientModeCluster, rc.Mode(), "rueidis' view of miniredis")
			locks, err := rlock.NewClient(rc, rlock.Options{})
			require.NoError(t, err)
			t.Cleanup(func() { locks.Close() })
			return locks
		}
		requireWaitRefused(t, open(), open(), "SSUBSCRIBE")
	})
	t.Run("PubSubSharded", func(t *testing.T) {
		holder, mr := testLocks(t, rlock.Options{PubSub: rlock.PubSubSharded})
		waiter, done := newLocks(mr, rlock.Options{PubSub: rlock.PubSubSharded})
		t.Cleanup(done)
		requireWaitRefused(t, holder, waiter, "SSUBSCRIBE")
	})
}

// requireWaitRefused: holder's uncontended Lock works, and waiter's Lock,
// which has to wait, fails naming cmd.
func requireWaitRefused(t *testing.T, holder, waiter *rlock.Client, cmd string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	l, err := holder.Mutex("a").Lock(ctx)
	require.NoError(t, err, "an uncontended Lock needs no pub/sub")
	_, err = waiter.Mutex("a").Lock(ctx)
	require.ErrorContains(t, err, cmd)
	require.NoError(t, holder.Mutex("a").Unlock(l))
}
