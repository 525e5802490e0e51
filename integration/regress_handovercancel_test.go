package integration

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/rlock"
)

// TestRegressHandoverAfterCancel: a local waiter handed the lock just as
// its context ends gets the context's error, and the lock goes back, as an
// acquire answered after the caller gave up does. Its select picked at
// random between the handover and the context, so Lock returned a lock
// context already ended, with a nil error, about every other time.
func TestRegressHandoverAfterCancel(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx := context.Background()
		var hold atomic.Pointer[chan struct{}] // OnWait blocks on it once, when set
		reached := make(chan struct{}, 1)
		c := lockClient(t, tp, rlock.Options{OnWait: func(string) {
			if gate := hold.Swap(nil); gate != nil {
				reached <- struct{}{}
				<-*gate
			}
		}})
		m := c.Mutex(lockName(t))
		for i := range 40 {
			lctx, err := m.Lock(ctx)
			require.NoError(t, err)
			gate := make(chan struct{})
			hold.Store(&gate)
			wctx, cancel := context.WithCancel(ctx)
			type result struct {
				lctx context.Context
				err  error
			}
			done := make(chan result, 1)
			go func() {
				l, err := m.Lock(wctx)
				done <- result{l, err}
			}()
			select {
			case <-reached: // the waiter is in the turn, before its select
			case <-time.After(10 * time.Second):
				t.Fatal("the second Lock did not wait in the turn")
			}
			require.NoError(t, m.Unlock(lctx)) // hands the lock to the waiter
			cancel()
			close(gate)
			r := <-done
			if r.err == nil {
				_ = m.Unlock(r.lctx)
				t.Fatalf("run %d: Lock returned a lock context with a nil error after its context ended (context: %v)", i, context.Cause(r.lctx))
			}
			require.True(t, errors.Is(r.err, context.Canceled), "run %d: %v", i, r.err)
			// The lock went back: the next Lock gets it at once.
			tctx, ok, err := m.TryLock(ctx)
			require.NoError(t, err)
			require.True(t, ok, "run %d: the handed-over lock was not given back", i)
			require.NoError(t, m.Unlock(tctx))
		}
	})
}
