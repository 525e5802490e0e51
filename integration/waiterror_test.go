package integration

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/rlock"
)

// TestWaitErrorSaysWhoBlocked (issue 22, part 3): a wait whose context
// ends returns a *WaitError that names the holder seen at the last refused
// try, its lease left, and this client's place in line, for every kind,
// while errors.Is still finds the context's error.
func TestWaitErrorSaysWhoBlocked(t *testing.T) {
	// A kind is how the holder takes the lock and how a waiter asks for it.
	type lockFn func(c *rlock.Client, name string, ctx context.Context) (context.Context, error)
	type unlockFn func(c *rlock.Client, name string, lctx context.Context) error
	mutexLock := func(c *rlock.Client, n string, ctx context.Context) (context.Context, error) {
		return c.Mutex(n).Lock(ctx)
	}
	mutexUnlock := func(c *rlock.Client, n string, lctx context.Context) error { return c.Mutex(n).Unlock(lctx) }
	kinds := map[string]struct {
		hold, wait lockFn
		unhold     unlockFn
		queued     bool // the waiter queues (pub/sub), so it has a place
		// readers: the second waiter is next too, as it waits for no
		// writer (the readers before it are admitted with it).
		readers bool
	}{
		"mutex": {hold: mutexLock, unhold: mutexUnlock, wait: mutexLock, queued: true},
		"spin mutex": {hold: mutexLock, unhold: mutexUnlock,
			wait: func(c *rlock.Client, n string, ctx context.Context) (context.Context, error) {
				return c.SpinMutex(n).Lock(ctx)
			}},
		"reader behind a writer": {
			hold: func(c *rlock.Client, n string, ctx context.Context) (context.Context, error) {
				return c.RWMutex(n).Lock(ctx)
			},
			unhold: func(c *rlock.Client, n string, lctx context.Context) error { return c.RWMutex(n).Unlock(lctx) },
			wait: func(c *rlock.Client, n string, ctx context.Context) (context.Context, error) {
				return c.RWMutex(n).RLock(ctx)
			},
			queued:  true,
			readers: true,
		},
		"writer behind a reader": {
			hold: func(c *rlock.Client, n string, ctx context.Context) (context.Context, error) {
				return c.RWMutex(n).RLock(ctx)
			},
			unhold: func(c *rlock.Client, n string, lctx context.Context) error { return c.RWMutex(n).RUnlock(lctx) },
			wait: func(c *rlock.Client, n string, ctx context.Context) (context.Context, error) {
				return c.RWMutex(n).Lock(ctx)
			},
			queued: true,
		},
		"semaphore": {
			hold: func(c *rlock.Client, n string, ctx context.Context) (context.Context, error) {
				return c.Semaphore(n, 1).Acquire(ctx, 1)
			},
			unhold: func(c *rlock.Client, n string, lctx context.Context) error { return c.Semaphore(n, 1).Release(lctx) },
			wait: func(c *rlock.Client, n string, ctx context.Context) (context.Context, error) {
				return c.Semaphore(n, 1).Acquire(ctx, 1)
			},
			queued: true,
		},
	}
	forEachTopology(t, func(t *testing.T, tp topology) {
		for kind, k := range kinds {
			t.Run(kind, func(t *testing.T) {
				ctx := context.Background()
				name := lockName(t)
				holder := lockClient(t, tp, rlock.Options{ClientName: "worker-7"})
				hctx, err := k.hold(holder, name, ctx)
				require.NoError(t, err)
				defer func() { require.NoError(t, k.unhold(holder, name, hctx)) }()

				// Two waiting clients, the second queued behind the first.
				errs := make([]chan error, 2)
				cancels := make([]context.CancelFunc, 2)
				for i := range errs {
					att := newAttempts() // one each: a poller waits again and again
					c := lockClient(t, tp, att.options(rlock.Options{}))
					wctx, cancel := context.WithCancel(ctx)
					cancels[i], errs[i] = cancel, make(chan error, 1)
					go func() {
						_, err := k.wait(c, name, wctx)
						errs[i] <- err
					}()
					await(t, att.reached(waitKey(name), 1), 10*time.Second, "the waiter to wait")
				}
				for i := range errs {
					cancels[i]()
					err := recvErr(t, errs[i], 10*time.Second, "the cancelled wait")
					require.ErrorIs(t, err, context.Canceled)
					var we *rlock.WaitError
					require.True(t, errors.As(err, &we), "%T: %v", err, err)
					require.Equal(t, name, we.Name)
					require.Positive(t, we.Waited)
					require.NotNil(t, we.Holder, "the holder seen at the last refused try")
					require.Equal(t, "worker-7", we.Holder.Client.Name)
					require.Positive(t, we.Holder.LeaseLeft)
					require.Contains(t, err.Error(), "held by worker-7 (host ")
					if k.queued {
						place := i + 1
						if k.readers {
							place = 1
						}
						require.Equal(t, place, we.Position, "waiter %d's place in line", i)
						require.Contains(t, err.Error(), []string{"1st", "2nd"}[place-1]+" in line")
					} else {
						require.Zero(t, we.Position, "a poller is not queued")
					}
				}
			})
		}
	})
}
