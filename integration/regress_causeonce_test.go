package integration

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/rlock"
)

// TestRegressWaitCauseSaidOnce: a wait ended by a context cancelled (or
// timed out) with a cause said the cause twice, "context canceled: X (last
// error: X)": the wait returned context.Cause, which ended() then added to
// the context's error as the last transient error. `latchkey run --wait`
// printed "context canceled: --wait 500ms ran out (last error: --wait 500ms
// ran out)".
func TestRegressWaitCauseSaidOnce(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		holder, waiter := lockClient(t, tp, rlock.Options{}), lockClient(t, tp, rlock.Options{})
		ctx := context.Background()
		name := lockName(t)
		mctx := mustLock(t, ctx, holder.Mutex(name))
		t.Cleanup(func() { require.NoError(t, holder.Mutex(name).Unlock(mctx)) })
		wctx, err := holder.RWMutex(name + "-rw").Lock(ctx)
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, holder.RWMutex(name+"-rw").Unlock(wctx)) })
		sctx, err := holder.Semaphore(name+"-sem", 1).Acquire(ctx, 1)
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, holder.Semaphore(name+"-sem", 1).Release(sctx)) })
		ok, err := holder.CountDownLatch(name+"-latch").TrySetCount(ctx, 1)
		require.NoError(t, err)
		require.True(t, ok)
		t.Cleanup(func() { require.NoError(t, holder.CountDownLatch(name+"-latch").CountDown(ctx)) })

		waits := map[string]func(context.Context) error{
			"Mutex.Lock":     func(ctx context.Context) error { _, err := waiter.Mutex(name).Lock(ctx); return err },
			"SpinMutex.Lock": func(ctx context.Context) error { _, err := waiter.SpinMutex(name).Lock(ctx); return err },
			"RWMutex.RLock":  func(ctx context.Context) error { _, err := waiter.RWMutex(name + "-rw").RLock(ctx); return err },
			"RWMutex.Lock":   func(ctx context.Context) error { _, err := waiter.RWMutex(name + "-rw").Lock(ctx); return err },
			"Semaphore.Acquire": func(ctx context.Context) error {
				_, err := waiter.Semaphore(name+"-sem", 1).Acquire(ctx, 1)
				return err
			},
			"CountDownLatch.Await": func(ctx context.Context) error { return waiter.CountDownLatch(name + "-latch").Await(ctx) },
		}
		for what, wait := range waits {
			cause := errors.New("the caller's own reason")
			cctx, cancel := context.WithCancelCause(ctx)
			stop := time.AfterFunc(300*time.Millisecond, func() { cancel(cause) })
			err := wait(cctx)
			stop.Stop()
			cancel(nil)
			require.ErrorIs(t, err, context.Canceled, what)
			require.ErrorIs(t, err, cause, what)
			require.Equal(t, 1, strings.Count(err.Error(), cause.Error()), "%s: %v", what, err)

			dctx, dcancel := context.WithTimeoutCause(ctx, 300*time.Millisecond, cause)
			err = wait(dctx)
			dcancel()
			require.ErrorIs(t, err, context.DeadlineExceeded, what)
			require.ErrorIs(t, err, cause, what)
			require.Equal(t, 1, strings.Count(err.Error(), cause.Error()), "%s: %v", what, err)
		}
	})
}
