package luascripts_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/internal/luascripts"
)

// redissonKeys names a Redisson lock no other test uses and deletes its
// keys, token counter included (it is not latchkey's), when the test ends.
func redissonKeys(t *testing.T, c rueidis.Client, braces bool) luascripts.RedissonKeys {
	t.Helper()
	name := uniqueTag(t)
	if braces {
		name = "app:{" + name + "}:lock"
	}
	k := luascripts.NewRedissonKeys(name)
	t.Cleanup(func() {
		assert.NoError(t, c.Do(context.Background(), c.B().Del().Key(k.Lock, k.Token).Build()).Error())
	})
	return k
}

func TestRedissonKeys(t *testing.T) {
	assert.Equal(t, luascripts.RedissonKeys{Lock: "orders", Channel: "redisson_lock__channel:{orders}", Token: "redisson_lock_token:{orders}"},
		luascripts.NewRedissonKeys("orders"))
	assert.Equal(t, luascripts.RedissonKeys{Lock: "a:{b}", Channel: "redisson_lock__channel:a:{b}", Token: "redisson_lock_token:a:{b}"},
		luascripts.NewRedissonKeys("a:{b}"), "a name with a brace keeps its own hash tag")
}

// TestRedissonLock runs every Redisson script on standalone Redis (under
// TestDeclaredKeys' audit too) and on the Cluster, with PUBLISH and
// SPUBLISH, names with and without a hash tag.
func TestRedissonLock(t *testing.T) {
	for _, top := range []struct {
		name    string
		addrs   []string
		sharded bool
	}{{"standalone", []string{standaloneAddr}, false}, {"cluster", clusterAddrs, true}} {
		for _, braces := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/braces=%v", top.name, braces), func(t *testing.T) {
				c := newClient(t, top.addrs...)
				k := redissonKeys(t, c, braces)
				testRedissonLock(t, c, top.addrs, top.sharded, k)
			})
		}
	}
}

func testRedissonLock(t *testing.T, c rueidis.Client, addrs []string, sharded bool, k luascripts.RedissonKeys) {
	ctx := t.Context()
	// The owners are "<UUID>:<thread id>", Redisson's getLockName.
	const u = "7b0c6d2e-5f1a-4e3b-8c9d-0a1b2c3d4e5f"
	msgs := subscribe(t, addrs, sharded, k.Channel)
	acquire := func(owner string) luascripts.AcquireReply {
		r, err := k.Acquire(ctx, c, luascripts.AcquireArgs{Owner: owner, Lease: lease})
		require.NoError(t, err)
		return r
	}
	release := func(a luascripts.ReleaseArgs) luascripts.ReleaseReply {
		a.Wake.Sharded = sharded
		r, err := k.Release(ctx, c, a)
		require.NoError(t, err)
		return r
	}

	assert.Equal(t, luascripts.AcquireReply{Acquired: true, Token: 1}, acquire(u+":1"))
	assert.Equal(t, map[string]string{u + ":1": "1"}, hgetall(t, c, k.Lock), "Redisson's shape: owner -> count")
	between(t, pttl(t, c, k.Lock), lease-time.Minute, lease, "the lease is the hash's expiry")
	r := acquire(u + ":2")
	assert.False(t, r.Acquired)
	between(t, r.PTTL, lease-time.Minute, lease, "a refusal tells the holder's PTTL")
	assert.Equal(t, "1", get(t, c, k.Token), "a refusal takes no token")

	n, err := k.Reenter(ctx, c, u+":1")
	require.NoError(t, err)
	assert.Equal(t, int64(2), n)
	assert.Equal(t, "2", get(t, c, k.Token), "a re-entry takes a token, as RFencedLock's does")
	n, err = k.Reenter(ctx, c, u+":2")
	require.NoError(t, err)
	assert.Zero(t, n, "no re-entry without a hold")

	assert.Equal(t, luascripts.ReleaseReply{Left: 1}, release(luascripts.ReleaseArgs{Owner: u + ":1", Count: 2}))
	assert.Equal(t, luascripts.ReleaseReply{Left: 1}, release(luascripts.ReleaseArgs{Owner: u + ":1", Count: 2, Retry: true}), "a retry is counted once")
	assert.Equal(t, luascripts.ReleaseReply{Left: -1}, release(luascripts.ReleaseArgs{Owner: u + ":1", Count: 2}), "a wrong count changes nothing")
	assert.Equal(t, luascripts.ReleaseReply{Left: 0, Woken: 1}, release(luascripts.ReleaseArgs{Owner: u + ":1", Count: 1}))
	expectMessages(t, msgs, "0")
	assert.False(t, exists(t, c, k.Lock))
	assert.Equal(t, luascripts.ReleaseReply{}, release(luascripts.ReleaseArgs{Owner: u + ":1", Count: 1, Retry: true}), "a retry publishes nothing")

	// A handover: the heir holds at once, with a new token, and nobody is told.
	assert.Equal(t, luascripts.AcquireReply{Acquired: true, Token: 3}, acquire(u+":3"))
	heir := luascripts.ReleaseArgs{Owner: u + ":3", Count: 1, Heir: u + ":4", HeirLease: lease}
	assert.Equal(t, luascripts.ReleaseReply{Handed: true, Token: 4}, release(heir))
	heir.Retry = true
	assert.Equal(t, luascripts.ReleaseReply{Handed: true, Token: 4}, release(heir), "a retry finds the handover done")
	assert.Equal(t, map[string]string{u + ":4": "1"}, hgetall(t, c, k.Lock))
	// A heir whose lease may end first: the Java waiters are told to ask again.
	short := luascripts.ReleaseArgs{Owner: u + ":4", Count: 1, Heir: u + ":5", HeirLease: lease / 2, HeirCheck: true}
	assert.Equal(t, luascripts.ReleaseReply{Handed: true, Token: 5}, release(short))
	expectMessages(t, msgs, "0")
	assert.Equal(t, map[string]string{u + ":5": "1"}, hgetall(t, c, k.Lock))

	// Inspect's view: holders without records.
	d := describe(t, c, k.Intro(), 10)
	require.Len(t, d.Holds, 1)
	assert.Equal(t, u+":5", d.Holds[0].Owner)
	assert.Equal(t, int64(1), d.Holds[0].Count)
	assert.Empty(t, d.Queues)
	assert.Empty(t, d.Damaged)

	// ForceUnlock deletes and tells the waiters; a second finds nothing.
	wake := luascripts.Wake{Sharded: sharded}
	deleted, foreign, err := k.Intro().ForceUnlock(ctx, c, wake)
	require.NoError(t, err)
	assert.True(t, deleted)
	assert.Empty(t, foreign)
	expectMessages(t, msgs, "0")
	deleted, _, err = k.Intro().ForceUnlock(ctx, c, wake)
	require.NoError(t, err)
	assert.False(t, deleted)

	// A key of another type under the name is not a lock: nothing deleted.
	do(t, c, c.B().Set().Key(k.Lock).Value("app").Build())
	deleted, foreign, err = k.Intro().ForceUnlock(ctx, c, wake)
	require.NoError(t, err)
	assert.False(t, deleted)
	assert.Equal(t, k.Lock, foreign)
	assert.Equal(t, "app", get(t, c, k.Lock))
}
