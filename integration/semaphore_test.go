package integration

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/rlock"
)

// TestSemaphoreBound: goroutines of two clients taking random numbers of
// permits never hold more than the size between them, and all finish.
func TestSemaphoreBound(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		name := lockName(t)
		const size = 4
		handles := []*rlock.Semaphore{
			lockClient(t, tp, rlock.Options{}).Semaphore(name, size),
			lockClient(t, tp, rlock.Options{}).Semaphore(name, size),
		}
		var held, peak atomic.Int64
		var wg sync.WaitGroup
		for g := range 8 {
			s := handles[g%2]
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 25 {
					n := 1 + rand.Int64N(size)
					pctx, err := s.Acquire(ctx, n)
					if !assertNoError(t, err) {
						return
					}
					now := held.Add(n)
					for p := peak.Load(); now > p && !peak.CompareAndSwap(p, now); p = peak.Load() {
					}
					if now > size {
						t.Errorf("%d permits held at once, size %d", now, size)
					}
					held.Add(-n)
					if !assertNoError(t, s.Release(pctx)) {
						return
					}
				}
			}()
		}
		wg.Wait()
		require.LessOrEqual(t, peak.Load(), int64(size))
		free, err := handles[0].Available(ctx)
		require.NoError(t, err)
		require.Equal(t, int64(size), free)
		requireNoLeftovers(t, tp, name)
	})
}

// acquired is the outcome of an acquire run in the background.
type acquired struct {
	ctx context.Context
	err error
}

// queueAcquire runs acquire in the background on a new client of tp (with
// opts) and returns once that client has queued for name (its plain try
// and its first queued try ran), with the client and the channel on which
// the outcome arrives.
func queueAcquire(t *testing.T, tp topology, name string, opts rlock.Options, acquire func(*rlock.Client) (context.Context, error)) (*rlock.Client, <-chan acquired) {
	t.Helper()
	att := newAttempts()
	c := lockClient(t, tp, att.options(opts))
	reached := att.reached(name, 2)
	ch := make(chan acquired, 1)
	go func() {
		ctx, err := acquire(c)
		ch <- acquired{ctx, err}
	}()
	await(t, reached, 10*time.Second, "the waiter queued")
	return c, ch
}

// recvAcquired returns the context of a successful background acquire,
// failing the test if it failed or none arrives within d.
func recvAcquired(t *testing.T, ch <-chan acquired, d time.Duration, what string) context.Context {
	t.Helper()
	select {
	case a := <-ch:
		require.NoError(t, a.err, what)
		return a.ctx
	case <-time.After(d):
		t.Fatalf("after %v: %s", d, what)
	}
	return nil
}

func assertNoError(t *testing.T, err error) bool {
	t.Helper()
	if err != nil {
		t.Error(err)
		return false
	}
	return true
}

// TestSemaphoreFairness: a waiter for every permit queues while permits
// are held; newcomers asking for one (free) permit do not overtake it, and
// it gets in once the holder releases.
func TestSemaphoreFairness(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		name := lockName(t)
		const size = 3
		holder := lockClient(t, tp, rlock.Options{}).Semaphore(name, size)
		small := lockClient(t, tp, rlock.Options{}).Semaphore(name, size)

		hctx, err := holder.Acquire(ctx, 2)
		require.NoError(t, err)
		bc, got := queueAcquire(t, tp, name, rlock.Options{}, func(c *rlock.Client) (context.Context, error) {
			return c.Semaphore(name, size).Acquire(ctx, size)
		})
		big := bc.Semaphore(name, size)
		free, err := small.Available(ctx)
		require.NoError(t, err)
		require.Equal(t, int64(1), free)
		_, ok, err := small.TryAcquire(ctx, 1)
		require.NoError(t, err)
		require.False(t, ok, "a small request overtook the large waiter")
		_, ok, err = small.TryAcquire(ctx, 1, rlock.WithWait(100*time.Millisecond))
		require.NoError(t, err)
		require.False(t, ok, "a small request overtook the large waiter after waiting")

		require.NoError(t, holder.Release(hctx))
		bctx := recvAcquired(t, got, 10*time.Second, "the large waiter woken by the release")
		_, ok, err = small.TryAcquire(ctx, 1)
		require.NoError(t, err)
		require.False(t, ok, "a permit beyond the size")
		require.NoError(t, big.Release(bctx))
		sctx, ok, err := small.TryAcquire(ctx, 1, rlock.WithWait(5*time.Second))
		require.NoError(t, err)
		require.True(t, ok)
		require.NoError(t, small.Release(sctx))
		requireNoLeftovers(t, tp, name)
	})
}

// TestSemaphoreTryAcquireWaits: TryAcquire with WithWait queues, is woken
// by a release within its wait, and gives up (leaving the queue) when none
// comes.
func TestSemaphoreTryAcquireWaits(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx := context.Background()
		name := lockName(t)
		holder := lockClient(t, tp, rlock.Options{}).Semaphore(name, 2)
		hctx, err := holder.Acquire(ctx, 2)
		require.NoError(t, err)
		start := time.Now()
		_, ok, err := holder.TryAcquire(ctx, 1, rlock.WithWait(200*time.Millisecond))
		require.NoError(t, err)
		require.False(t, ok)
		require.GreaterOrEqual(t, time.Since(start), 200*time.Millisecond, "gave up before its wait")

		wc, got := queueAcquire(t, tp, name, rlock.Options{}, func(c *rlock.Client) (context.Context, error) {
			pctx, ok, err := c.Semaphore(name, 2).TryAcquire(ctx, 2, rlock.WithWait(20*time.Second))
			if err == nil && !ok {
				err = errors.New("TryAcquire gave up")
			}
			return pctx, err
		})
		require.NoError(t, holder.Release(hctx))
		pctx := recvAcquired(t, got, 10*time.Second, "the waiting TryAcquire woken by the release")
		require.NoError(t, wc.Semaphore(name, 2).Release(pctx))
		requireNoLeftovers(t, tp, name)
	})
}

// TestSemaphoreReleaseWakesMany: one release of three permits lets three
// waiters of different clients in, without further releases.
func TestSemaphoreReleaseWakesMany(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		name := lockName(t)
		const size = 3
		holder := lockClient(t, tp, rlock.Options{}).Semaphore(name, size)
		hctx, err := holder.Acquire(ctx, size)
		require.NoError(t, err)
		var waiters []*rlock.Semaphore
		var outcomes []<-chan acquired
		for range size {
			c, got := queueAcquire(t, tp, name, rlock.Options{}, func(c *rlock.Client) (context.Context, error) {
				return c.Semaphore(name, size).Acquire(ctx, 1)
			})
			waiters, outcomes = append(waiters, c.Semaphore(name, size)), append(outcomes, got)
		}
		require.NoError(t, holder.Release(hctx))
		var held []context.Context
		for _, got := range outcomes {
			held = append(held, recvAcquired(t, got, 10*time.Second, "every waiter let in by the one release"))
		}
		free, err := holder.Available(ctx)
		require.NoError(t, err)
		require.Zero(t, free)
		for i, pctx := range held {
			require.NoError(t, waiters[i].Release(pctx))
		}
		requireNoLeftovers(t, tp, name)
	})
}

// TestSemaphoreCrashedHolder: permits of a client that stops renewing
// (closed) come back within their lease, and a waiter gets in.
func TestSemaphoreCrashedHolder(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		name := lockName(t)
		opts := rlock.Options{WatchdogTimeout: time.Second, WatchdogInterval: 200 * time.Millisecond}
		dead := lockClient(t, tp, opts)
		dctx, err := dead.Semaphore(name, 2).Acquire(ctx, 2)
		require.NoError(t, err)
		lc, got := queueAcquire(t, tp, name, opts, func(c *rlock.Client) (context.Context, error) {
			return c.Semaphore(name, 2).Acquire(ctx, 2)
		})
		start := time.Now()
		require.NoError(t, dead.Close()) // its watchdog stops: the permits lapse
		require.ErrorIs(t, context.Cause(dctx), rlock.ErrClosed)
		pctx := recvAcquired(t, got, 10*time.Second, "the crashed holder's permits came back")
		require.Less(t, time.Since(start), 5*time.Second, "the permits outlived their lease by far")
		require.NoError(t, lc.Semaphore(name, 2).Release(pctx))
		requireNoLeftovers(t, tp, name)
	})
}

// TestSemaphoreSizeMismatch: a handle with another size is refused while
// the name is in use, and accepted once it is not.
func TestSemaphoreSizeMismatch(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx := context.Background()
		name := lockName(t)
		c := lockClient(t, tp, rlock.Options{})
		s3, s5 := c.Semaphore(name, 3), lockClient(t, tp, rlock.Options{}).Semaphore(name, 5)
		pctx, err := s3.Acquire(ctx, 1)
		require.NoError(t, err)
		_, err = s5.Acquire(ctx, 1)
		require.ErrorIs(t, err, rlock.ErrSizeMismatch)
		_, ok, err := s5.TryAcquire(ctx, 5, rlock.WithWait(time.Second))
		require.ErrorIs(t, err, rlock.ErrSizeMismatch)
		require.False(t, ok)
		_, err = s5.Available(ctx)
		require.ErrorIs(t, err, rlock.ErrSizeMismatch)
		require.NoError(t, s3.Release(pctx))

		qctx, err := s5.Acquire(ctx, 5)
		require.NoError(t, err, "a new size once the semaphore is unused")
		_, err = s3.Acquire(ctx, 1)
		require.ErrorIs(t, err, rlock.ErrSizeMismatch)
		require.NoError(t, s5.Release(qctx))
		requireNoLeftovers(t, tp, name)
	})
}

// TestSemaphoreLossAndClose: a fixed lease ends the permits' context with
// ErrLockLost and Release reports it; semaphores are not reentrant; Close
// makes a waiting Acquire return ErrClosed and ends held contexts with
// ErrClosed, after which Release still works.
func TestSemaphoreLossAndClose(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx := context.Background()
		name := lockName(t)
		c := lockClient(t, tp, rlock.Options{})
		s := c.Semaphore(name, 2)
		lctx, err := s.Acquire(ctx, 1, rlock.WithLease(300*time.Millisecond))
		require.NoError(t, err)
		requireLost(t, lctx, 5*time.Second, "the leased permits")
		err = s.Release(lctx)
		require.ErrorIs(t, err, rlock.ErrNotHeld)
		require.ErrorIs(t, err, rlock.ErrLockLost)

		// Permits whose lease ran out unnoticed: the Release finds them gone.
		c3 := lockClient(t, tp, rlock.Options{})
		gctx, err := c3.Semaphore(name, 2).Acquire(ctx, 1) // granted at once, even if the lapsed lease is not gone yet
		require.NoError(t, err)
		rc := redisClient(t, tp)
		require.True(t, endLease(t, rc, "latchkey:{"+name+"}:sem:h:e", c3.ID()+":1"), "no lease of its first owner id")
		err = c3.Semaphore(name, 2).Release(gctx)
		require.ErrorIs(t, err, rlock.ErrNotHeld)
		require.ErrorIs(t, err, rlock.ErrLockLost)
		require.ErrorIs(t, context.Cause(gctx), rlock.ErrLockLost)

		// Not reentrant: an Acquire through a permits context is another owner.
		p1, err := s.Acquire(ctx, 1)
		require.NoError(t, err)
		p2, err := s.Acquire(p1, 1)
		require.NoError(t, err)
		free, err := s.Available(ctx)
		require.NoError(t, err)
		require.Zero(t, free, "the nested Acquire took permits of its own")
		require.NoError(t, s.Release(p2))
		require.ErrorIs(t, s.Release(p2), rlock.ErrNotHeld, "a second Release")
		require.NoError(t, p1.Err(), "the outer permits ended with the inner Release")

		holder := lockClient(t, tp, rlock.Options{}).Semaphore(name, 2)
		hctx, err := holder.Acquire(ctx, 1)
		require.NoError(t, err)
		c2, waiter := queueAcquire(t, tp, name, rlock.Options{}, func(c *rlock.Client) (context.Context, error) {
			return c.Semaphore(name, 2).Acquire(ctx, 1)
		})
		require.NoError(t, c2.Close())
		select {
		case a := <-waiter:
			require.ErrorIs(t, a.err, rlock.ErrClosed)
		case <-time.After(10 * time.Second):
			t.Fatal("the waiting Acquire did not return at Close")
		}
		require.NoError(t, c.Close())
		require.ErrorIs(t, context.Cause(p1), rlock.ErrClosed)
		require.NoError(t, s.Release(p1), "Release works after Close")
		require.NoError(t, holder.Release(hctx))
		requireNoLeftovers(t, tp, name)
	})
}

// TestSemaphoreBadInput: typed errors before any I/O.
func TestSemaphoreBadInput(t *testing.T) {
	tp := topologies()[0]
	c := lockClient(t, tp, rlock.Options{})
	ctx := context.Background()
	_, err := c.Semaphore("x", 0).Acquire(ctx, 1)
	require.ErrorIs(t, err, rlock.ErrInvalidArgument)
	_, err = c.Semaphore("x", -3).Available(ctx)
	require.ErrorIs(t, err, rlock.ErrInvalidArgument)
	_, err = c.Semaphore("x", 2).Acquire(ctx, 0)
	require.ErrorIs(t, err, rlock.ErrInvalidArgument)
	_, _, err = c.Semaphore("x", 2).TryAcquire(ctx, 3)
	require.ErrorIs(t, err, rlock.ErrInvalidArgument)
	//nolint:staticcheck // a nil context on purpose
	_, err = c.Semaphore("x", 2).Acquire(nil, 1)
	require.ErrorIs(t, err, rlock.ErrInvalidArgument)
	_, err = c.Semaphore("a{b", 2).Acquire(ctx, 1)
	require.ErrorIs(t, err, rlock.ErrInvalidName)
	_, err = c.Semaphore("", 2).Available(ctx)
	require.ErrorIs(t, err, rlock.ErrInvalidName)
	_, err = c.Semaphore("x", 2).Acquire(ctx, 1, rlock.WithWait(time.Second))
	require.ErrorIs(t, err, rlock.ErrInvalidArgument)
	_, _, err = c.Semaphore("x", 2).TryAcquire(ctx, 1, rlock.WithLease(-time.Second))
	require.ErrorIs(t, err, rlock.ErrInvalidArgument)
	require.ErrorIs(t, c.Semaphore("x", 2).Release(ctx), rlock.ErrNotHeld)
	//nolint:staticcheck // a nil context on purpose
	require.ErrorIs(t, c.Semaphore("x", 2).Release(nil), rlock.ErrInvalidArgument)
	s := c.Semaphore("x", 2)
	require.Equal(t, "x", s.Name())
	require.Equal(t, int64(2), s.Size())
}

// TestSpinSemaphore: the spin variant keeps the bound like the notified
// one, and interoperates with it on the same name.
func TestSpinSemaphore(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		name := lockName(t)
		const size = 3
		handles := []*rlock.Semaphore{
			lockClient(t, tp, rlock.Options{}).SpinSemaphore(name, size),
			lockClient(t, tp, rlock.Options{}).Semaphore(name, size),
		}
		var held, over atomic.Int64
		var wg sync.WaitGroup
		for g := range 6 {
			s := handles[g%2]
			wg.Go(func() {
				for range 15 {
					n := 1 + rand.Int64N(2)
					pctx, err := s.Acquire(ctx, n)
					if !assertNoError(t, err) {
						return
					}
					if held.Add(n) > size {
						over.Add(1)
					}
					held.Add(-n)
					if !assertNoError(t, s.Release(pctx)) {
						return
					}
				}
			})
		}
		wg.Wait()
		require.Zero(t, over.Load(), "more permits held than the size")
		requireNoLeftovers(t, tp, name)
	})
}
