package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/internal/luascripts"
	"github.com/latchkey/latchkey/internal/redistest"
	"github.com/latchkey/latchkey/rlock"
)

// TestRegressRWReadGrantAfterLapse: an RWMutex read grant whose walk dropped
// a woken writer whose window lapsed wakes the readers queued behind it. The
// holder's release woke only the frozen writer queued first; C's try dropped
// it and got in, and D, queued behind it while the holder wrote, could have
// shared with C but was never told: it slept until the holder's lease end.
func TestRegressRWReadGrantAfterLapse(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		const lease = 8 * time.Second
		const frozenW = "frozen-writer"
		ctx := context.Background()
		name := lockName(t)
		rc := redisClient(t, tp)
		keys := rwKeysOf(name)
		wake := luascripts.Wake{Sharded: tp.cluster, Window: rlock.DefaultHandoffWindow}
		holder := lockClient(t, tp, rlock.Options{})
		hctx, err := holder.RWMutex(name).Lock(ctx, rlock.WithLease(lease))
		require.NoError(t, err)

		// A frozen writer queued first: still subscribed, it never comes.
		frozen := subscribeRaw(t, tp, keys.Inbox(frozenW, true))
		r, err := luascripts.RunRWAcquire(ctx, rc, keys, luascripts.AcquireArgs{
			Owner: frozenW + ":1", Lease: time.Minute, Client: frozenW, Waiter: true, Wake: wake}, true, "")
		require.NoError(t, err)
		require.False(t, r.Acquired)

		// D, a reader queued behind it: its refusal's bound is the lease.
		type grant struct {
			at   time.Time
			rctx context.Context
		}
		att := newAttempts()
		d := lockClient(t, tp, att.options(rlock.Options{})).RWMutex(name)
		dDone := make(chan grant, 1)
		go func() {
			rctx, err := d.RLock(ctx)
			if err == nil {
				dDone <- grant{time.Now(), rctx}
			}
		}()
		await(t, att.reached(waitKey(name), 1), 10*time.Second, "D to wait")

		start := time.Now()
		require.NoError(t, holder.RWMutex(name).Unlock(hctx))
		select {
		case <-frozen.msgs: // woken; it will never come
		case <-time.After(10 * time.Second):
			t.Fatal("the release did not wake the frozen writer")
		}
		// Its window ends, by the server's clock (the score is minus its end).
		s, err := rc.Do(ctx, rc.B().Zscore().Key(keys.QueueW).Member(frozenW).Build()).AsFloat64()
		require.NoError(t, err)
		require.Negative(t, s, "the frozen writer got a window")
		awaitCond(t, 10*time.Second, "the frozen writer's window to end", func() bool {
			now, err := redistest.ServerMillis(ctx, rc)
			require.NoError(t, err)
			return now > int64(-s)
		})

		// C, a newcomer, drops the frozen writer and reads.
		c := lockClient(t, tp, rlock.Options{}).RWMutex(name)
		cctx, ok, err := c.TryRLock(ctx)
		require.NoError(t, err)
		require.True(t, ok, "the lapsed writer kept C out")

		select {
		case g := <-dDone:
			t.Logf("D granted %v after the release", g.at.Sub(start))
			require.Less(t, g.at.Sub(start), 2*time.Second,
				"D waited for the holder's lease (%v) beside a reader", lease)
			require.NoError(t, d.RUnlock(g.rctx))
		case <-time.After(2 * lease):
			t.Fatal("D never got in")
		}
		require.NoError(t, c.RUnlock(cctx))
		requireNoLeftovers(t, tp, name)
	})
}
