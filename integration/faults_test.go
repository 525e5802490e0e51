package integration

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/internal/redistest"
	"github.com/latchkey/latchkey/rlock"
)

// TestReconnect: killing the pub/sub connections while waiters wait loses
// whatever was published meanwhile. Two clients wait, five goroutines each;
// in each client one goroutine contends in Redis and the others wait in the
// client's gate. The resubscription wakes each client's contender, which
// tries again (once, or twice if it tried between the loss and the new
// subscription), and no other goroutine: they make no attempt at all. All
// of them still get the lock after the unlock, well inside the TTL.
func TestReconnect(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx := context.Background()
		name := lockName(t)
		const clients, waiters = 2, 5
		holder := lockClient(t, tp, rlock.Options{}).Mutex(name) // TTL 30s
		hctx := mustLock(t, ctx, holder)

		var wg sync.WaitGroup
		atts := make([]*attempts, clients)
		for i := range atts {
			att := newAttempts()
			atts[i] = att
			c := lockClient(t, tp, att.options(rlock.Options{}))
			blockWaiters(t, att, name, waiters, &wg, func() {
				m := c.Mutex(name)
				lctx, err := m.Lock(ctx)
				if err == nil {
					err = m.Unlock(lctx)
				}
				if err != nil {
					t.Error(err)
				}
			})
		}
		before := make([]int, clients)
		for i, att := range atts {
			before[i] = att.count(name)
			require.Equal(t, 2, before[i], "client %d: only the contender tries (before and after subscribing)", i)
		}
		killed := killPubSubClients(t, tp)
		require.Positive(t, killed, "no pub/sub connection to kill")
		// The resubscription wakes each client's contender; it tries again.
		for i, att := range atts {
			await(t, att.reached(name, before[i]+1), 20*time.Second, fmt.Sprintf("client %d's contender to be woken by the resubscription", i))
		}

		start := time.Now()
		require.NoError(t, holder.Unlock(hctx))
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		await(t, done, 15*time.Second, "every waiter to acquire after the reconnect")
		for i, att := range atts {
			// At most two retries after the kill and one acquire: had every
			// waiter tried again, there would be at least five.
			retries := att.count(name) - before[i]
			require.LessOrEqual(t, retries, 3, "client %d: %d attempts after the kill", i, retries)
		}
		t.Logf("killed %d connection(s); %d×%d waiters done %v after the unlock", killed, clients, waiters, time.Since(start).Round(time.Millisecond))
	})
}

// killPubSubClients kills every connection that holds a subscription, on
// every node of tp, and returns how many it killed.
func killPubSubClients(t *testing.T, tp topology) int {
	t.Helper()
	ctx := context.Background()
	total := 0
	for _, addr := range tp.addrs {
		rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, ForceSingleClient: true, DisableCache: true})
		require.NoError(t, err)
		// RESP3 connections that subscribed are type pubsub in Redis 7.
		n, err := rc.Do(ctx, rc.B().ClientKill().TypePubsub().Build()).AsInt64()
		rc.Close()
		require.NoError(t, err)
		total += int(n)
	}
	return total
}

// TestUnknownOutcome: an acquire whose reply never comes (the server is
// frozen, the caller's context ends) may still run on the server later. The
// client undoes it, so no lock is left that nobody knows it holds.
func TestUnknownOutcome(t *testing.T) {
	ctx := context.Background()
	srv, err := redistest.StartProcess(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { srv.Close() })
	tp := topology{name: "frozen", addrs: []string{srv.Addr}}
	rc := redisClient(t, tp)
	pid, err := redistest.ProcessID(ctx, rc)
	require.NoError(t, err)
	// The undo cannot get an answer from a frozen server either; a short
	// ReleaseTimeout bounds how long Lock waits for it.
	c := lockClient(t, tp, rlock.Options{ReleaseTimeout: 500 * time.Millisecond})
	m := c.Mutex(lockName(t))

	require.NoError(t, syscall.Kill(pid, syscall.SIGSTOP))
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGCONT) })
	lctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	_, err = m.Lock(lctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.NoError(t, syscall.Kill(pid, syscall.SIGCONT))

	// The queued acquire runs now, then the undo behind it.
	require.Eventually(t, func() bool { return !exists(t, rc, m.Key()) }, 10*time.Second, 20*time.Millisecond)
	n, err := m.HoldCount(ctx)
	require.NoError(t, err)
	require.Zero(t, n)
	// And the lock is usable at once.
	lctx2 := mustLock(t, ctx, m)
	require.NoError(t, m.Unlock(lctx2))
}

// TestClose: Close wakes waiters with ErrClosed (the one contending in
// Redis and the one waiting behind it in the client's gate), takes the
// client off the lock's wait queue before it returns, ends holders'
// contexts with ErrClosed, refuses new work, and leaves no goroutine
// (checked by TestMain). Unlock still releases what was held.
func TestClose(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx := context.Background()
		name := lockName(t)
		other := lockClient(t, tp, rlock.Options{})
		holder := other.Mutex(name)
		hctx := mustLock(t, ctx, holder)

		rc := redisClient(t, tp)
		att := newAttempts()
		c, err := rlock.NewClient(rc, att.options(rlock.Options{}))
		require.NoError(t, err)
		mine := c.Mutex(lockName(t))
		mctx := mustLock(t, ctx, mine)

		errs := make(chan error, 2)
		// One at a time, so that the first is the contender: it tries,
		// subscribes, queues the client and waits; the second then waits in
		// the gate. Each waits once.
		for i, m := range []*rlock.Mutex{c.Mutex(name), c.SpinMutex(name)} {
			go func() {
				_, err := m.Lock(ctx)
				errs <- err
			}()
			await(t, att.reached(waitKey(name), i+1), 10*time.Second, fmt.Sprintf("waiter %d to block", i))
		}
		requireQueued(t, rc, holder.Key(), c.ID())
		require.NoError(t, c.Close())
		requireNotQueued(t, rc, holder.Key(), c.ID())
		for i := 0; i < 2; i++ {
			require.ErrorIs(t, recvErr(t, errs, 5*time.Second, "a waiter to return after Close"), rlock.ErrClosed)
		}
		require.ErrorIs(t, context.Cause(mctx), rlock.ErrClosed)
		_, err = c.Mutex(name).Lock(ctx)
		require.ErrorIs(t, err, rlock.ErrClosed)
		require.NoError(t, c.Close(), "Close is idempotent")
		// Unlock still releases what was held.
		require.NoError(t, mine.Unlock(mctx))
		require.False(t, exists(t, rc, mine.Key()))
		require.NoError(t, holder.Unlock(hctx))
	})
}

// TestTryLock covers the two TryLock forms and the spin variant's waits.
func TestTryLock(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx := context.Background()
		name := lockName(t)
		holder := lockClient(t, tp, rlock.Options{}).Mutex(name)
		hctx := mustLock(t, ctx, holder)
		c := lockClient(t, tp, rlock.Options{})

		for _, m := range []*rlock.Mutex{c.Mutex(name), c.SpinMutex(name)} {
			lctx, ok, err := m.TryLock(ctx)
			require.NoError(t, err)
			require.False(t, ok)
			require.Nil(t, lctx)
			start := time.Now()
			_, ok, err = m.TryLock(ctx, rlock.WithWait(200*time.Millisecond))
			require.NoError(t, err)
			require.False(t, ok)
			require.GreaterOrEqual(t, time.Since(start), 200*time.Millisecond)
		}

		// A bounded wait that the release falls inside succeeds.
		att := newAttempts()
		waiter := lockClient(t, tp, rlock.Options{OnAttempt: att.hook}).SpinMutex(name)
		got := make(chan bool, 1)
		go func() {
			lctx, ok, err := waiter.TryLock(ctx, rlock.WithWait(20*time.Second), rlock.WithLease(10*time.Second))
			if err != nil {
				t.Error(err)
			}
			if ok {
				ttl, err := waiter.TTL(lctx)
				if err != nil || ttl <= 0 || ttl > 10*time.Second {
					t.Errorf("TTL of a 10s lease: %v, %v", ttl, err)
				}
				if err := waiter.Unlock(lctx); err != nil {
					t.Error(err)
				}
			}
			got <- ok
		}()
		await(t, att.reached(name, 2), 10*time.Second, "the spin waiter to poll")
		require.NoError(t, holder.Unlock(hctx))
		select {
		case ok := <-got:
			require.True(t, ok)
		case <-time.After(20 * time.Second):
			t.Fatal("TryLock with wait did not return")
		}
	})
}
