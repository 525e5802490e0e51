package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/rlock"
)

// TestRegressExtendKeepsDerivedTimeout: a timeout derived from a leased lock
// context ends on time after an Extend. The lock context reported the
// lease's end as its Deadline and Extend moved it, against the context
// contract (a deadline never moves): WithTimeout, seeing an earlier parent
// deadline, made no timer of its own, so the derived context then lived
// until the extended lease's end. The lease's end is rlock.LeaseEnd now.
func TestRegressExtendKeepsDerivedTimeout(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx := context.Background()
		c := lockClient(t, tp, rlock.Options{})
		name := lockName(t)
		m := c.Mutex(name)
		rw := c.RWMutex(name + "-rw")
		sem := c.Semaphore(name+"-sem", 2)
		for _, k := range []struct {
			kind   string
			lock   func() (context.Context, error)
			extend func(context.Context, time.Duration) error
			unlock func(context.Context) error
		}{
			{"mutex", func() (context.Context, error) { return m.Lock(ctx, rlock.WithLease(time.Second)) }, m.Extend, m.Unlock},
			{"read", func() (context.Context, error) { return rw.RLock(ctx, rlock.WithLease(time.Second)) }, rw.RExtend, rw.RUnlock},
			{"permits", func() (context.Context, error) { return sem.Acquire(ctx, 1, rlock.WithLease(time.Second)) }, sem.Extend, sem.Release},
		} {
			lctx, err := k.lock()
			require.NoError(t, err, k.kind)
			before, hadDeadline := lctx.Deadline()
			end, ok := rlock.LeaseEnd(lctx)
			require.True(t, ok, "%s: a leased hold's context has a lease end", k.kind)

			cctx, cancel := context.WithTimeout(lctx, 1500*time.Millisecond)
			require.NoError(t, k.extend(lctx, 20*time.Second), k.kind)
			after, hasDeadline := lctx.Deadline()
			require.Equal(t, hadDeadline, hasDeadline, "%s: Extend changed whether the context has a deadline", k.kind)
			require.True(t, before.Equal(after), "%s: Extend moved the context's deadline from %v to %v", k.kind, before, after)
			moved, ok := rlock.LeaseEnd(lctx)
			require.True(t, ok && moved.Sub(end) > 15*time.Second, "%s: Extend did not move the lease end (%v to %v)", k.kind, end, moved)

			select {
			case <-cctx.Done():
				require.ErrorIs(t, cctx.Err(), context.DeadlineExceeded, k.kind)
			case <-time.After(5 * time.Second):
				t.Fatalf("%s: a 1.5 s timeout derived from the lock context still runs 5 s later, after Extend", k.kind)
			}
			cancel()
			require.NoError(t, lctx.Err(), "%s: the extended hold ended", k.kind)
			require.NoError(t, k.unlock(lctx), k.kind)
		}
	})
}
