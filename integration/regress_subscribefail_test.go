package integration

import (
	"context"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/rlock"
)

// failedReceives fails the client's first n pub/sub Receive calls as a
// connection lost before the confirmation would.
type failedReceives struct {
	rueidis.Client
	n *atomic.Int64 // failures left; below zero once they are all used
}

func (c failedReceives) Receive(ctx context.Context, cmd rueidis.Completed, fn func(rueidis.PubSubMessage)) error {
	if c.n.Add(-1) >= 0 {
		return io.ErrUnexpectedEOF
	}
	return c.Client.Receive(ctx, cmd, fn)
}

// TestRegressSubscribeRetried: a waiter whose subscription fails for a
// reason that may clear (Redis out of reach for a moment) subscribes again
// until its context ends, as it retries its other calls. A Lock and an
// Await returned "subscribe failed" at the first failure.
func TestRegressSubscribeRetried(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		t.Run("mutex", func(t *testing.T) {
			name := lockName(t)
			holder := lockClient(t, tp, rlock.Options{}).Mutex(name)
			hctx, err := holder.Lock(ctx)
			require.NoError(t, err)
			fails := new(atomic.Int64)
			fails.Store(3)
			waiting := make(chan struct{}, 1)
			c, err := rlock.NewClient(failedReceives{Client: redisClient(t, tp), n: fails}, rlock.Options{OnWait: func(string) {
				select {
				case waiting <- struct{}{}:
				default:
				}
			}})
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, c.Close()) })
			locked := make(chan error, 1)
			var lctx context.Context
			go func() {
				var err error
				lctx, err = c.Mutex(name).Lock(ctx)
				locked <- err
			}()
			select {
			case <-waiting:
			case err := <-locked:
				t.Fatalf("Lock returned %v while the lock was held", err)
			}
			require.NoError(t, holder.Unlock(hctx))
			require.NoError(t, <-locked, "Lock after %d failed subscriptions", 3)
			require.Negative(t, fails.Load(), "the failures were not all met")
			require.NoError(t, c.Mutex(name).Unlock(lctx))
		})
		t.Run("latch", func(t *testing.T) {
			name := lockName(t)
			setter := lockClient(t, tp, rlock.Options{}).CountDownLatch(name)
			ok, err := setter.TrySetCount(ctx, 1)
			require.NoError(t, err)
			require.True(t, ok)
			fails := new(atomic.Int64)
			fails.Store(3)
			c, err := rlock.NewClient(failedReceives{Client: redisClient(t, tp), n: fails}, rlock.Options{})
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, c.Close()) })
			awaited := make(chan error, 1)
			go func() { awaited <- c.CountDownLatch(name).Await(ctx) }()
			// Once the failures are used up, Await has subscribed (or is
			// subscribing) after the read that found the count at 1.
			awaitCond(t, 10*time.Second, "the failed subscriptions", func() bool {
				select {
				case err := <-awaited:
					t.Fatalf("Await returned %v before the count reached zero", err)
				default:
				}
				return fails.Load() < 0
			})
			err = setter.CountDown(ctx)
			require.NoError(t, err)
			require.NoError(t, <-awaited)
		})
	})
}
