package integration

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/rlock"
)

// TestRegressRedissonSpinTurnOwnKey: with ProtocolRedisson a lock's key is
// its bare name, so SpinMutex(n)'s local turn, named n+":spin", was the
// turn of Mutex(n+":spin") too: the spin variant waited behind a hold of
// another lock (TryLock said busy on a free lock), and that hold's release
// handed it a grant of the other key, a hold of n that Redis never had.
func TestRegressRedissonSpinTurnOwnKey(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx := context.Background()
		rc := redisClient(t, tp)
		name := lockName(t)
		t.Cleanup(func() {
			for _, k := range []string{name, name + ":spin"} { // two slots on a Cluster
				_ = rc.Do(context.Background(), rc.B().Del().Key(k).Build()).Error()
			}
		})
		c := lockClient(t, tp, redissonOptions(rlock.Options{}))
		other := c.Mutex(name + ":spin")
		octx, err := other.Lock(ctx)
		require.NoError(t, err)
		spin := c.SpinMutex(name)
		sctx, ok, err := spin.TryLock(ctx)
		require.NoError(t, err)
		require.True(t, ok, "SpinMutex(%q) refused while only %q is held", name, name+":spin")
		require.True(t, exists(t, rc, name), "the spin variant's hold is not in Redis")
		require.NoError(t, spin.Unlock(sctx))
		require.NoError(t, other.Unlock(octx))
		require.False(t, exists(t, rc, name+":spin"))
	})
}
