package integration

import (
	"context"
	"io"
	"testing"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/internal/luascripts"
	"github.com/latchkey/latchkey/rlock"
)

// failedAcquires fails, as a lost connection would, the acquire script
// calls for one lock key, sending nothing.
type failedAcquires struct {
	rueidis.Client
	sha, key string
}

func (c failedAcquires) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	// EVALSHA sha 3 lock fence queue ...
	if args := cmd.Commands(); len(args) > 3 && args[0] == "EVALSHA" && args[1] == c.sha && args[3] == c.key {
		return rueidis.NewErrorResult(io.ErrUnexpectedEOF)
	}
	return c.Client.Do(ctx, cmd)
}

// TestRegressMultiMutexTryLockFailure: a MultiMutex TryLock whose try of a
// member other than the first fails (Redis out of reach) returns the
// error, as Mutex.TryLock does, and holds nothing. It counted the failure
// as busy and returned (nil, false, nil).
func TestRegressMultiMutexTryLockFailure(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx := context.Background()
		a, b := lockName(t)+"-a", lockName(t)+"-b"
		probe := lockClient(t, tp, rlock.Options{})
		c, err := rlock.NewClient(failedAcquires{Client: redisClient(t, tp), sha: shaOf(luascripts.Acquire), key: probe.Mutex(b).Key()}, rlock.Options{})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, c.Close()) })
		mctx, ok, err := c.MultiMutex(a, b).TryLock(ctx)
		require.ErrorIs(t, err, io.ErrUnexpectedEOF, "TryLock: %v held", ok)
		require.False(t, ok)
		require.Nil(t, mctx)
		for _, n := range []string{a, b} {
			pctx, held, err := probe.Mutex(n).TryLock(ctx)
			require.NoError(t, err)
			require.True(t, held, "%s stayed held", n)
			require.NoError(t, probe.Mutex(n).Unlock(pctx))
		}
	})
}
