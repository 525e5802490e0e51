package rlock

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/internal/luascripts"
)

// TestRegressSecondCloseWaits: a second Close (a signal handler's, then a
// deferred one) returns once the first has finished. It returned at once
// while the first still waited for its contenders to leave the queues; a
// caller closing its rueidis client next made the leave fail, and the
// client's entry stayed in the queue. The leave script is slowed down so
// that the first Close is still at it when the second returns.
func TestRegressSecondCloseWaits(t *testing.T) {
	const slowLeave = 500 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	plain := privateRedis(ctx, t)

	hooked := newScriptHooks(plain)
	var slowed sync.Once // once: the leave's EVALSHA and its EVAL after NOSCRIPT share a second
	hooked.on(luascripts.Leave, func(call func() rueidis.RedisResult) rueidis.RedisResult {
		slowed.Do(func() { time.Sleep(slowLeave) })
		return call()
	})
	c, err := NewClient(hooked, Options{})
	require.NoError(t, err)
	rival, err := NewClient(plain, Options{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, rival.Close()) })

	m := c.Mutex(t.Name())
	rm := rival.Mutex(t.Name())
	rctx, err := rm.Lock(ctx)
	require.NoError(t, err)
	defer func() { require.NoError(t, rm.Unlock(rctx)) }()

	locked := make(chan error, 1)
	go func() {
		_, err := m.Lock(ctx)
		locked <- err
	}()
	queued := func() int64 {
		n, err := plain.Do(ctx, plain.B().Zcard().Key(m.keys.Queue).Build()).AsInt64()
		require.NoError(t, err)
		return n
	}
	require.Eventually(t, func() bool { return queued() == 1 }, 10*time.Second, 5*time.Millisecond, "the waiter to queue")

	first := make(chan error, 1)
	go func() { first <- c.Close() }()
	<-c.closing.Done() // the first Close is under way
	require.NoError(t, c.Close())
	require.Zero(t, queued(), "the second Close returned while the first was still taking the client off the queue")

	require.NoError(t, <-first)
	require.ErrorIs(t, <-locked, ErrClosed)
}
