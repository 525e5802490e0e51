package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/internal/luascripts"
	"github.com/latchkey/latchkey/rlock"
)

// TestRegressForceUnlockWokenOnly: a force-unlock of a lock nobody held
// reported true, and counted latchkey.lock.force_unlocks (and the CLI said
// "deleted the lock"), when all it did was drop a woken client whose wake
// window had passed from the wait queue. It still drops it, but reports
// and counts nothing: no hold was deleted.
func TestRegressForceUnlockWokenOnly(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		for _, k := range []struct {
			kind  rlock.Kind
			queue func(name string) string
			force func(c *rlock.Client, ctx context.Context, name string) (bool, error)
		}{
			{rlock.KindMutex, func(n string) string { return luascripts.NewKeys(rlock.DefaultPrefix + ":{" + n + "}").Queue }, (*rlock.Client).ForceUnlock},
			{rlock.KindRWMutex, func(n string) string { return rwKeysOf(n).QueueW }, (*rlock.Client).ForceUnlockRWMutex},
			{rlock.KindSemaphore, func(n string) string { return semKeysOf(n).Queue }, (*rlock.Client).ForceUnlockSemaphore},
		} {
			t.Run(string(k.kind), func(t *testing.T) {
				ctx := context.Background()
				name := lockName(t)
				r, _, observed := observe(t)
				admin := lockClient(t, tp, observed(rlock.Options{}))
				rc := redisClient(t, tp)
				queue := k.queue(name)
				// Woken, its window ended a second ago; it never came.
				queueWoken(t, rc, queue, luascripts.QueueEntry("deadclient", "{}"), -time.Second)
				t.Cleanup(func() { rc.Do(context.Background(), rc.B().Del().Key(queue).Build()) })

				ok, err := k.force(admin, ctx, name)
				require.NoError(t, err)
				assert.False(t, ok, "a force-unlock of a %s nobody held", k.kind)
				assert.Zero(t, r.value("latchkey.lock.force_unlocks"), "a force-unlock counted")
				n, err := rc.Do(ctx, rc.B().Exists().Key(queue).Build()).AsInt64()
				require.NoError(t, err)
				assert.Zero(t, n, "the woken client that never came was kept")
				requireNoLeftovers(t, tp, name)
			})
		}
	})
}
