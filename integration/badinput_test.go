package integration

import (
	"context"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/rlock"
)

// unusualNames are valid names that look like something else: glob
// patterns, a NUL byte, invalid UTF-8 next to its lossy rendering (U+FFFD),
// and the longest name allowed. Each must be a lock of its own.
var unusualNames = []string{
	"a*", "ab", "a?", "[ab]", "*",
	"a\x00b", "a",
	"\xff", "\uFFFD",
	strings.Repeat("n", rlock.MaxNameLen),
}

// TestUnusualNames: every name in unusualNames is its own lock, literally.
// Holding one leaves all the others free ("a*" is not a pattern that
// covers "ab"), ForceUnlock of one leaves the others held, and the key on
// the server is the name's bytes as given. On Cluster, key, channel and
// name hash to one slot, as Redis computes it.
func TestUnusualNames(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx := context.Background()
		rc := redisClient(t, tp)
		suffix := lockName(t) // keeps the names apart from other tests' locks
		holder, other := lockClient(t, tp, rlock.Options{}), lockClient(t, tp, rlock.Options{})
		names := make([]string, len(unusualNames))
		for i, n := range unusualNames {
			names[i] = n
			if len(n) < rlock.MaxNameLen {
				names[i] = n + "|" + suffix
			}
		}

		for i, name := range names {
			m := holder.Mutex(name)
			lctx := mustLock(t, ctx, m)
			require.Equal(t, rlock.DefaultPrefix+":{"+name+"}", m.Key())
			require.True(t, exists(t, rc, m.Key()), "the key is the name's bytes as given")
			for j, o := range names {
				held, err := other.Mutex(o).IsLocked(ctx)
				require.NoError(t, err)
				require.Equal(t, i == j, held, "%q held, %q reported held=%v", name, o, held)
				if i == j {
					continue
				}
				om := other.Mutex(o)
				octx, ok, err := om.TryLock(ctx)
				require.NoError(t, err)
				require.True(t, ok, "%q held, %q should be free", name, o)
				require.NoError(t, om.Unlock(octx))
			}
			requireBusy(t, other.Mutex(name))
			require.NoError(t, m.Unlock(lctx))
			if tp.cluster {
				requireOneSlot(t, rc, name, m.Key(), m.Key()+":ch:"+holder.ID(), m.Key()+":q", m.Key()+":r", m.Key()+":fence")
			}
		}

		// Hold them all; force one open: only that one is freed.
		var held []*rlock.Mutex
		var lctxs []context.Context
		for _, name := range names {
			m := holder.Mutex(name)
			lctxs = append(lctxs, mustLock(t, ctx, m, rlock.WithLease(time.Minute)))
			held = append(held, m)
		}
		forced, err := other.ForceUnlock(ctx, names[0])
		require.NoError(t, err)
		require.True(t, forced)
		for i, m := range held {
			locked, err := other.Mutex(m.Name()).IsLocked(ctx)
			require.NoError(t, err)
			require.Equal(t, i != 0, locked, "%q after ForceUnlock(%q)", m.Name(), names[0])
			if i != 0 {
				require.NoError(t, m.Unlock(lctxs[i]))
			}
		}
		// The forced one's holder (a fixed lease: no watchdog to tell it)
		// finds out at its Unlock.
		require.ErrorIs(t, held[0].Unlock(lctxs[0]), rlock.ErrNotHeld)
	})
}

// requireOneSlot asks the Cluster which slot each string hashes to.
func requireOneSlot(t *testing.T, rc rueidis.Client, name string, keys ...string) {
	t.Helper()
	ctx := context.Background()
	want, err := rc.Do(ctx, rc.B().ClusterKeyslot().Key(name).Build()).AsInt64()
	require.NoError(t, err)
	for _, k := range keys {
		got, err := rc.Do(ctx, rc.B().ClusterKeyslot().Key(k).Build()).AsInt64()
		require.NoError(t, err)
		require.Equal(t, want, got, "%q is in slot %d, its name %q in %d", k, got, name, want)
	}
}

// TestGlobNamesPublishLiterally: the unlock of "a*" wakes only its own
// waiters; a client queued on "ab" hears nothing.
func TestGlobNamesPublishLiterally(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx := context.Background()
		rc := redisClient(t, tp)
		base := lockName(t)
		c := lockClient(t, tp, rlock.Options{})
		glob, plain := c.Mutex(base+"*"), c.Mutex(base+"b")
		sub := rawWaiter(t, tp, rc, plain.Key())
		lctx := mustLock(t, ctx, glob)
		require.NoError(t, glob.Unlock(lctx))
		publish(t, rc, tp, plain.Key()+":ch:"+rawWaiterID, "sentinel")
		requireNextMessage(t, sub, "sentinel", "the unlock of a glob-named lock reached another lock's channel")
	})
}

func requireNextMessage(t *testing.T, sub *rawSubscriber, want, msg string) {
	t.Helper()
	select {
	case got := <-sub.msgs:
		require.Equal(t, want, got, msg)
	case <-time.After(10 * time.Second):
		t.Fatalf("no message %q within 10s", want)
	}
}

// TestDoubleUnlock: a second Unlock through the ended lock context, an
// Unlock with a context that carries no hold, and both again after someone
// else took the lock, all return ErrNotHeld, publish nothing and leave the
// new holder alone.
func TestDoubleUnlock(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		for _, spin := range []bool{false, true} {
			ctx := context.Background()
			rc := redisClient(t, tp)
			name := lockName(t)
			c := lockClient(t, tp, rlock.Options{})
			m := c.Mutex(name)
			if spin {
				m = c.SpinMutex(name)
			}
			channel := m.Key() + ":ch:" + rawWaiterID
			sub := rawWaiter(t, tp, rc, m.Key())

			lctx := mustLock(t, ctx, m)
			require.NoError(t, m.Unlock(lctx))
			requireNextMessage(t, sub, "unlock", "the release published nothing")
			require.ErrorIs(t, m.Unlock(lctx), rlock.ErrNotHeld)
			require.ErrorIs(t, m.Unlock(ctx), rlock.ErrNotHeld)

			newer := lockClient(t, tp, rlock.Options{}).Mutex(name)
			nctx := mustLock(t, ctx, newer)
			// The raw waiter, woken, never came: the acquire that found its
			// window passed dropped it and told it so.
			requireNextMessage(t, sub, "unlock", "a lapsed waiter was dropped untold")
			require.ErrorIs(t, m.Unlock(lctx), rlock.ErrNotHeld)
			require.ErrorIs(t, m.Unlock(ctx), rlock.ErrNotHeld)
			require.NoError(t, nctx.Err())
			require.Equal(t, 1, holdCount(t, nctx, newer))

			publish(t, rc, tp, channel, "sentinel")
			requireNextMessage(t, sub, "sentinel", "a failed Unlock published")
			queueRawWaiter(t, rc, m.Key())
			require.NoError(t, newer.Unlock(nctx))
			requireNextMessage(t, sub, "unlock", "the new holder's release published nothing")
		}
	})
}

// TestUnlockIgnoresCancellation: Unlock is the one method that works with a
// cancelled context, so that `defer m.Unlock(lctx)` releases after lctx ended.
func TestUnlockIgnoresCancellation(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		rc := redisClient(t, tp)
		m := lockClient(t, tp, rlock.Options{}).Mutex(lockName(t))
		parent, cancel := context.WithCancel(context.Background())
		lctx := mustLock(t, parent, m)
		cancel()
		require.ErrorIs(t, lctx.Err(), context.Canceled)
		require.NoError(t, m.Unlock(lctx))
		require.False(t, exists(t, rc, m.Key()))
	})
}

// TestExtremeWaitsAndLeases: the largest durations work against Redis
// without overflowing: WithWait(MaxInt64) waits until ctx ends, WithWait(0)
// tries once, WithLease(MaxLease) sets a year-long expiry.
func TestExtremeWaitsAndLeases(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx := context.Background()
		name := lockName(t)
		holder := lockClient(t, tp, rlock.Options{}).Mutex(name)
		hctx := mustLock(t, ctx, holder, rlock.WithLease(rlock.MaxLease))
		ttl, err := holder.TTL(hctx)
		require.NoError(t, err)
		require.Greater(t, ttl, rlock.MaxLease-time.Hour)

		c := lockClient(t, tp, rlock.Options{})
		for _, m := range []*rlock.Mutex{c.Mutex(name), c.SpinMutex(name)} {
			_, ok, err := m.TryLock(ctx, rlock.WithWait(0))
			require.NoError(t, err)
			require.False(t, ok)
			wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			_, ok, err = m.TryLock(wctx, rlock.WithWait(math.MaxInt64))
			cancel()
			require.ErrorIs(t, err, context.DeadlineExceeded)
			require.False(t, ok)
		}
		require.NoError(t, holder.Unlock(hctx))
	})
}

// TestCloseWhileWaiting extends TestClose to every kind of waiter: three
// pub/sub Lock waiters (one contending on the client's subscription, two
// behind it in the client's gate), a pub/sub TryLock with a wait, and the
// spin variant of both. Close makes all of them return
// ErrClosed at once, and no subscription is left on the server.
func TestCloseWhileWaiting(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx := context.Background()
		holder := lockClient(t, tp, rlock.Options{})
		att := newAttempts()
		c, err := rlock.NewClient(redisClient(t, tp), att.options(rlock.Options{}))
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })

		var wg sync.WaitGroup
		errs := make(chan error, 6)
		var channels []string
		// Each group waits on a lock of its own, so its waits can be
		// counted exactly (see blockWaiters); a spinner tries, then sleeps.
		group := func(kind string, n int, spin, try bool) {
			name := lockName(t) + "-" + kind
			hm := holder.Mutex(name)
			hctx := mustLock(t, ctx, hm, rlock.WithLease(time.Minute))
			t.Cleanup(func() { require.NoError(t, hm.Unlock(hctx)) })
			channels = append(channels, hm.Key()+":ch:"+c.ID())
			waiter := func() {
				m := c.Mutex(name)
				if spin {
					m = c.SpinMutex(name)
				}
				var err error
				if try {
					_, _, err = m.TryLock(ctx, rlock.WithWait(time.Hour))
				} else {
					_, err = m.Lock(ctx)
				}
				errs <- err
			}
			if !spin {
				blockWaiters(t, att, name, n, &wg, waiter)
				return
			}
			wg.Add(1)
			go func() { defer wg.Done(); waiter() }()
			await(t, att.reached(name, 1), 10*time.Second, kind+" to try")
		}
		group("lock", 3, false, false)
		group("trylock", 1, false, true)
		group("spin-lock", 1, true, false)
		group("spin-trylock", 1, true, true)

		for _, ch := range channels[:2] {
			require.Positive(t, subscribers(t, tp, ch), "the pub/sub waiters on %s are not subscribed", ch)
		}
		require.NoError(t, c.Close())
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		await(t, done, 5*time.Second, "every waiter to return after Close")
		close(errs)
		for err := range errs {
			require.ErrorIs(t, err, rlock.ErrClosed)
		}
		for _, ch := range channels {
			require.Zero(t, subscribers(t, tp, ch), "%s is still subscribed after Close", ch)
		}
	})
}

// subscribers counts the subscribers of channel on every node, classic
// and sharded.
func subscribers(t *testing.T, tp topology, channel string) int64 {
	t.Helper()
	ctx := context.Background()
	var total int64
	for _, addr := range tp.addrs {
		rc := nodeClient(t, addr)
		for _, cmd := range []rueidis.Completed{
			rc.B().PubsubNumsub().Channel(channel).Build(),
			rc.B().PubsubShardnumsub().Channel(channel).Build(),
		} {
			counts, err := rc.Do(ctx, cmd).AsIntMap()
			require.NoError(t, err)
			total += counts[channel]
		}
	}
	return total
}
