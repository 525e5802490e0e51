package integration

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/rlock"
)

// TestRegressShortLeaseHandoverWakesQueue: a local handover may give the
// heir a shorter lease than the one queued waiters of other clients were
// told to wait for. When the heir then never unlocks (its lease runs out:
// no release, no message), those waiters slept on the old holder's TTL.
// Found by TORTURE_DUR=10m, seed 1795791729815707799: three waiters sat
// 788 ms on a free lock, until the 2 s watchdog TTL they had been given.
// Redisson's protocol had the same gap: its waiters sleep on the TTL too.
func TestRegressShortLeaseHandoverWakesQueue(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		for _, proto := range []rlock.Protocol{rlock.ProtocolLatchkey, rlock.ProtocolRedisson} {
			t.Run(protoName(proto), func(t *testing.T) { shortLeaseHandover(t, tp, proto, false) })
			// The holder's lease was as short as the heir's, but Extend made
			// the lock's TTL longer: the release must still read it.
			t.Run(protoName(proto)+"/extended", func(t *testing.T) { shortLeaseHandover(t, tp, proto, true) })
		}
	})
}

func shortLeaseHandover(t *testing.T, tp topology, proto rlock.Protocol, extend bool) {
	ctx := context.Background()
	name := lockName(t)
	att := newAttempts()
	c := lockClient(t, tp, att.options(rlock.Options{Protocol: proto}))
	heirLease := 300 * time.Millisecond
	var hctx context.Context
	if extend {
		heirLease = time.Second
		hctx = mustLock(t, ctx, c.Mutex(name), rlock.WithLease(heirLease))
		require.NoError(t, c.Mutex(name).Extend(hctx, time.Minute))
	} else {
		hctx = mustLock(t, ctx, c.Mutex(name), rlock.WithLease(time.Minute))
	}

	datt := newAttempts()
	d := lockClient(t, tp, datt.options(rlock.Options{Protocol: proto}))
	done := startWaiter(t, ctx, d.Mutex(name), datt) // told to wait a minute

	heir := c.Mutex(name)
	heirCtx := make(chan context.Context, 1)
	var wg sync.WaitGroup
	blockWaiters(t, att, name, 1, &wg, func() {
		lctx, err := heir.Lock(ctx, rlock.WithLease(heirLease))
		if err != nil {
			t.Error(err)
		}
		heirCtx <- lctx
	})
	require.NoError(t, c.Mutex(name).Unlock(hctx)) // handed to the heir
	wg.Wait()
	lctx := <-heirCtx
	require.NotNil(t, lctx)

	// The heir never unlocks in time: its lease ends, and the other
	// client's waiter must get the lock then, not a minute later.
	requireAcquired(t, done, 20*time.Second, "the waiter after the heir's short lease")
	<-lctx.Done()
	require.ErrorIs(t, context.Cause(lctx), rlock.ErrLockLost)
	require.ErrorIs(t, heir.Unlock(lctx), rlock.ErrLockLost)
}

func protoName(p rlock.Protocol) string {
	if p == rlock.ProtocolRedisson {
		return "redisson"
	}
	return "latchkey"
}
