package integration

import (
	"context"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/internal/luascripts"
	"github.com/latchkey/latchkey/rlock"
)

// TestRegressForceUnlockForeignHash: force-unlock checked only the type of
// each key, so an application's hash (or sorted set) where a lock's state
// belongs was deleted: with a wrong prefix (`--prefix app` where the
// application keeps "app:{user42}"), or, with ProtocolRedisson, a Redisson
// RReadWriteLock or RMap under the name. A key that is not of its lock's
// shape is refused as ErrWrongType, and nothing is deleted.
func TestRegressForceUnlockForeignHash(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		rc := redisClient(t, tp)
		app := lockClient(t, tp, rlock.Options{Prefix: "app"})
		redisson := lockClient(t, tp, redissonOptions(rlock.Options{}))

		type foreign struct {
			what  string
			lock  string
			key   string
			write func(key string) rueidis.Completed
			force func(context.Context, string) (bool, error)
		}
		appHash := func(key string) rueidis.Completed {
			return rc.B().Hset().Key(key).FieldValue().FieldValue("name", "bob").FieldValue("email", "b@x").Build()
		}
		name := lockName(t)
		base := "app:{" + name + "}"
		rw, sem := luascripts.NewRWKeys(base+":rw"), luascripts.NewSemKeys(base+":sem")
		for _, f := range []foreign{
			{"a Mutex's hash under a wrong prefix", name, base, appHash, app.ForceUnlock},
			{"an RWMutex's write hold", name, rw.Write, appHash, app.ForceUnlockRWMutex},
			{"an RWMutex's readers", name, rw.Readers, appHash, app.ForceUnlockRWMutex},
			{"an RWMutex's lease set", name, rw.ReadLeases, func(key string) rueidis.Completed {
				return rc.B().Zadd().Key(key).ScoreMember().ScoreMember(1, "alice").ScoreMember(2, "bob").Build()
			}, app.ForceUnlockRWMutex},
			{"a Semaphore's holders", name, sem.Holders, appHash, app.ForceUnlockSemaphore},
			{"a Redisson RReadWriteLock", name + "-rw", name + "-rw", func(key string) rueidis.Completed {
				return rc.B().Hset().Key(key).FieldValue().FieldValue("mode", "read").
					FieldValue("6f1c2a4e-0d5b-4c3e-9a7f-2b8d1e0c4f6a:1", "1").Build()
			}, redisson.ForceUnlock},
			{"a Redisson RMap", name + "-map", name + "-map", func(key string) rueidis.Completed {
				return rc.B().Hset().Key(key).FieldValue().FieldValue("user:1", "5").Build()
			}, redisson.ForceUnlock},
		} {
			t.Run(f.what, func(t *testing.T) {
				require.NoError(t, rc.Do(ctx, f.write(f.key)).Error())
				defer rc.Do(context.Background(), rc.B().Del().Key(f.key).Build())
				before := dump(t, rc, f.key)
				require.NotEmpty(t, before)
				ok, err := f.force(ctx, f.lock)
				require.ErrorIs(t, err, rlock.ErrWrongType, "%s was taken for a lock", f.key)
				assert.False(t, ok)
				assert.Equal(t, before, dump(t, rc, f.key), "%s was changed", f.key)
			})
		}
	})
}

// dump is key's content, as DUMP serializes it ("" when there is none).
func dump(t *testing.T, rc rueidis.Client, key string) string {
	t.Helper()
	s, err := rc.Do(context.Background(), rc.B().Dump().Key(key).Build()).ToString()
	if rueidis.IsRedisNil(err) {
		return ""
	}
	require.NoError(t, err)
	return s
}
