package luascripts_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/integration/redistest"
	"github.com/latchkey/latchkey/internal/luascripts"
)

var (
	standaloneAddr string
	clusterAddrs   []string

	// runID and seq make every key name unique, across tests and across
	// -count repetitions against the same server.
	runID = time.Now().UnixNano()
	seq   atomic.Int64
)

// waitFor bounds every wait for something that should happen promptly
// (a pub/sub message, a subscription confirmation). It is generous on
// purpose: it only matters when the test is failing.
const waitFor = 10 * time.Second

// TestMain gets real servers from the harness; RunTests checks for leaked
// goroutines with goleak once they are closed.
func TestMain(m *testing.M) {
	os.Exit(redistest.RunTests(m, "luascripts", true, func(e redistest.Env) {
		standaloneAddr, clusterAddrs = e.Standalone.Addr, e.Cluster.Addrs
	}, nil))
}

// ---- helpers ----

func newClient(t *testing.T, addrs ...string) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: addrs, DisableCache: true})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

func standaloneClient(t *testing.T) rueidis.Client {
	t.Helper()
	c := newClient(t, standaloneAddr)
	require.Equal(t, rueidis.ClientModeStandalone, c.Mode())
	return c
}

func clusterClient(t *testing.T) rueidis.Client {
	t.Helper()
	c := newClient(t, clusterAddrs...)
	require.Equal(t, rueidis.ClientModeCluster, c.Mode())
	return c
}

// uniqueTag is a hash tag no other test (or repetition) uses.
func uniqueTag(t *testing.T) string {
	return fmt.Sprintf("%s-%d-%d", t.Name(), runID, seq.Add(1))
}

// testWaiter is the client id the tests queue in a lock's wait queue before
// freeing it, so that the release wakes it: on "<channel>:w".
const testWaiter = "w"

// lockNames returns a lock key and the channel on which testWaiter is woken,
// sharing one hash tag as latchkey names them.
func lockNames(t *testing.T) (key, inbox string) {
	tag := uniqueTag(t)
	return "latchkey:{" + tag + "}", "latchkey:{" + tag + "}:ch:" + testWaiter
}

// freeKeys queues testWaiter on key's lock and returns the keys of the
// scripts that free it: lock, channel, fencing counter, queue.
func freeKeys(t *testing.T, c rueidis.Client, key, inbox string) []string {
	t.Helper()
	do(t, c, c.B().Zadd().Key(key+":q").Nx().ScoreMember().ScoreMember(0, testWaiter).Build())
	return []string{key, strings.TrimSuffix(inbox, ":"+testWaiter), key + ":fence", key + ":q"}
}

func acquireRaw(t *testing.T, c rueidis.Client, key, owner string, lease time.Duration) []int64 {
	t.Helper()
	v, err := luascripts.Acquire.Exec(t.Context(), c, []string{key, key + ":fence", key + ":q"}, []string{owner, luascripts.Millis(lease), "client-" + owner, ""}).AsIntSlice()
	require.NoError(t, err)
	return v
}

func acquire(t *testing.T, c rueidis.Client, key, owner string, lease time.Duration) luascripts.AcquireReply {
	t.Helper()
	r, err := luascripts.ParseAcquire(acquireRaw(t, c, key, owner, lease))
	require.NoError(t, err)
	return r
}

func release(t *testing.T, c rueidis.Client, key, channel, owner, notify string, expected int) int64 {
	t.Helper()
	return releaseIdem(t, c, key, channel, owner, notify, expected, "", "")
}

// releaseIdem is release with the idempotency arguments: the grant's token
// and a release id.
func releaseIdem(t *testing.T, c rueidis.Client, key, channel, owner, notify string, expected int, token, rid string) int64 {
	t.Helper()
	return int64(execRelease(t, c, freeKeys(t, c, key, channel), owner, notify, fmt.Sprint(expected), token, rid, "0").Status)
}

// execRelease runs the release script without an heir and decodes its reply.
func execRelease(t *testing.T, c rueidis.Client, keys []string, owner, notify, expected, token, rid, handoff string) luascripts.ReleaseReply {
	t.Helper()
	return execReleaseArgs(t, c, keys, owner, notify, expected, token, rid, handoff, "", "0", "", "", retryFlag(token, rid))
}

// retryFlag marks a release with a token or an id as a retry, so that the
// script checks them.
func retryFlag(token, rid string) string {
	if token != "" || rid != "" {
		return "1"
	}
	return "0"
}

func execReleaseArgs(t *testing.T, c rueidis.Client, keys []string, args ...string) luascripts.ReleaseReply {
	t.Helper()
	v, err := luascripts.Release.Exec(t.Context(), c, keys, args).AsIntSlice()
	require.NoError(t, err)
	r, err := luascripts.ParseRelease(v)
	require.NoError(t, err)
	return r
}

func do(t *testing.T, c rueidis.Client, cmd rueidis.Completed) rueidis.RedisResult {
	t.Helper()
	r := c.Do(t.Context(), cmd)
	require.NoError(t, r.Error())
	return r
}

func pttl(t *testing.T, c rueidis.Client, key string) time.Duration {
	t.Helper()
	n, err := do(t, c, c.B().Pttl().Key(key).Build()).AsInt64()
	require.NoError(t, err)
	return time.Duration(n) * time.Millisecond
}

// expireAt is the key's absolute expiry (PEXPIRETIME, Redis 7): unlike PTTL
// it does not move while nothing touches the key, so "unchanged" is exact.
func expireAt(t *testing.T, c rueidis.Client, key string) int64 {
	t.Helper()
	n, err := do(t, c, c.B().Pexpiretime().Key(key).Build()).AsInt64()
	require.NoError(t, err)
	return n
}

func exists(t *testing.T, c rueidis.Client, key string) bool {
	t.Helper()
	n, err := do(t, c, c.B().Exists().Key(key).Build()).AsInt64()
	require.NoError(t, err)
	return n == 1
}

func get(t *testing.T, c rueidis.Client, key string) string {
	t.Helper()
	v, err := do(t, c, c.B().Get().Key(key).Build()).ToString()
	require.NoError(t, err)
	return v
}

func hgetall(t *testing.T, c rueidis.Client, key string) map[string]string {
	t.Helper()
	m, err := do(t, c, c.B().Hgetall().Key(key).Build()).AsStrMap()
	require.NoError(t, err)
	return m
}

func publish(t *testing.T, c rueidis.Client, notify, channel, msg string) {
	t.Helper()
	if notify == luascripts.NotifySharded {
		do(t, c, c.B().Spublish().Channel(channel).Message(msg).Build())
	} else {
		do(t, c, c.B().Publish().Channel(channel).Message(msg).Build())
	}
}

func scriptSHA(s *luascripts.Script) string {
	sum := sha1.Sum([]byte(s.Source()))
	return hex.EncodeToString(sum[:])
}

func scriptCached(t *testing.T, c rueidis.Client, s *luascripts.Script) bool {
	t.Helper()
	v, err := do(t, c, c.B().ScriptExists().Sha1(scriptSHA(s)).Build()).AsIntSlice()
	require.NoError(t, err)
	require.Len(t, v, 1)
	return v[0] == 1
}

// subscribe listens on channel (SUBSCRIBE for "p", SSUBSCRIBE for "s") with
// a dedicated client and returns once the server has confirmed the
// subscription. Messages arrive on the returned channel in order.
func subscribe(t *testing.T, addrs []string, notify, channel string) <-chan string {
	t.Helper()
	c := newClient(t, addrs...)
	kind, cmd := "subscribe", c.B().Subscribe().Channel(channel).Build()
	if notify == luascripts.NotifySharded {
		kind, cmd = "ssubscribe", c.B().Ssubscribe().Channel(channel).Build()
	}
	subscribed := make(chan struct{})
	var once sync.Once
	ctx, cancel := context.WithCancel(context.Background())
	ctx = rueidis.WithOnSubscriptionHook(ctx, func(s rueidis.PubSubSubscription) {
		if s.Kind == kind && s.Channel == channel {
			once.Do(func() { close(subscribed) })
		}
	})
	msgs := make(chan string, 64)
	done := make(chan error, 1)
	go func() {
		done <- c.Receive(ctx, cmd, func(m rueidis.PubSubMessage) {
			if m.Channel == channel {
				msgs <- m.Message
			}
		})
	}()
	// Registered after newClient's Close, so it runs before it.
	t.Cleanup(func() {
		cancel()
		<-done
	})
	select {
	case <-subscribed:
	case err := <-done:
		t.Fatalf("Receive on %s ended before the subscription was confirmed: %v", channel, err)
	case <-time.After(waitFor):
		t.Fatalf("%s %s not confirmed within %v", kind, channel, waitFor)
	}
	return msgs
}

// expectMessages asserts that the next messages are exactly want, in order.
func expectMessages(t *testing.T, msgs <-chan string, want ...string) {
	t.Helper()
	for i, w := range want {
		select {
		case got := <-msgs:
			require.Equal(t, w, got, "message %d", i)
		case <-time.After(waitFor):
			t.Fatalf("message %d (%q) not received within %v", i, w, waitFor)
		}
	}
}

// expectNothingPublished publishes a sentinel on channel and asserts that it
// is the first message received: anything published before it (by the
// script under test) would have arrived first.
func expectNothingPublished(t *testing.T, c rueidis.Client, msgs <-chan string, notify, channel string) {
	t.Helper()
	sentinel := fmt.Sprintf("sentinel-%d", seq.Add(1))
	publish(t, c, notify, channel, sentinel)
	expectMessages(t, msgs, sentinel)
}

var notifyModes = []struct {
	name, notify string
}{
	{"publish", luascripts.NotifyClassic},
	{"spublish", luascripts.NotifySharded},
}

// ---- acquire ----

func TestAcquire(t *testing.T) {
	c := standaloneClient(t)
	key, _ := lockNames(t)
	const lease = 10 * time.Second

	assert.Equal(t, []int64{1, 1, 1}, acquireRaw(t, c, key, "A", lease), "free lock: the first token")
	p := pttl(t, c, key)
	assert.Greater(t, p, lease/2)
	assert.LessOrEqual(t, p, lease)
	assert.Equal(t, map[string]string{"A": "1"}, hgetall(t, c, key))

	assert.Equal(t, []int64{1, 2, 1}, acquireRaw(t, c, key, "A", lease), "reentrant: same token")
	assert.Equal(t, map[string]string{"A": "2"}, hgetall(t, c, key))

	v := acquireRaw(t, c, key, "B", lease)
	require.Len(t, v, 2)
	assert.Equal(t, int64(0), v[0], "other owner")
	assert.Greater(t, v[1], int64(0), "holder's pttl")
	r, err := luascripts.ParseAcquire(v)
	require.NoError(t, err)
	assert.False(t, r.Acquired)
	assert.Greater(t, r.PTTL, lease/2)
	assert.LessOrEqual(t, r.PTTL, lease)
	assert.Equal(t, map[string]string{"A": "2"}, hgetall(t, c, key), "a refused acquire changes nothing")
	assert.Equal(t, "1", get(t, c, key+":fence"), "a refused acquire takes no token")
}

// Tokens rise strictly from grant to grant, whoever the owner, and the
// counter outlives the lock.
func TestAcquireFencingToken(t *testing.T) {
	c := standaloneClient(t)
	key, ch := lockNames(t)
	var last int64
	for i, owner := range []string{"A", "B", "A", "C"} {
		r := acquire(t, c, key, owner, 10*time.Second)
		require.True(t, r.Acquired)
		assert.Greater(t, r.Token, last, "grant %d", i)
		last = r.Token
		again := acquire(t, c, key, owner, 10*time.Second)
		assert.Equal(t, r.Token, again.Token, "re-entry keeps grant %d's token", i)
		require.Equal(t, int64(1), release(t, c, key, ch, owner, luascripts.NotifyClassic, 0))
		require.Equal(t, int64(0), release(t, c, key, ch, owner, luascripts.NotifyClassic, 0))
	}
	assert.Equal(t, -time.Millisecond, pttl(t, c, key+":fence"), "the counter never expires")
}

func TestAcquireExpiryRaisedNeverLowered(t *testing.T) {
	c := standaloneClient(t)

	t.Run("NotLowered", func(t *testing.T) {
		key, _ := lockNames(t)
		require.Equal(t, luascripts.AcquireReply{Acquired: true, Count: 1, Token: 1}, acquire(t, c, key, "A", 10*time.Second))
		require.Equal(t, luascripts.AcquireReply{Acquired: true, Count: 2, Token: 1}, acquire(t, c, key, "A", time.Second))
		assert.Greater(t, pttl(t, c, key), 5*time.Second)
	})
	t.Run("Raised", func(t *testing.T) {
		key, _ := lockNames(t)
		require.Equal(t, luascripts.AcquireReply{Acquired: true, Count: 1, Token: 1}, acquire(t, c, key, "A", time.Second))
		require.Equal(t, luascripts.AcquireReply{Acquired: true, Count: 2, Token: 1}, acquire(t, c, key, "A", 10*time.Second))
		assert.Greater(t, pttl(t, c, key), 5*time.Second)
	})
	t.Run("HolderWithoutExpiry", func(t *testing.T) {
		key, _ := lockNames(t)
		do(t, c, c.B().Hset().Key(key).FieldValue().FieldValue("A", "1").Build())
		assert.Equal(t, []int64{0, -1}, acquireRaw(t, c, key, "B", time.Second), "pttl -1 for a holder without expiry")
		assert.Equal(t, []int64{1, 2, 0}, acquireRaw(t, c, key, "A", 10*time.Second), "no counter: token 0")
		p := pttl(t, c, key)
		assert.Greater(t, p, 5*time.Second, "re-entry gives the lock an expiry")
		assert.LessOrEqual(t, p, 10*time.Second)
	})
}

// ---- release ----

func TestRelease(t *testing.T) {
	for _, mode := range notifyModes {
		t.Run(mode.name, func(t *testing.T) {
			notify := mode.notify

			t.Run("NotOwner", func(t *testing.T) {
				c := standaloneClient(t)
				key, ch := lockNames(t)
				msgs := subscribe(t, []string{standaloneAddr}, notify, ch)
				require.True(t, acquire(t, c, key, "A", 100*time.Second).Acquired)
				before, at := hgetall(t, c, key), expireAt(t, c, key)

				assert.Equal(t, int64(-1), release(t, c, key, ch, "B", notify, 0))
				assert.Equal(t, before, hgetall(t, c, key), "hash unchanged")
				assert.Equal(t, at, expireAt(t, c, key), "expiry unchanged")
				expectNothingPublished(t, c, msgs, notify, ch)

				// Releasing a lock nobody holds does not create it.
				missing, _ := lockNames(t)
				assert.Equal(t, int64(-1), release(t, c, missing, ch, "A", notify, 0))
				assert.False(t, exists(t, c, missing))
				expectNothingPublished(t, c, msgs, notify, ch)
			})

			t.Run("Reentrant", func(t *testing.T) {
				c := standaloneClient(t)
				key, ch := lockNames(t)
				msgs := subscribe(t, []string{standaloneAddr}, notify, ch)
				require.True(t, acquire(t, c, key, "A", 100*time.Second).Acquired)
				require.Equal(t, int64(2), acquire(t, c, key, "A", 100*time.Second).Count)
				at := expireAt(t, c, key)

				assert.Equal(t, int64(1), release(t, c, key, ch, "A", notify, 0))
				assert.Equal(t, map[string]string{"A": "1"}, hgetall(t, c, key), "hash kept, count decremented")
				assert.Equal(t, at, expireAt(t, c, key))
				expectNothingPublished(t, c, msgs, notify, ch)
			})

			t.Run("Last", func(t *testing.T) {
				c := standaloneClient(t)
				key, ch := lockNames(t)
				msgs := subscribe(t, []string{standaloneAddr}, notify, ch)
				require.True(t, acquire(t, c, key, "A", 100*time.Second).Acquired)

				n := release(t, c, key, ch, "A", notify, 0)
				assert.Equal(t, int64(luascripts.Released), n)
				assert.False(t, exists(t, c, key))
				// Exactly one "unlock", then our own message.
				sentinel := fmt.Sprintf("sentinel-%d", seq.Add(1))
				publish(t, c, notify, ch, sentinel)
				expectMessages(t, msgs, "unlock", sentinel)
			})

			t.Run("ExpectedCount", func(t *testing.T) {
				c := standaloneClient(t)
				key, ch := lockNames(t)
				msgs := subscribe(t, []string{standaloneAddr}, notify, ch)
				require.True(t, acquire(t, c, key, "A", 100*time.Second).Acquired)
				require.Equal(t, int64(2), acquire(t, c, key, "A", 100*time.Second).Count)
				at := expireAt(t, c, key)

				assert.Equal(t, int64(-2), release(t, c, key, ch, "A", notify, 1), "count 2, expected 1")
				assert.Equal(t, int64(-2), release(t, c, key, ch, "A", notify, 3), "count 2, expected 3")
				assert.Equal(t, map[string]string{"A": "2"}, hgetall(t, c, key))
				assert.Equal(t, at, expireAt(t, c, key))
				assert.Equal(t, int64(-1), release(t, c, key, ch, "B", notify, 2), "not the owner")
				expectNothingPublished(t, c, msgs, notify, ch)

				assert.Equal(t, int64(1), release(t, c, key, ch, "A", notify, 2), "count 2, expected 2")
				assert.Equal(t, map[string]string{"A": "1"}, hgetall(t, c, key))
				assert.Equal(t, int64(-2), release(t, c, key, ch, "A", notify, 2), "count 1, expected 2")
				assert.Equal(t, map[string]string{"A": "1"}, hgetall(t, c, key))
				expectNothingPublished(t, c, msgs, notify, ch)

				assert.Equal(t, int64(0), release(t, c, key, ch, "A", notify, 1), "count 1, expected 1")
				assert.False(t, exists(t, c, key))
				sentinel := fmt.Sprintf("sentinel-%d", seq.Add(1))
				publish(t, c, notify, ch, sentinel)
				expectMessages(t, msgs, "unlock", sentinel)
			})

			// A release retried with the same id and token after its reply
			// was lost changes nothing more, whatever happened in between.
			t.Run("Idempotent", func(t *testing.T) {
				c := standaloneClient(t)
				key, ch := lockNames(t)
				msgs := subscribe(t, []string{standaloneAddr}, notify, ch)
				tok := fmt.Sprint(acquire(t, c, key, "A", 100*time.Second).Token)
				require.Equal(t, int64(2), acquire(t, c, key, "A", 100*time.Second).Count)

				assert.Equal(t, int64(1), releaseIdem(t, c, key, ch, "A", notify, 0, tok, "r1"))
				assert.Equal(t, int64(1), releaseIdem(t, c, key, ch, "A", notify, 0, tok, "r1"), "retry: no second drop")
				assert.Equal(t, "1", hgetall(t, c, key)["A"])
				assert.Equal(t, int64(-1), releaseIdem(t, c, key, ch, "A", notify, 0, "999", "r2"), "another grant's token")
				assert.Equal(t, "1", hgetall(t, c, key)["A"])
				expectNothingPublished(t, c, msgs, notify, ch)

				assert.Equal(t, int64(0), releaseIdem(t, c, key, ch, "A", notify, 0, tok, "r2"))
				// The same owner takes the lock again: a new grant, a new token.
				again := acquire(t, c, key, "A", 100*time.Second)
				require.Equal(t, int64(1), again.Count)
				require.NotEqual(t, tok, fmt.Sprint(again.Token))
				assert.Equal(t, int64(-1), releaseIdem(t, c, key, ch, "A", notify, 0, tok, "r2"), "retry after the key was re-granted")
				assert.Equal(t, map[string]string{"A": "1"}, hgetall(t, c, key), "the newer grant is untouched")
				sentinel := fmt.Sprintf("sentinel-%d", seq.Add(1))
				publish(t, c, notify, ch, sentinel)
				expectMessages(t, msgs, "unlock", sentinel)
				assert.Equal(t, int64(0), release(t, c, key, ch, "A", notify, 0))
			})
		})
	}
}

// ---- renew ----

func TestRenew(t *testing.T) {
	c := standaloneClient(t)
	tag := uniqueTag(t)
	k := func(s string) string { return "latchkey:{" + tag + "}:" + s }
	ch := "latchkey:{" + tag + "}:ch"
	held, other, missing, released, long := k("held"), k("other"), k("missing"), k("released"), k("long")

	require.True(t, acquire(t, c, held, "A", 2*time.Second).Acquired)
	require.True(t, acquire(t, c, other, "B", 2*time.Second).Acquired)
	require.True(t, acquire(t, c, released, "A", 2*time.Second).Acquired)
	require.Equal(t, int64(0), release(t, c, released, ch, "A", luascripts.NotifyClassic, 0))
	require.True(t, acquire(t, c, long, "A", 100*time.Second).Acquired)
	otherAt := expireAt(t, c, other)

	keys := []string{held, other, missing, released, long}
	v, err := luascripts.Renew.Exec(t.Context(), c, keys,
		[]string{luascripts.Millis(60 * time.Second), "A", "A", "A", "A", "A"}).AsIntSlice()
	require.NoError(t, err)
	assert.Equal(t, []int64{1, 0, 0, 0, 1}, v)
	got, err := luascripts.ParseRenew(v, len(keys))
	require.NoError(t, err)
	assert.Equal(t, []bool{true, false, false, false, true}, got)

	assert.Greater(t, pttl(t, c, held), 30*time.Second, "held lease raised")
	assert.Equal(t, map[string]string{"A": "1"}, hgetall(t, c, held))
	assert.Equal(t, otherAt, expireAt(t, c, other), "another owner's lease untouched")
	assert.Equal(t, map[string]string{"B": "1"}, hgetall(t, c, other))
	assert.False(t, exists(t, c, missing), "missing key not created")
	assert.False(t, exists(t, c, released), "released key not recreated")
	assert.Greater(t, pttl(t, c, long), 80*time.Second, "a longer lease is not lowered")
}

// ---- forceunlock ----

func forceKeys(t *testing.T, c rueidis.Client, key, inbox string) []string {
	k := freeKeys(t, c, key, inbox)
	return []string{k[0], k[1], k[3]}
}

func TestForceUnlock(t *testing.T) {
	for _, mode := range notifyModes {
		t.Run(mode.name, func(t *testing.T) {
			notify := mode.notify
			c := standaloneClient(t)
			key, ch := lockNames(t)
			msgs := subscribe(t, []string{standaloneAddr}, notify, ch)
			require.True(t, acquire(t, c, key, "A", 100*time.Second).Acquired)
			require.Equal(t, int64(2), acquire(t, c, key, "A", 100*time.Second).Count)

			n, err := luascripts.ForceUnlock.Exec(t.Context(), c, forceKeys(t, c, key, ch), []string{notify}).AsInt64()
			require.NoError(t, err)
			assert.Equal(t, int64(1), n)
			assert.False(t, exists(t, c, key))
			sentinel := fmt.Sprintf("sentinel-%d", seq.Add(1))
			publish(t, c, notify, ch, sentinel)
			expectMessages(t, msgs, "force", sentinel)

			n, err = luascripts.ForceUnlock.Exec(t.Context(), c, forceKeys(t, c, key, ch), []string{notify}).AsInt64()
			require.NoError(t, err)
			assert.Equal(t, int64(0), n, "no lock to delete")
			expectNothingPublished(t, c, msgs, notify, ch)
		})
	}
}

// ---- inspect ----

func inspectRaw(t *testing.T, c rueidis.Client, key, owner string) []int64 {
	t.Helper()
	v, err := luascripts.Inspect.Exec(t.Context(), c, []string{key}, []string{owner}).AsIntSlice()
	require.NoError(t, err)
	return v
}

func TestInspect(t *testing.T) {
	c := standaloneClient(t)
	key, _ := lockNames(t)

	v := inspectRaw(t, c, key, "A")
	assert.Equal(t, []int64{0, 0, -2}, v, "no lock")
	r, err := luascripts.ParseInspect(v)
	require.NoError(t, err)
	assert.Equal(t, luascripts.InspectReply{PTTL: -2 * time.Millisecond}, r)
	assert.False(t, exists(t, c, key), "inspect creates nothing")

	for range 3 {
		require.True(t, acquire(t, c, key, "A", 10*time.Second).Acquired)
	}
	at := expireAt(t, c, key)

	r, err = luascripts.ParseInspect(inspectRaw(t, c, key, "A"))
	require.NoError(t, err)
	assert.True(t, r.Held)
	assert.Equal(t, int64(3), r.Count)
	assert.Greater(t, r.PTTL, 5*time.Second)
	assert.LessOrEqual(t, r.PTTL, 10*time.Second)

	r, err = luascripts.ParseInspect(inspectRaw(t, c, key, "B"))
	require.NoError(t, err)
	assert.True(t, r.Held, "held by someone")
	assert.Equal(t, int64(0), r.Count, "but not by B")
	assert.Greater(t, r.PTTL, 5*time.Second)

	assert.Equal(t, map[string]string{"A": "3"}, hgetall(t, c, key), "inspect changes nothing")
	assert.Equal(t, at, expireAt(t, c, key))
}

// ---- NOSCRIPT fallback ----

func TestExecAfterScriptFlush(t *testing.T) {
	c := standaloneClient(t)
	key, _ := lockNames(t)
	do(t, c, c.B().ScriptFlush().Build())
	require.False(t, scriptCached(t, c, luascripts.Acquire))

	assert.Equal(t, []int64{1, 1, 1}, acquireRaw(t, c, key, "A", 10*time.Second))
	assert.True(t, scriptCached(t, c, luascripts.Acquire), "EVAL fallback loaded the script")
}

func TestExecMultiAfterScriptFlush(t *testing.T) {
	c := standaloneClient(t)
	const n = 6
	keys := make([]string, n)
	for i := range keys {
		keys[i], _ = lockNames(t)
		// key i is held i times by A, except the last one, held by B.
		for range i {
			owner := "A"
			if i == n-1 {
				owner = "B"
			}
			require.True(t, acquire(t, c, keys[i], owner, 10*time.Second).Acquired)
		}
	}
	do(t, c, c.B().ScriptFlush().Build())
	require.False(t, scriptCached(t, c, luascripts.Acquire))

	calls := make([]luascripts.Call, n)
	for i, k := range keys {
		calls[i] = luascripts.Call{Keys: []string{k, k + ":fence", k + ":q"}, Args: []string{"A", luascripts.Millis(10 * time.Second), "client-A", ""}}
	}
	results := luascripts.Acquire.ExecMulti(t.Context(), c, calls)
	require.Len(t, results, n)
	for i, r := range results {
		v, err := r.AsIntSlice()
		require.NoError(t, err, "call %d", i)
		got, err := luascripts.ParseAcquire(v)
		require.NoError(t, err, "call %d", i)
		if i == n-1 {
			assert.False(t, got.Acquired, "call %d: held by B", i)
			assert.Greater(t, got.PTTL, time.Duration(0), "call %d", i)
			continue
		}
		assert.Equal(t, luascripts.AcquireReply{Acquired: true, Count: int64(i + 1), Token: 1}, got, "call %d", i)
	}
	assert.True(t, scriptCached(t, c, luascripts.Acquire), "EVAL fallback loaded the script")

	// With the script cached, the same path answers without a fallback.
	results = luascripts.Acquire.ExecMulti(t.Context(), c, calls[:1])
	require.Len(t, results, 1)
	v, err := results[0].AsIntSlice()
	require.NoError(t, err)
	assert.Equal(t, []int64{1, 2, 1}, v)
}

func TestExecMultiEmpty(t *testing.T) {
	c := standaloneClient(t)
	assert.Empty(t, luascripts.Renew.ExecMulti(t.Context(), c, nil))
}

// ---- Cluster ----

// slotOf asks the cluster which slot key hashes to.
func slotOf(t *testing.T, c rueidis.Client, key string) int64 {
	t.Helper()
	n, err := do(t, c, c.B().ClusterKeyslot().Key(key).Build()).AsInt64()
	require.NoError(t, err)
	return n
}

// third is which master serves slot: redistest gives each of the 3 masters
// one contiguous third of the slot space.
func third(slot int64) int64 { return slot * 3 / 16384 }

func TestClusterAcquireReleaseSharded(t *testing.T) {
	c := clusterClient(t)
	base := uniqueTag(t)
	// One lock per master, so SPUBLISH is exercised on every shard.
	var tags []string
	seen := map[int64]bool{}
	for i := 0; len(tags) < 3; i++ {
		require.Less(t, i, 1000, "no tags found on all three masters")
		tag := fmt.Sprintf("%s-%d", base, i)
		if s := third(slotOf(t, c, "latchkey:{"+tag+"}")); !seen[s] {
			seen[s] = true
			tags = append(tags, tag)
		}
	}
	for _, tag := range tags {
		key, ch := "latchkey:{"+tag+"}", "latchkey:{"+tag+"}:ch:"+testWaiter
		require.Equal(t, slotOf(t, c, key), slotOf(t, c, ch), "key and channel share a slot")
		msgs := subscribe(t, clusterAddrs, luascripts.NotifySharded, ch)

		assert.Equal(t, []int64{1, 1, 1}, acquireRaw(t, c, key, "A", 10*time.Second))
		assert.Equal(t, []int64{1, 2, 1}, acquireRaw(t, c, key, "A", 10*time.Second))
		r := acquire(t, c, key, "B", 10*time.Second)
		assert.False(t, r.Acquired)
		assert.Greater(t, r.PTTL, 5*time.Second)

		assert.Equal(t, int64(1), release(t, c, key, ch, "A", luascripts.NotifySharded, 0))
		expectNothingPublished(t, c, msgs, luascripts.NotifySharded, ch)
		assert.Equal(t, int64(0), release(t, c, key, ch, "A", luascripts.NotifySharded, 0))
		assert.False(t, exists(t, c, key))
		sentinel := fmt.Sprintf("sentinel-%d", seq.Add(1))
		publish(t, c, luascripts.NotifySharded, ch, sentinel)
		expectMessages(t, msgs, "unlock", sentinel)
	}
}

func TestClusterRenewExecMulti(t *testing.T) {
	c := clusterClient(t)
	base := uniqueTag(t)
	const n = 40
	const short, lease = 2 * time.Second, 60 * time.Second

	type lock struct {
		keys []string // two keys per call, same tag
		want []int64
	}
	locks := make([]lock, n)
	slots := map[int64]bool{}
	thirds := map[int64]bool{}
	for i := range locks {
		tag := fmt.Sprintf("%s-%d", base, i)
		a, b := "latchkey:{"+tag+"}", "latchkey:{"+tag+"}:2"
		l := lock{keys: []string{a, b}}
		switch i % 4 {
		case 0: // both held by A
			require.True(t, acquire(t, c, a, "A", short).Acquired)
			require.True(t, acquire(t, c, b, "A", short).Acquired)
			l.want = []int64{1, 1}
		case 1: // a held by A, b by B
			require.True(t, acquire(t, c, a, "A", short).Acquired)
			require.True(t, acquire(t, c, b, "B", short).Acquired)
			l.want = []int64{1, 0}
		case 2: // a missing, b held by A
			require.True(t, acquire(t, c, b, "A", short).Acquired)
			l.want = []int64{0, 1}
		case 3: // neither exists
			l.want = []int64{0, 0}
		}
		locks[i] = l
		s := slotOf(t, c, a)
		slots[s], thirds[third(s)] = true, true
	}
	require.Len(t, slots, n, "one call per slot")
	require.Len(t, thirds, 3, "calls spread over all masters")

	// Start from empty script caches, so the NOSCRIPT fallback runs on
	// every node inside the split pipeline.
	for addr, node := range c.Nodes() {
		require.NoError(t, node.Do(t.Context(), node.B().ScriptFlush().Build()).Error(), addr)
	}

	calls := make([]luascripts.Call, n)
	for i, l := range locks {
		calls[i] = luascripts.Call{Keys: l.keys, Args: []string{luascripts.Millis(lease), "A", "A"}}
	}
	results := luascripts.Renew.ExecMulti(t.Context(), c, calls)
	require.Len(t, results, n)
	for i, r := range results {
		v, err := r.AsIntSlice()
		require.NoError(t, err, "call %d", i)
		assert.Equal(t, locks[i].want, v, "call %d (%v)", i, locks[i].keys)
		_, err = luascripts.ParseRenew(v, 2)
		assert.NoError(t, err, "call %d", i)
	}
	for _, l := range locks {
		for j, k := range l.keys {
			switch {
			case l.want[j] == 1:
				assert.Greater(t, pttl(t, c, k), lease/2, "%s renewed", k)
			case exists(t, c, k):
				assert.LessOrEqual(t, pttl(t, c, k), short, "%s not renewed", k)
			}
		}
	}
	// The missing keys were not created.
	for i, l := range locks {
		if i%4 == 3 {
			assert.False(t, exists(t, c, l.keys[0]))
			assert.False(t, exists(t, c, l.keys[1]))
		}
	}
}

// ---- the wait queue ----

func queued(t *testing.T, c rueidis.Client, key string) []string {
	t.Helper()
	v, err := do(t, c, c.B().Zrange().Key(key+":q").Min("0").Max("-1").Build()).AsStrSlice()
	require.NoError(t, err)
	return v
}

func acquireAs(t *testing.T, c rueidis.Client, key, owner, waiter string, others bool) luascripts.AcquireReply {
	t.Helper()
	client, flags := waiter, "w"
	switch {
	case waiter == "":
		client, flags = "client-"+owner, ""
	case others:
		flags = "wr"
	}
	v, err := luascripts.Acquire.Exec(t.Context(), c, []string{key, key + ":fence", key + ":q"},
		[]string{owner, luascripts.Millis(10 * time.Second), client, flags}).AsIntSlice()
	require.NoError(t, err)
	r, err := luascripts.ParseAcquire(v)
	require.NoError(t, err)
	return r
}

// TestWaitQueue: refused waiters queue their client once, in order; a
// release wakes the oldest client that still listens and skips those that
// do not; a client that acquires leaves the queue unless it has more waiters.
func TestWaitQueue(t *testing.T) {
	c := standaloneClient(t)
	key, _ := lockNames(t)
	base := key + ":ch"
	rel := func(owner string) int64 {
		t.Helper()
		return releaseRaw(t, c, key, base, owner, "0")
	}

	require.True(t, acquireAs(t, c, key, "H", "", false).Acquired, "a first try queues nothing")
	assert.Empty(t, queued(t, c, key))
	for _, w := range []string{"c1", "c2", "c1", "c3"} {
		require.False(t, acquireAs(t, c, key, w+"-owner", w, false).Acquired)
	}
	require.False(t, acquireAs(t, c, key, "spinner", "", false).Acquired)
	assert.Equal(t, []string{"c1", "c2", "c3"}, queued(t, c, key), "once each, oldest first; spinners not at all")
	qttl := pttl(t, c, key+":q")
	assert.Greater(t, qttl, 10*time.Second, "the queue outlives the holder's lease")

	// c1 no longer listens; c2 does.
	c2 := subscribe(t, []string{standaloneAddr}, luascripts.NotifyClassic, base+":c2")
	c3 := subscribe(t, []string{standaloneAddr}, luascripts.NotifyClassic, base+":c3")
	require.Equal(t, int64(0), rel("H"))
	sentinel := fmt.Sprintf("sentinel-%d", seq.Add(1))
	publish(t, c, luascripts.NotifyClassic, base+":c2", sentinel)
	expectMessages(t, c2, "unlock", sentinel)
	assert.Equal(t, []string{"c3"}, queued(t, c, key), "c1 skipped, c2 woken")
	expectNothingPublished(t, c, c3, luascripts.NotifyClassic, base+":c3")

	// c2 acquires with more waiters of its own: back in the queue, behind c3.
	require.True(t, acquireAs(t, c, key, "c2-owner", "c2", true).Acquired)
	assert.Equal(t, []string{"c3", "c2"}, queued(t, c, key))
	require.Equal(t, int64(0), rel("c2-owner"))
	expectMessages(t, c3, "unlock")
	// c3 acquires with none left: it leaves the queue.
	require.True(t, acquireAs(t, c, key, "c3-owner", "c3", false).Acquired)
	assert.Equal(t, []string{"c2"}, queued(t, c, key))

	// pass: nothing while the lock is held; the next client once it is free.
	n, err := luascripts.Pass.Exec(t.Context(), c, []string{key, base, key + ":q"}, []string{luascripts.NotifyClassic, "c9", "0"}).AsInt64()
	require.NoError(t, err)
	assert.Equal(t, int64(0), n)
	assert.Equal(t, []string{"c2"}, queued(t, c, key))
	do(t, c, c.B().Del().Key(key).Build())
	n, err = luascripts.Pass.Exec(t.Context(), c, []string{key, base, key + ":q"}, []string{luascripts.NotifyClassic, "c9", "0"}).AsInt64()
	require.NoError(t, err)
	assert.Equal(t, int64(1), n)
	expectMessages(t, c2, "pass")
	assert.Empty(t, queued(t, c, key))
	assert.False(t, exists(t, c, key+":q"), "an empty queue is gone")
}

// TestHandoff: a release with a handoff window keeps the key for the client
// it woke: others are refused (told to wait the window plus their lease),
// the woken client takes it with a new token, and an unclaimed handoff
// lapses by itself.
func TestHandoff(t *testing.T) {
	c := standaloneClient(t)
	key, _ := lockNames(t)
	base := key + ":ch"
	require.True(t, acquireAs(t, c, key, "H", "", false).Acquired)
	first := acquire(t, c, key, "H", 10*time.Second).Token
	require.False(t, acquireAs(t, c, key, "x-owner", "x", false).Acquired)
	sub := subscribe(t, []string{standaloneAddr}, luascripts.NotifyClassic, base+":x")
	for range 2 {
		releaseRaw(t, c, key, base, "H", "5000")
	}
	expectMessages(t, sub, "unlock")
	assert.Equal(t, map[string]string{"#handoff": "x"}, hgetall(t, c, key))
	p := pttl(t, c, key)
	assert.LessOrEqual(t, p, 5*time.Second)
	v, err := luascripts.Inspect.Exec(t.Context(), c, []string{key}, []string{"x-owner"}).AsIntSlice()
	require.NoError(t, err)
	assert.Equal(t, []int64{0, 0, -2}, v, "a handoff is not a holder")

	refused := acquireAs(t, c, key, "y-owner", "y", false)
	require.False(t, refused.Acquired, "reserved for x")
	assert.LessOrEqual(t, refused.PTTL, 5*time.Second, "the rest of the handoff window")
	got := acquireAs(t, c, key, "x-owner", "x", false)
	require.True(t, got.Acquired)
	assert.Equal(t, first+1, got.Token)
	assert.Equal(t, map[string]string{"x-owner": "1"}, hgetall(t, c, key))

	// Unclaimed: the key lapses after the window.
	ysub := subscribe(t, []string{standaloneAddr}, luascripts.NotifyClassic, base+":y")
	require.Equal(t, int64(0), releaseRaw(t, c, key, base, "x-owner", "50"))
	expectMessages(t, ysub, "unlock")
	assert.Equal(t, map[string]string{"#handoff": "y"}, hgetall(t, c, key), "y was queued when refused")
	require.Eventually(t, func() bool { return !exists(t, c, key) }, 5*time.Second, 10*time.Millisecond)
}

func releaseRaw(t *testing.T, c rueidis.Client, key, base, owner, handoff string) int64 {
	t.Helper()
	r := execRelease(t, c, []string{key, base, key + ":fence", key + ":q"}, owner, luascripts.NotifyClassic, "0", "", "", handoff)
	return int64(r.Status)
}

// TestHandover: the last release passes the lock straight to an heir of the
// same client, as a new grant, unless told to yield to a queued client; a
// retry of a handover reports it again and changes nothing.
func TestHandover(t *testing.T) {
	c := standaloneClient(t)
	key, _ := lockNames(t)
	base := key + ":ch"
	keys := []string{key, base, key + ":fence", key + ":q"}
	first := acquireAs(t, c, key, "C:1", "", false)
	require.True(t, first.Acquired)

	r := execReleaseArgs(t, c, keys, "C:1", luascripts.NotifyClassic, "0", fmt.Sprint(first.Token), "r1", "50", "C:2", "7000", "y", "C", "1")
	require.Equal(t, luascripts.ReleaseHandedOver, r.Status, "nobody queued: no need to yield")
	assert.Equal(t, first.Token+1, r.Token)
	assert.Equal(t, "1", hgetall(t, c, key)["C:2"])
	_, stillThere := hgetall(t, c, key)["C:1"]
	assert.False(t, stillThere)
	p := pttl(t, c, key)
	assert.Greater(t, p, 5*time.Second)
	assert.LessOrEqual(t, p, 7*time.Second, "the heir's lease")
	again := execReleaseArgs(t, c, keys, "C:1", luascripts.NotifyClassic, "0", fmt.Sprint(first.Token), "r1", "50", "C:2", "7000", "y", "C", "1")
	assert.Equal(t, r, again, "a retry reports the handover and changes nothing")
	assert.Equal(t, "1", hgetall(t, c, key)["C:2"])

	// Another client queues; the client itself is queued too, which does not count.
	require.False(t, acquireAs(t, c, key, "D:1", "D", false).Acquired)
	require.False(t, acquireAs(t, c, key, "C:3", "C", false).Acquired)
	dsub := subscribe(t, []string{standaloneAddr}, luascripts.NotifyClassic, base+":D")
	r = execReleaseArgs(t, c, keys, "C:2", luascripts.NotifyClassic, "0", fmt.Sprint(r.Token), "r2", "50", "C:3", "7000", "", "C", "1")
	require.Equal(t, luascripts.ReleaseHandedOver, r.Status, "without yield, queued clients wait")
	r = execReleaseArgs(t, c, keys, "C:3", luascripts.NotifyClassic, "0", fmt.Sprint(r.Token), "r3", "50", "C:4", "7000", "y", "C", "1")
	require.Equal(t, luascripts.Released, r.Status, "yield: D is queued")
	expectMessages(t, dsub, "unlock")
	assert.Equal(t, map[string]string{"#handoff": "D"}, hgetall(t, c, key))
}
