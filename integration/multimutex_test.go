package integration

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/rlock"
)

// TestMultiMutexExclusion: owners of overlapping name sets ({a,b}, {b,c},
// {c,a}, listed in both orders), on two clients, plus a plain Mutex on b,
// never share a name's critical section, and none deadlocks: everyone
// finishes within the test's context. On the Cluster the three names live
// on three different masters.
func TestMultiMutexExclusion(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		names := spreadNames(t, tp, 3)
		a, b, c := names[0], names[1], names[2]
		clients := []*rlock.Client{lockClient(t, tp, rlock.Options{}), lockClient(t, tp, rlock.Options{})}
		sets := [][]string{{a, b}, {b, c}, {c, a}, {b, a}, {c, b}, {a, c}}

		inside := map[string]*atomic.Int32{a: {}, b: {}, c: {}}
		var overlaps, entries atomic.Int32
		enter := func(held []string) {
			for _, n := range held {
				if inside[n].Add(1) != 1 {
					overlaps.Add(1)
				}
			}
			entries.Add(1)
			runtime.Gosched() // give the others a chance to overlap, if they can
			for _, n := range held {
				inside[n].Add(-1)
			}
		}

		const rounds = 15
		errs := make(chan error, len(clients)*len(sets)+1)
		var wg sync.WaitGroup
		for ci, cl := range clients {
			for _, set := range sets {
				mm := cl.MultiMutex(set...)
				wg.Go(func() {
					for r := range rounds {
						lctx, err := mm.Lock(ctx)
						if err != nil {
							errs <- fmt.Errorf("client %d, %q, round %d: %w", ci, set, r, err)
							return
						}
						enter(set)
						if err := mm.Unlock(lctx); err != nil {
							errs <- fmt.Errorf("client %d, %q, unlock %d: %w", ci, set, r, err)
							return
						}
					}
				})
			}
		}
		plain := clients[1].Mutex(b) // a Mutex of a member excludes the multis too
		wg.Go(func() {
			for r := range rounds {
				lctx, err := plain.Lock(ctx)
				if err != nil {
					errs <- fmt.Errorf("plain Mutex %q, round %d: %w", b, r, err)
					return
				}
				enter([]string{b})
				if err := plain.Unlock(lctx); err != nil {
					errs <- err
					return
				}
			}
		})
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err, "a holder failed (a deadlock shows as the context's deadline)")
		}
		require.Zero(t, overlaps.Load(), "two owners were inside one name's critical section")
		require.EqualValues(t, (len(clients)*len(sets)+1)*rounds, entries.Load())
		requireNoLeftovers(t, tp, names...)
	})
}

// TestMultiMutexAllOrNothing: while another owner holds b, TryLock of
// {a, b} fails (at once, or after its wait) and leaves a free; a Lock of
// {a, b} that waits for b holds nothing meanwhile (so the holder of b can
// take a too, in the other order, without a deadlock), and gets both once
// b is released; so does a TryLock with a wait.
func TestMultiMutexAllOrNothing(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		names := spreadNames(t, tp, 2)
		a, b := names[0], names[1]
		att := newAttempts()
		c := lockClient(t, tp, att.options(rlock.Options{}))
		other := lockClient(t, tp, rlock.Options{})
		mm := c.MultiMutex(b, a)

		hctx := mustLock(t, ctx, other.Mutex(b))
		_, ok, err := mm.TryLock(ctx)
		require.NoError(t, err)
		require.False(t, ok, "TryLock got {a, b} while b was held")
		tryAndRelease(t, ctx, other.Mutex(a), "a failed TryLock left a held")

		_, ok, err = mm.TryLock(ctx, rlock.WithWait(300*time.Millisecond))
		require.NoError(t, err)
		require.False(t, ok, "TryLock with a wait got {a, b} while b was held")
		tryAndRelease(t, ctx, other.Mutex(a), "a TryLock whose wait ran out left a held")

		// A Lock that must wait for b waits holding nothing.
		got := make(chan context.Context, 1)
		errc := make(chan error, 1)
		waits := att.reached(waitKey(b), att.count(waitKey(b))+1)
		go func() {
			lctx, err := mm.Lock(ctx)
			errc <- err
			got <- lctx
		}()
		await(t, waits, 20*time.Second, "the multi-lock to wait for b")
		// The holder of b now wants a too: the other order. The waiting
		// multi-lock holds nothing, so this is no deadlock.
		actx, ok, err := other.Mutex(a).TryLock(hctx, rlock.WithWait(10*time.Second))
		require.NoError(t, err)
		require.True(t, ok, "a Lock waiting for b held a meanwhile")
		require.NoError(t, other.Mutex(a).Unlock(actx))
		require.NoError(t, other.Mutex(b).Unlock(hctx))
		require.NoError(t, recvErr(t, errc, 20*time.Second, "the multi-lock to get both once b was free"))
		lctx := <-got
		for _, n := range names {
			_, ok, err := other.Mutex(n).TryLock(ctx)
			require.NoError(t, err)
			require.False(t, ok, "%q is free while the multi-lock holds it", n)
		}
		require.NoError(t, mm.Unlock(lctx))
		require.ErrorIs(t, mm.Unlock(lctx), rlock.ErrNotHeld, "a second Unlock")

		// TryLock with a wait gets both when b is freed within it.
		hctx = mustLock(t, ctx, other.Mutex(b))
		waits = att.reached(waitKey(b), att.count(waitKey(b))+1)
		tried := make(chan error, 1)
		go func() {
			tctx, ok, err := mm.TryLock(ctx, rlock.WithWait(20*time.Second))
			if err == nil && !ok {
				err = errors.New("TryLock gave up although b was freed within its wait")
			}
			if err == nil {
				err = mm.Unlock(tctx)
			}
			tried <- err
		}()
		await(t, waits, 20*time.Second, "TryLock to wait for b")
		require.NoError(t, other.Mutex(b).Unlock(hctx))
		require.NoError(t, recvErr(t, tried, 20*time.Second, "TryLock to get both once b was free"))
		requireMultiFree(t, tp, other, names, "Unlock released both")
	})
}

// TestMultiMutexLostMember: a member force-unlocked under a watchdog hold
// is found gone at the next renewal; that cancels the multi context with
// ErrLockLost, re-entering fails with it, and Unlock reports ErrNotHeld but
// still releases the other members.
func TestMultiMutexLostMember(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		names := spreadNames(t, tp, 3)
		c := lockClient(t, tp, rlock.Options{WatchdogTimeout: 600 * time.Millisecond}) // renewals every 200ms
		other := lockClient(t, tp, rlock.Options{})
		mm := c.MultiMutex(names...)
		lctx, err := mm.Lock(ctx)
		require.NoError(t, err)

		forced, err := other.ForceUnlock(ctx, names[1])
		require.NoError(t, err)
		require.True(t, forced)
		requireLost(t, lctx, 5*time.Second, "the multi context to end when a member was lost")
		require.ErrorContains(t, context.Cause(lctx), strconv.Quote(names[1]), "the cause names the lost member")

		_, err = mm.Lock(lctx)
		require.ErrorIs(t, err, rlock.ErrLockLost, "re-entering a lost multi hold")

		err = mm.Unlock(lctx)
		require.ErrorIs(t, err, rlock.ErrNotHeld)
		require.ErrorIs(t, err, rlock.ErrLockLost)
		for _, n := range []string{names[0], names[2]} {
			tryAndRelease(t, ctx, other.Mutex(n), "Unlock of a multi-lock with a lost member left "+n+" held")
		}
		requireNoLeftovers(t, tp, names...)
	})
}

// TestMultiMutexLease: WithLease applies to every member; the multi
// context's lease end is the members' and it ends with ErrLockLost when
// the leases run out; the keys then expire.
func TestMultiMutexLease(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		names := spreadNames(t, tp, 2)
		mm := lockClient(t, tp, rlock.Options{}).MultiMutex(names...)
		start := time.Now()
		lctx, err := mm.Lock(context.Background(), rlock.WithLease(300*time.Millisecond))
		require.NoError(t, err)
		d, ok := rlock.LeaseEnd(lctx)
		require.True(t, ok, "a leased multi context has a lease end")
		require.WithinRange(t, d, start, start.Add(300*time.Millisecond))
		requireLost(t, lctx, 5*time.Second, "the leases to run out")
		err = mm.Unlock(lctx)
		require.ErrorIs(t, err, rlock.ErrNotHeld)
		require.ErrorIs(t, err, rlock.ErrLockLost)
		for _, n := range names {
			awaitExpiry(t, tp, n)
		}
	})
}

// TestMultiMutexReentry: the context Lock returns re-enters the multi-lock
// (through this handle or another on the same names, with Lock or
// TryLock) and each member's Mutex; each level needs its Unlock, and the
// locks are released at the last.
func TestMultiMutexReentry(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		names := spreadNames(t, tp, 2)
		a, b := names[0], names[1]
		c := lockClient(t, tp, rlock.Options{})
		other := lockClient(t, tp, rlock.Options{})
		mm := c.MultiMutex(a, b)

		lctx, err := mm.Lock(ctx)
		require.NoError(t, err)
		inner, err := c.MultiMutex(b, a).Lock(lctx)
		require.NoError(t, err, "another handle on the same names re-enters")
		tctx, ok, err := mm.TryLock(inner)
		require.NoError(t, err)
		require.True(t, ok, "TryLock with a multi context re-enters")
		mctx := mustLock(t, tctx, c.Mutex(a)) // a member's Mutex re-enters through it
		require.Equal(t, 4, holdCount(t, mctx, c.Mutex(a)))
		require.Equal(t, 3, holdCount(t, tctx, c.Mutex(b)))

		tok, err := mm.Token(lctx, a)
		require.NoError(t, err)
		mtok, err := c.Mutex(a).Token(mctx)
		require.NoError(t, err)
		require.Equal(t, tok, mtok, "re-entries share the grant's token")

		require.NoError(t, c.Mutex(a).Unlock(mctx))
		require.NoError(t, mm.Unlock(tctx))
		require.NoError(t, mm.Unlock(inner))
		require.ErrorIs(t, mm.Unlock(inner), rlock.ErrNotHeld, "a second Unlock of one level")
		require.ErrorIs(t, context.Cause(inner), context.Canceled, "Unlock ends the level's context")
		require.NoError(t, lctx.Err(), "the outer level lives on")
		require.Equal(t, 1, holdCount(t, lctx, c.Mutex(a)))
		_, ok, err = other.MultiMutex(a).TryLock(ctx)
		require.NoError(t, err)
		require.False(t, ok, "a is free while the outer level holds it")

		require.NoError(t, mm.Unlock(lctx))
		require.ErrorIs(t, lctx.Err(), context.Canceled)
		require.ErrorIs(t, mm.Unlock(ctx), rlock.ErrNotHeld, "a context that carries no hold")
		requireMultiFree(t, tp, other, names, "the last Unlock released both")
	})
}

// TestMultiMutexClose: closing the client ends the multi context with
// ErrClosed, and Unlock afterwards still releases every member.
func TestMultiMutexClose(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx := context.Background()
		names := spreadNames(t, tp, 2)
		c, err := rlock.NewClient(redisClient(t, tp), rlock.Options{})
		require.NoError(t, err)
		mm := c.MultiMutex(names...)
		lctx, err := mm.Lock(ctx)
		require.NoError(t, err)
		require.NoError(t, c.Close())
		await(t, lctx.Done(), 5*time.Second, "Close to end the multi context")
		require.ErrorIs(t, context.Cause(lctx), rlock.ErrClosed)
		require.NoError(t, mm.Unlock(lctx))
		requireNoLeftovers(t, tp, names...)
	})
}

// TestMultiMutexBadInput: bad names and contexts fail with typed errors
// against a real server too, and leave no key behind.
func TestMultiMutexBadInput(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx := context.Background()
		c := lockClient(t, tp, rlock.Options{})
		name := lockName(t)
		_, err := c.MultiMutex().Lock(ctx)
		require.ErrorIs(t, err, rlock.ErrInvalidArgument)
		_, _, err = c.MultiMutex(name, "bad{name}").TryLock(ctx)
		require.ErrorIs(t, err, rlock.ErrInvalidName)
		var nilCtx context.Context
		_, err = c.MultiMutex(name).Lock(nilCtx)
		require.ErrorIs(t, err, rlock.ErrInvalidArgument)
		require.ErrorIs(t, c.MultiMutex(name).Unlock(nilCtx), rlock.ErrInvalidArgument)
		requireNoLeftovers(t, tp, name)
	})
}

// spreadNames returns n fresh lock names; on the Cluster, consecutive ones
// hash to different masters (so up to three are on three masters).
func spreadNames(t *testing.T, tp topology, n int) []string {
	t.Helper()
	base := lockName(t)
	if !tp.cluster {
		names := make([]string, n)
		for i := range names {
			names[i] = base + "-" + strconv.Itoa(i)
		}
		return names
	}
	ctx := context.Background()
	rc := redisClient(t, tp)
	master := slotMasters(t, rc)
	var names []string
	last := ""
	for i := 0; len(names) < n; i++ {
		require.Less(t, i, 1000, "no name found on another master")
		name := base + "-" + strconv.Itoa(i)
		slot, err := rc.Do(ctx, rc.B().ClusterKeyslot().Key(name).Build()).AsInt64()
		require.NoError(t, err)
		if m := master[slot]; m != last {
			names = append(names, name)
			last = m
		}
	}
	return names
}

// slotMasters maps every Cluster slot to its master's address.
func slotMasters(t *testing.T, rc rueidis.Client) map[int64]string {
	t.Helper()
	ranges, err := rc.Do(context.Background(), rc.B().ClusterSlots().Build()).ToArray()
	require.NoError(t, err)
	masters := make(map[int64]string)
	for _, r := range ranges {
		f, err := r.ToArray()
		require.NoError(t, err)
		from, err := f[0].AsInt64()
		require.NoError(t, err)
		to, err := f[1].AsInt64()
		require.NoError(t, err)
		node, err := f[2].ToArray()
		require.NoError(t, err)
		host, err := node[0].ToString()
		require.NoError(t, err)
		port, err := node[1].AsInt64()
		require.NoError(t, err)
		for s := from; s <= to; s++ {
			masters[s] = fmt.Sprintf("%s:%d", host, port)
		}
	}
	return masters
}

// requireMultiFree requires the locks called names to be free: c's
// MultiMutex takes them at once and gives them back, leaving no key.
func requireMultiFree(t *testing.T, tp topology, c *rlock.Client, names []string, what string) {
	t.Helper()
	mm := c.MultiMutex(names...)
	lctx, ok, err := mm.TryLock(context.Background())
	require.NoError(t, err)
	require.True(t, ok, what)
	require.NoError(t, mm.Unlock(lctx))
	requireNoLeftovers(t, tp, names...)
}
