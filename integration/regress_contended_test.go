package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"

	"github.com/latchkey/latchkey/rlock"
)

// TestRegressContendedRefusedTry: a TryLock without a wait that finds the
// lock busy counts as contended, as the "Contention ratio" panel (contended
// over wait.duration's count) and the counter's description promise: it
// found the lock busy. It was recorded as wait.duration{outcome=timeout},
// the panel's denominator, and never as contended, so a workload of
// refused tries read as uncontended. A try that gets the lock is not.
func TestRegressContendedRefusedTry(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		r, _, observed := observe(t)
		c := lockClient(t, tp, observed(rlock.Options{}))
		other := lockClient(t, tp, rlock.Options{})
		name := lockName(t)
		kind := func(k string) attribute.KeyValue { return attribute.String("latchkey.kind", k) }

		// Free: the try gets the lock, uncontended.
		lctx, ok, err := c.Mutex(name).TryLock(ctx)
		require.NoError(t, err)
		require.True(t, ok)
		require.NoError(t, c.Mutex(name).Unlock(lctx))
		require.Zero(t, r.value("latchkey.lock.contended"), "a try that got the lock")

		// Busy: each try is refused at once, and found the lock busy.
		held := mustLock(t, ctx, other.Mutex(name))
		_, ok, err = c.Mutex(name).TryLock(ctx)
		require.NoError(t, err)
		require.False(t, ok)
		require.EqualValues(t, 1, r.value("latchkey.lock.contended", kind("mutex")), "the refused TryLock")

		rw := name + "-rw"
		wctx, err := other.RWMutex(rw).Lock(ctx)
		require.NoError(t, err)
		_, ok, err = c.RWMutex(rw).TryRLock(ctx)
		require.NoError(t, err)
		require.False(t, ok)
		require.EqualValues(t, 1, r.value("latchkey.lock.contended", kind("rwmutex_read")), "the refused TryRLock")

		sem := name + "-sem"
		pctx, err := other.Semaphore(sem, 1).Acquire(ctx, 1)
		require.NoError(t, err)
		_, ok, err = c.Semaphore(sem, 1).TryAcquire(ctx, 1)
		require.NoError(t, err)
		require.False(t, ok)
		require.EqualValues(t, 1, r.value("latchkey.lock.contended", kind("semaphore")), "the refused TryAcquire")

		// Every refused try is in the panel's denominator, once.
		require.EqualValues(t, 3, r.value("latchkey.lock.wait.duration", attribute.String("latchkey.outcome", "timeout")))
		require.EqualValues(t, 3, r.value("latchkey.lock.contended"))

		require.NoError(t, other.Mutex(name).Unlock(held))
		require.NoError(t, other.RWMutex(rw).Unlock(wctx))
		require.NoError(t, other.Semaphore(sem, 1).Release(pctx))
		requireNoLeftovers(t, tp, name, rw, sem)
	})
}
