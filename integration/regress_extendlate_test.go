package integration

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/internal/luascripts"
	"github.com/latchkey/latchkey/rlock"
)

// lateExtend runs every call of the renew script through Do (Extend's: the
// watchdog pipelines its renewals through DoMulti), while on, at once, but
// withholds its reply: until gate closes, or, with cut, until the call's
// context ends (Extend waits no longer than the hold's local deadline).
type lateExtend struct {
	rueidis.Client
	sha  string
	on   *atomic.Bool
	cut  bool
	held *atomic.Int64 // calls whose reply was withheld
	gate chan struct{}
}

func (c lateExtend) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	args := cmd.Commands()
	if !c.on.Load() || len(args) < 2 || args[0] != "EVALSHA" || args[1] != c.sha {
		return c.Client.Do(ctx, cmd)
	}
	res := c.Client.Do(context.WithoutCancel(ctx), cmd) // it runs in Redis now
	c.held.Add(1)
	if c.cut {
		<-ctx.Done()
		return rueidis.NewErrorResult(ctx.Err())
	}
	<-c.gate
	return res
}

// extendKind is one primitive's side that has Extend.
type extendKind struct {
	name   string
	lock   func(ctx context.Context, c *rlock.Client, name string, lease time.Duration) (context.Context, error)
	extend func(c *rlock.Client, name string, lctx context.Context, lease time.Duration) error
	// rival takes what lock took, from another client, waiting until ctx ends.
	rival   func(ctx context.Context, c *rlock.Client, name string) (context.Context, error)
	unlock  func(c *rlock.Client, name string, lctx context.Context) error
	tryLock func(ctx context.Context, c *rlock.Client, name string) (bool, error)
}

// The RWMutex rows' rival is a writer, for both sides.
func rwWriterRival(ctx context.Context, c *rlock.Client, name string) (context.Context, error) {
	return c.RWMutex(name).Lock(ctx)
}

func rwWriterUnlock(c *rlock.Client, name string, lctx context.Context) error {
	return c.RWMutex(name).Unlock(lctx)
}

func rwWriterTryLock(ctx context.Context, c *rlock.Client, name string) (bool, error) {
	lctx, ok, err := c.RWMutex(name).TryLock(ctx)
	if ok {
		err = c.RWMutex(name).Unlock(lctx)
	}
	return ok, err
}

var extendKinds = []extendKind{
	{
		name: "Mutex",
		lock: func(ctx context.Context, c *rlock.Client, name string, lease time.Duration) (context.Context, error) {
			return c.Mutex(name).Lock(ctx, rlock.WithLease(lease))
		},
		extend: func(c *rlock.Client, name string, lctx context.Context, lease time.Duration) error {
			return c.Mutex(name).Extend(lctx, lease)
		},
		rival: func(ctx context.Context, c *rlock.Client, name string) (context.Context, error) {
			return c.Mutex(name).Lock(ctx)
		},
		unlock: func(c *rlock.Client, name string, lctx context.Context) error { return c.Mutex(name).Unlock(lctx) },
		tryLock: func(ctx context.Context, c *rlock.Client, name string) (bool, error) {
			lctx, ok, err := c.Mutex(name).TryLock(ctx)
			if ok {
				err = c.Mutex(name).Unlock(lctx)
			}
			return ok, err
		},
	},
	{
		name: "RWMutex write",
		lock: func(ctx context.Context, c *rlock.Client, name string, lease time.Duration) (context.Context, error) {
			return c.RWMutex(name).Lock(ctx, rlock.WithLease(lease))
		},
		extend: func(c *rlock.Client, name string, lctx context.Context, lease time.Duration) error {
			return c.RWMutex(name).Extend(lctx, lease)
		},
		rival:   rwWriterRival,
		unlock:  rwWriterUnlock,
		tryLock: rwWriterTryLock,
	},
	{
		// The rival is a writer: a read hold left in Redis excludes it.
		name: "RWMutex read",
		lock: func(ctx context.Context, c *rlock.Client, name string, lease time.Duration) (context.Context, error) {
			return c.RWMutex(name).RLock(ctx, rlock.WithLease(lease))
		},
		extend: func(c *rlock.Client, name string, lctx context.Context, lease time.Duration) error {
			return c.RWMutex(name).RExtend(lctx, lease)
		},
		rival:   rwWriterRival,
		unlock:  rwWriterUnlock,
		tryLock: rwWriterTryLock,
	},
	{
		name: "Semaphore",
		lock: func(ctx context.Context, c *rlock.Client, name string, lease time.Duration) (context.Context, error) {
			return c.Semaphore(name, 1).Acquire(ctx, 1, rlock.WithLease(lease))
		},
		extend: func(c *rlock.Client, name string, lctx context.Context, lease time.Duration) error {
			return c.Semaphore(name, 1).Extend(lctx, lease)
		},
		rival: func(ctx context.Context, c *rlock.Client, name string) (context.Context, error) {
			return c.Semaphore(name, 1).Acquire(ctx, 1)
		},
		unlock: func(c *rlock.Client, name string, lctx context.Context) error {
			return c.Semaphore(name, 1).Release(lctx)
		},
		tryLock: func(ctx context.Context, c *rlock.Client, name string) (bool, error) {
			lctx, ok, err := c.Semaphore(name, 1).TryAcquire(ctx, 1)
			if ok {
				err = c.Semaphore(name, 1).Release(lctx)
			}
			return ok, err
		},
	},
}

// TestRegressLateExtendReleased: a fixed-lease hold whose Extend reply
// lands after its local deadline (or is cut there) is lost, and what the
// Extend gave a new lease in Redis is released, at once and before Close
// returns, rather than kept for that lease with nobody holding it: for
// every kind that has Extend. The Extend runs in Redis before the loss;
// its reply comes after it, or never.
func TestRegressLateExtendReleased(t *testing.T) {
	const (
		lease    = time.Second // the hold's: its local deadline comes soon
		newLease = time.Minute // the late Extend's
		bound    = 5 * time.Second
	)
	modes := []struct {
		name  string
		cut   bool // the reply never comes: the call is cut at the deadline
		close bool // Close is called while the reply is still out
	}{
		{name: "reply after the loss"},
		{name: "reply cut at the deadline", cut: true},
		{name: "Close while the reply is out", close: true},
	}
	forEachTopology(t, func(t *testing.T, tp topology) {
		for _, k := range extendKinds {
			for _, mode := range modes {
				t.Run(k.name+"/"+mode.name, func(t *testing.T) {
					ctx := context.Background()
					var on atomic.Bool
					held := new(atomic.Int64)
					gate := make(chan struct{})
					rc := lateExtend{Client: redisClient(t, tp), sha: shaOf(luascripts.Renew), on: &on, cut: mode.cut, held: held, gate: gate}
					c, err := rlock.NewClient(rc, rlock.Options{})
					require.NoError(t, err)
					t.Cleanup(func() { require.NoError(t, c.Close()) })
					rival := lockClient(t, tp, rlock.Options{})
					name := lockName(t)

					lctx, err := k.lock(ctx, c, name, lease)
					require.NoError(t, err)
					// A first Extend loads the renew script where the lock
					// lives, so that the withheld one is not refused with
					// NOSCRIPT and re-sent as EVAL (which the wrapper passes).
					require.NoError(t, k.extend(c, name, lctx, lease))
					on.Store(true)
					extended := make(chan error, 1)
					go func() { extended <- k.extend(c, name, lctx, newLease) }()
					requireLost(t, lctx, bound, "the hold whose Extend reply is late")
					require.EqualValues(t, 1, held.Load(), "the Extend's reply was not withheld")

					switch {
					case mode.cut:
						require.ErrorIs(t, <-extended, context.DeadlineExceeded)
					case mode.close:
						closed := make(chan error, 1)
						go func() { closed <- c.Close() }()
						close(gate) // Close must wait for the release after this reply
						require.ErrorIs(t, <-extended, rlock.ErrNotHeld)
						require.NoError(t, <-closed)
						ok, err := k.tryLock(ctx, rival, name)
						require.NoError(t, err)
						require.True(t, ok, "the lock is still held in Redis after Close returned")
						return
					default:
						close(gate)
						require.ErrorIs(t, <-extended, rlock.ErrNotHeld)
					}
					// Far less than the new lease: the lost hold was released.
					wctx, cancel := context.WithTimeout(ctx, bound)
					defer cancel()
					rctx, err := k.rival(wctx, rival, name)
					require.NoError(t, err, "the lock stayed held in Redis for the late Extend's lease")
					require.NoError(t, k.unlock(rival, name, rctx))
				})
			}
		}
	})
}
