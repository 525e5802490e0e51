package integration

import (
	"context"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/internal/luascripts"
	"github.com/latchkey/latchkey/rlock"
)

// lostOnce runs the first call of the script ran and then fails it as a
// connection lost before the reply would: the change is made, the outcome
// looks unknown. Later calls go through. after, if set, runs between the
// call and its failure: what others did before the caller retried.
type lostOnce struct {
	rueidis.Client
	ran   string
	lost  *atomic.Bool
	after func()
}

func (c lostOnce) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	if scriptOf(cmd.Commands()) != c.ran || c.lost.Load() {
		return c.Client.Do(ctx, cmd)
	}
	res := c.Client.Do(ctx, cmd)
	if err, ok := rueidis.IsRedisErr(res.Error()); ok && err.IsNoScript() {
		return res // rueidis sends it again with EVAL
	}
	c.lost.Store(true)
	if c.after != nil {
		c.after()
	}
	return rueidis.NewErrorResult(io.ErrUnexpectedEOF)
}

// TestRegressLatchSetReplyLost: a TrySetCount whose reply was lost after
// latchset ran returned the error, and a retry then said false (a count is
// set already), so a coordinator that sets, then spawns its workers, spawned
// none and its Await never returned (a latch has no expiry). TrySetCount now
// retries with the same round id, which latchset recognises as its own.
func TestRegressLatchSetReplyLost(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx := t.Context()
		var lost atomic.Bool
		c, err := rlock.NewClient(lostOnce{Client: redisClient(t, tp), ran: shaOf(luascripts.LatchSet), lost: &lost}, rlock.Options{})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, c.Close()) })
		l := c.CountDownLatch(lockName(t))

		ok, err := l.TrySetCount(ctx, 3)
		require.True(t, lost.Load(), "the reply was lost")
		require.NoError(t, err, "TrySetCount whose reply was lost")
		require.True(t, ok, "TrySetCount whose reply was lost")
		n, err := l.Count(ctx)
		require.NoError(t, err)
		require.Equal(t, int64(3), n)
		ok, err = l.TrySetCount(ctx, 3)
		require.NoError(t, err)
		require.False(t, ok, "another call's TrySetCount finds the count set")
		for range 3 {
			require.NoError(t, l.CountDown(ctx))
		}
		require.NoError(t, l.Await(ctx))
	})
}

// TestRegressLatchSetRetryAfterZero: a TrySetCount whose reply was lost,
// and whose latch its workers counted down to zero before the retry, set
// the count again: zero deleted the latch, so the retry, finding none, took
// itself for the first run. Nobody counts that latch down and it has no
// expiry, so Await hung and every later TrySetCount said false, for ever.
// Zero now leaves the round behind for the setter's retries.
func TestRegressLatchSetRetryAfterZero(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx := t.Context()
		name := lockName(t)
		worker := lockClient(t, tp, rlock.Options{}).CountDownLatch(name)
		var lost atomic.Bool
		c, err := rlock.NewClient(lostOnce{Client: redisClient(t, tp), ran: shaOf(luascripts.LatchSet), lost: &lost,
			after: func() { require.NoError(t, worker.CountDown(ctx)) }}, rlock.Options{})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, c.Close()) })
		l := c.CountDownLatch(name)

		ok, err := l.TrySetCount(ctx, 1)
		require.True(t, lost.Load(), "the reply was lost")
		require.NoError(t, err, "TrySetCount whose reply was lost")
		require.True(t, ok, "TrySetCount whose reply was lost")
		n, err := l.Count(ctx)
		require.NoError(t, err)
		require.Zero(t, n, "the retry set the count again after its zero")
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		require.NoError(t, l.Await(actx), "Await of a latch counted down")

		// The latch can be set again, by another call.
		ok, err = l.TrySetCount(ctx, 1)
		require.NoError(t, err)
		require.True(t, ok, "a new TrySetCount after the zero")
		require.NoError(t, worker.CountDown(ctx))
		require.NoError(t, l.Await(actx))
	})
}
