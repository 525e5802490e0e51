package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"

	"github.com/latchkey/latchkey/rlock"
)

// TestRegressMultiMutexMetrics: a MultiMutex's calls are recorded once
// each, under its own kind, with the outcome its caller saw. Its members'
// internal tries were recorded as Mutex calls of their own: a member found
// busy was a "timeout", and a member taken and given back an acquisition,
// so one Lock that waited once showed as four Mutex acquires, one of them
// timed out, and a TryLock that got nothing as an acquisition.
func TestRegressMultiMutexMetrics(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		name := lockName(t)
		a, b := name+"-a", name+"-b" // acquired in this order
		other := lockClient(t, tp, rlock.Options{}).Mutex(b)
		hctx := mustLock(t, ctx, other)

		metrics, spans, observed := observe(t)
		att := newAttempts()
		c := lockClient(t, tp, observed(att.options(rlock.Options{})))
		mm := c.MultiMutex(a, b)

		// a is taken, b refused, a given back: the TryLock got nothing.
		_, ok, err := mm.TryLock(ctx)
		require.NoError(t, err)
		require.False(t, ok, "b is held")

		// The Lock takes a, finds b busy, gives a back and waits for b.
		locked := make(chan error, 1)
		var lctx context.Context
		go func() {
			var err error
			lctx, err = mm.Lock(ctx)
			locked <- err
		}()
		await(t, att.reached(waitKey(b), 1), 10*time.Second, "the Lock to wait for b")
		require.NoError(t, other.Unlock(hctx))
		require.NoError(t, recvErr(t, locked, 10*time.Second, "the Lock to take a and b"))
		require.NoError(t, mm.Unlock(lctx))

		kind := attribute.String("latchkey.kind", "multimutex")
		outcome := func(o string) attribute.KeyValue { return attribute.String("latchkey.outcome", o) }
		require.Equal(t, int64(2), metrics.value("latchkey.lock.wait.duration"), "one wait per user call, nothing for the members' tries")
		require.Equal(t, int64(1), metrics.value("latchkey.lock.wait.duration", kind, outcome("timeout")), "the TryLock")
		require.Equal(t, int64(1), metrics.value("latchkey.lock.wait.duration", kind, outcome("acquired")), "the Lock")
		require.Equal(t, int64(1), metrics.value("latchkey.lock.acquisitions"), "one acquisition: the Lock's, not the members'")
		require.Equal(t, int64(1), metrics.value("latchkey.lock.acquisitions", kind, attribute.Bool("latchkey.reentry", false)))
		require.Equal(t, int64(2), metrics.value("latchkey.lock.contended"), "the Lock waited, the TryLock found b busy: once each, nothing for the members")
		require.Equal(t, int64(2), metrics.value("latchkey.lock.contended", kind))
		ended := spans.Ended()
		require.Len(t, ended, 1, "one span: the Lock's wait")
		require.Contains(t, ended[0].Attributes(), kind)
		require.Contains(t, ended[0].Attributes(), outcome("acquired"))
	})
}
