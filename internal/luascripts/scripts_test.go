package luascripts_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/internal/luascripts"
	"github.com/latchkey/latchkey/internal/redistest"
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

// lease is the tests' default lease: long enough never to lapse during a
// test, so a TTL bound below it is never hit by a slow run.
const lease = 100 * time.Second

// TestMain gets real servers from the harness; RunTests checks for leaked
// goroutines with goleak once they are closed.
func TestMain(m *testing.M) {
	os.Exit(redistest.RunTests(m, "luascripts", true, func(e redistest.Env) {
		standaloneAddr, clusterAddrs = e.Standalone.Addr, e.Cluster.Addrs
	}, checkClean))
}

// checkClean asserts that the tests left no key but fencing counters (which
// must never go back) and no subscribed channel, on any server.
func checkClean(e redistest.Env) error {
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	// Only this run's names: a REDIS_ADDR server may be shared.
	mine := fmt.Sprintf("*-%d-*", runID)
	var problems []string
	for _, addr := range append([]string{e.Standalone.Addr}, e.Cluster.Addrs...) {
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, ForceSingleClient: true, DisableCache: true})
		if err != nil {
			return err
		}
		for _, cmd := range []rueidis.Completed{
			c.B().Keys().Pattern(mine).Build(),
			c.B().PubsubChannels().Pattern(mine).Build(),
			c.B().PubsubShardchannels().Pattern(mine).Build(),
		} {
			name := strings.Join(cmd.Commands(), " ")
			got, err := c.Do(ctx, cmd).AsStrSlice()
			got = slices.DeleteFunc(got, func(k string) bool { return strings.HasSuffix(k, ":fence") })
			switch {
			case err != nil:
				problems = append(problems, fmt.Sprintf("%s %s: %v", addr, name, err))
			case len(got) > 0:
				problems = append(problems, fmt.Sprintf("%s %s: %v", addr, name, got))
			}
		}
		c.Close()
	}
	if len(problems) > 0 {
		return fmt.Errorf("left behind: %s", strings.Join(problems, "; "))
	}
	return nil
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

// keysFor returns the keys of the lock at base and deletes all but its
// fencing counter when the test ends (before c closes: cleanups run last in,
// first out).
func keysFor(t *testing.T, c rueidis.Client, base string) luascripts.Keys {
	t.Helper()
	k := luascripts.NewKeys(base)
	t.Cleanup(func() {
		// t.Context() is already cancelled here.
		assert.NoError(t, c.Do(context.Background(), c.B().Del().Key(k.Lock, k.Queue).Build()).Error())
	})
	return k
}

// newKeys returns a lock's keys under a hash tag of its own.
func newKeys(t *testing.T, c rueidis.Client) luascripts.Keys {
	t.Helper()
	return keysFor(t, c, "latchkey:{"+uniqueTag(t)+"}")
}

func do(t *testing.T, c rueidis.Client, cmd rueidis.Completed) rueidis.RedisResult {
	t.Helper()
	r := c.Do(t.Context(), cmd)
	require.NoError(t, r.Error())
	return r
}

func acquireRaw(t *testing.T, c rueidis.Client, k luascripts.Keys, a luascripts.AcquireArgs) []int64 {
	t.Helper()
	waiter := "0"
	if a.Waiter {
		waiter = "1"
	}
	args := []string{a.Owner, luascripts.Millis(a.Lease), a.Client, waiter, "", "p" + luascripts.Millis(a.Wake.Window), k.Channel}
	msgs, err := luascripts.Acquire.Exec(t.Context(), c, k.AcquireKeys(), args).ToArray()
	require.NoError(t, err)
	var v []int64
	for i, m := range msgs {
		if i == 3 { // a refusal's holder record
			_, err = m.ToString()
			require.NoError(t, err)
			continue
		}
		if i == 4 { // and its lease left, which DecodeAcquire reads
			continue
		}
		n, err := m.AsInt64()
		require.NoError(t, err)
		v = append(v, n)
	}
	return v
}

func acquire(t *testing.T, c rueidis.Client, k luascripts.Keys, a luascripts.AcquireArgs) luascripts.AcquireReply {
	t.Helper()
	r, err := k.Acquire(t.Context(), c, a)
	require.NoError(t, err)
	return r
}

// oid is the owner id of the test's owner name in the form rlock writes,
// "<UUID>:<n>", the UUID made from name: force-unlock refuses a lock hash
// whose owners have another (force.lua), so tests that force-unlock use it.
func oid(name string) string {
	sum := sha1.Sum([]byte(name))
	return fmt.Sprintf("%x-%x-%x-%x-%x:1", sum[0:4], sum[4:6], sum[6:8], sum[8:10], sum[10:16])
}

// take grants k to owner, who does not wait, and returns the grant's token.
func take(t *testing.T, c rueidis.Client, k luascripts.Keys, owner string) int64 {
	t.Helper()
	r := acquire(t, c, k, luascripts.AcquireArgs{Owner: owner, Lease: lease, Client: "client-" + owner})
	require.True(t, r.Acquired, "%s takes %s", owner, k.Lock)
	return r.Token
}

// enqueue has a waiter of client refused on the held lock k, which queues
// client. Tests name clients so that queue order is also alphabetical: two
// calls in one microsecond would tie on the score, and ties go by name.
func enqueue(t *testing.T, c rueidis.Client, k luascripts.Keys, client string) {
	t.Helper()
	r := acquire(t, c, k, luascripts.AcquireArgs{Owner: fmt.Sprintf("%s:%d", client, seq.Add(1)), Lease: lease, Client: client, Waiter: true})
	require.False(t, r.Acquired, "%s refused", client)
}

func reenter(t *testing.T, c rueidis.Client, k luascripts.Keys, owner string) int64 {
	t.Helper()
	n, err := k.Reenter(t.Context(), c, owner)
	require.NoError(t, err)
	return n
}

func release(t *testing.T, c rueidis.Client, k luascripts.Keys, a luascripts.ReleaseArgs) luascripts.ReleaseReply {
	t.Helper()
	r, err := k.Release(t.Context(), c, a)
	require.NoError(t, err)
	return r
}

func leave(t *testing.T, c rueidis.Client, k luascripts.Keys, client string, w luascripts.Wake) bool {
	t.Helper()
	passed, err := luascripts.RunLeave(t.Context(), c, k, client, w)
	require.NoError(t, err)
	return passed
}

func forceUnlock(t *testing.T, c rueidis.Client, k luascripts.Keys, w luascripts.Wake) bool {
	t.Helper()
	deleted, foreign, err := k.Intro().ForceUnlock(t.Context(), c, w)
	require.NoError(t, err)
	require.Empty(t, foreign)
	return deleted
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

// between asserts lo < d <= hi.
func between(t *testing.T, d, lo, hi time.Duration, what string) {
	t.Helper()
	assert.Greater(t, d, lo, what)
	assert.LessOrEqual(t, d, hi, what)
}

func exists(t *testing.T, c rueidis.Client, key string) bool {
	t.Helper()
	n, err := do(t, c, c.B().Exists().Key(key).Build()).AsInt64()
	require.NoError(t, err)
	return n == 1
}

// get is the string at key, "" when there is none.
func get(t *testing.T, c rueidis.Client, key string) string {
	t.Helper()
	v, err := c.Do(t.Context(), c.B().Get().Key(key).Build()).ToString()
	if rueidis.IsRedisNil(err) {
		return ""
	}
	require.NoError(t, err)
	return v
}

func hgetall(t *testing.T, c rueidis.Client, key string) map[string]string {
	t.Helper()
	m, err := do(t, c, c.B().Hgetall().Key(key).Build()).AsStrMap()
	require.NoError(t, err)
	return m
}

// owners is a lock hash's {owner -> count}: its fields but those starting
// with '#' (the holder record's "#rec").
func owners(t *testing.T, c rueidis.Client, key string) map[string]string {
	t.Helper()
	m := hgetall(t, c, key)
	for f := range m {
		if strings.HasPrefix(f, "#") {
			delete(m, f)
		}
	}
	return m
}

func queued(t *testing.T, c rueidis.Client, k luascripts.Keys) []string {
	t.Helper()
	v, err := do(t, c, c.B().Zrange().Key(k.Queue).Min("0").Max("-1").Build()).AsStrSlice()
	require.NoError(t, err)
	return v
}

// reserve queues client as a release's wake-up leaves it (queue.lua):
// woken, with a window of window from now, its score minus the window's
// end in server ms. A negative window has ended.
func reserve(t *testing.T, c rueidis.Client, k luascripts.Keys, client string, window time.Duration) {
	t.Helper()
	end := serverMS(t, c) + window.Milliseconds()
	do(t, c, c.B().Zadd().Key(k.Queue).ScoreMember().ScoreMember(-float64(end), client).Build())
}

// wokenEnd reports whether client is queued in queue as woken, and the
// end of its window (server ms).
func wokenEnd(t *testing.T, c rueidis.Client, queue, client string) (bool, int64) {
	t.Helper()
	s, err := c.Do(t.Context(), c.B().Zscore().Key(queue).Member(client).Build()).AsFloat64()
	if rueidis.IsRedisNil(err) {
		return false, 0
	}
	require.NoError(t, err)
	return s < 0, int64(-s)
}

func serverMS(t *testing.T, c rueidis.Client) int64 {
	t.Helper()
	v, err := do(t, c, c.B().Time().Build()).AsIntSlice()
	require.NoError(t, err)
	return v[0]*1000 + v[1]/1000
}

// state is everything the scripts may change about one lock, so that a test
// can assert that a call changed nothing at all.
type state struct {
	Hash    map[string]string
	LockAt  int64 // PEXPIRETIME
	Queue   []rueidis.ZScore
	QueueAt int64
	Fence   string
}

func snapshot(t *testing.T, c rueidis.Client, k luascripts.Keys) state {
	t.Helper()
	q, err := do(t, c, c.B().Zrange().Key(k.Queue).Min("0").Max("-1").Withscores().Build()).AsZScores()
	require.NoError(t, err)
	return state{
		Hash: hgetall(t, c, k.Lock), LockAt: expireAt(t, c, k.Lock),
		Queue: q, QueueAt: expireAt(t, c, k.Queue),
		Fence: get(t, c, k.Fence),
	}
}

func scriptCached(t *testing.T, c rueidis.Client, s *luascripts.Script) bool {
	t.Helper()
	sum := sha1.Sum([]byte(s.Source()))
	v, err := do(t, c, c.B().ScriptExists().Sha1(hex.EncodeToString(sum[:])).Build()).AsIntSlice()
	require.NoError(t, err)
	require.Len(t, v, 1)
	return v[0] == 1
}

func publish(t *testing.T, c rueidis.Client, sharded bool, channel, msg string) {
	t.Helper()
	if sharded {
		do(t, c, c.B().Spublish().Channel(channel).Message(msg).Build())
	} else {
		do(t, c, c.B().Publish().Channel(channel).Message(msg).Build())
	}
}

// subscribe listens on channels (SSUBSCRIBE when sharded; they must share
// a slot) with a client of its own and returns once the server has
// confirmed every subscription. Messages arrive on the returned channel in
// order. When the test ends it unsubscribes and waits for the
// confirmation, so no channel outlives it.
func subscribe(t *testing.T, addrs []string, sharded bool, channels ...string) <-chan string {
	t.Helper()
	c := newClient(t, addrs...)
	kind := "subscribe"
	sub, unsub := c.B().Subscribe().Channel(channels...).Build(), c.B().Unsubscribe().Channel(channels...).Build()
	if sharded {
		kind = "ssubscribe"
		sub, unsub = c.B().Ssubscribe().Channel(channels...).Build(), c.B().Sunsubscribe().Channel(channels...).Build()
	}
	listened := make(map[string]bool, len(channels))
	for _, ch := range channels {
		listened[ch] = true
	}
	subscribed := make(chan struct{})
	var confirmed atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	ctx = rueidis.WithOnSubscriptionHook(ctx, func(s rueidis.PubSubSubscription) {
		if s.Kind == kind && listened[s.Channel] && confirmed.Add(1) == int64(len(channels)) {
			close(subscribed)
		}
	})
	msgs := make(chan string, 64+len(channels))
	done := make(chan error, 1)
	go func() {
		done <- c.Receive(ctx, sub, func(m rueidis.PubSubMessage) {
			if listened[m.Channel] {
				msgs <- m.Message
			}
		})
	}()
	what := fmt.Sprintf("%s (%d channels)", channels[0], len(channels))
	// Registered after newClient's Close, so it runs before it.
	t.Cleanup(func() {
		defer cancel()
		// Receive returns nil once the server confirms the unsubscribe.
		assert.NoError(t, c.Do(context.Background(), unsub).Error())
		select {
		case err := <-done:
			assert.NoError(t, err, "Receive on %s", what)
		case <-time.After(waitFor):
			t.Errorf("unsubscribe from %s not confirmed within %v", what, waitFor)
		}
	})
	select {
	case <-subscribed:
	case err := <-done:
		t.Fatalf("Receive on %s ended before the subscription was confirmed: %v", what, err)
	case <-time.After(waitFor):
		t.Fatalf("%s %s not confirmed within %v", kind, what, waitFor)
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

// listener is a queued client's inbox, subscribed.
type listener struct {
	c       rueidis.Client // publishes the sentinels
	sharded bool
	inbox   string
	msgs    <-chan string
}

func listen(t *testing.T, c rueidis.Client, addrs []string, sharded bool, k luascripts.Keys, client string) listener {
	t.Helper()
	inbox := k.Inbox(client)
	return listener{c: c, sharded: sharded, inbox: inbox, msgs: subscribe(t, addrs, sharded, inbox)}
}

// expect publishes a sentinel and asserts that want, then the sentinel, are
// the next messages: anything else published before it would come first.
func (l listener) expect(t *testing.T, want ...string) {
	t.Helper()
	sentinel := fmt.Sprintf("sentinel-%d", seq.Add(1))
	publish(t, l.c, l.sharded, l.inbox, sentinel)
	expectMessages(t, l.msgs, append(want, sentinel)...)
}

// woken asserts exactly one wake-up since the last check.
func (l listener) woken(t *testing.T) { t.Helper(); l.expect(t, "unlock") }

// quiet asserts that nothing was published since the last check.
func (l listener) quiet(t *testing.T) { t.Helper(); l.expect(t) }

var modes = []struct {
	name    string
	sharded bool
}{
	{"publish", false},
	{"spublish", true},
}

// ---- acquire ----

func TestAcquire(t *testing.T) {
	c := standaloneClient(t)

	t.Run("Free", func(t *testing.T) {
		k := newKeys(t, c)
		assert.Equal(t, []int64{1, 1}, acquireRaw(t, c, k, luascripts.AcquireArgs{Owner: "A", Lease: lease, Client: "a"}), "the first token")
		assert.Equal(t, map[string]string{"A": "1"}, owners(t, c, k.Lock))
		between(t, pttl(t, c, k.Lock), lease-10*time.Second, lease, "the lease")
		assert.False(t, exists(t, c, k.Queue), "a grant queues nobody")
	})

	t.Run("Held", func(t *testing.T) {
		k := newKeys(t, c)
		take(t, c, k, "A")
		before := snapshot(t, c, k)
		v := acquireRaw(t, c, k, luascripts.AcquireArgs{Owner: "B", Lease: time.Second, Client: "b"})
		require.Len(t, v, 3)
		assert.Equal(t, int64(0), v[0])
		assert.Equal(t, int64(0), v[2], "not queued: no place")
		r := acquire(t, c, k, luascripts.AcquireArgs{Owner: "B2", Lease: time.Second, Client: "b"})
		assert.False(t, r.Acquired)
		between(t, r.PTTL, lease-10*time.Second, lease, "the holder's lease")
		assert.Equal(t, before, snapshot(t, c, k), "a refusal without waiting changes nothing, takes no token")
	})

	t.Run("HolderWithoutExpiry", func(t *testing.T) {
		k := newKeys(t, c)
		do(t, c, c.B().Hset().Key(k.Lock).FieldValue().FieldValue("A", "1").Build())
		assert.Equal(t, []int64{0, -1, 1}, acquireRaw(t, c, k, luascripts.AcquireArgs{Owner: "B", Lease: lease, Client: "b", Waiter: true}), "refused, first in line")
		assert.Equal(t, []string{"b"}, queued(t, c, k))
		between(t, pttl(t, c, k.Queue), 15*time.Second, 20*time.Second, "queued for the slack alone, and the extension's")
	})

	// A free lock is kept for the client a release woke, for its window:
	// it keeps its place, and is not told again.
	t.Run("WokenAhead", func(t *testing.T) {
		k := newKeys(t, c)
		reserve(t, c, k, "x", 5*time.Second)
		x := listen(t, c, []string{standaloneAddr}, false, k, "x")
		before := snapshot(t, c, k)
		wake := luascripts.Wake{Window: time.Minute}
		r := acquire(t, c, k, luascripts.AcquireArgs{Owner: "Y", Lease: lease, Client: "y", Wake: wake})
		assert.False(t, r.Acquired, "x was woken first")
		between(t, r.PTTL, 0, 5*time.Second, "the rest of x's window")
		assert.Zero(t, r.Holder, "no holder to name")
		assert.Equal(t, before, snapshot(t, c, k), "no lock, x's window and the counter untouched")

		r = acquire(t, c, k, luascripts.AcquireArgs{Owner: "Y2", Lease: lease, Client: "y", Waiter: true, Wake: wake})
		assert.False(t, r.Acquired)
		between(t, r.PTTL, 0, 5*time.Second, "the rest of x's window")
		assert.Equal(t, int64(2), r.Place)
		assert.Equal(t, []string{"x", "y"}, queued(t, c, k), "a refused waiter is queued behind")
		between(t, pttl(t, c, k.Queue), 20*time.Second, 25*time.Second, "the window's rest plus the slack and the extension's")
		assert.False(t, exists(t, c, k.Lock))
		x.quiet(t)
	})

	// A woken client whose window passed lost its place: the next
	// caller drops it, and tells it so (it may be waiting still).
	t.Run("WindowPassed", func(t *testing.T) {
		k := newKeys(t, c)
		reserve(t, c, k, "x", -time.Second)
		x := listen(t, c, []string{standaloneAddr}, false, k, "x")
		r := acquire(t, c, k, luascripts.AcquireArgs{Owner: "Y", Lease: lease, Client: "y", Wake: luascripts.Wake{Window: time.Minute}})
		assert.True(t, r.Acquired)
		assert.False(t, exists(t, c, k.Queue), "x dropped")
		x.woken(t)
	})

	// A caller refused by a client queued before it that was not woken
	// (the lock expired without a release) wakes it, and waits for its
	// window; one nobody listens for is dropped.
	t.Run("Prod", func(t *testing.T) {
		k := newKeys(t, c)
		do(t, c, c.B().Zadd().Key(k.Queue).ScoreMember().ScoreMember(1, "gone").ScoreMember(2, "x").Build())
		x := listen(t, c, []string{standaloneAddr}, false, k, "x")
		r := acquire(t, c, k, luascripts.AcquireArgs{Owner: "Y", Lease: lease, Client: "y", Waiter: true, Wake: luascripts.Wake{Window: 3 * time.Second}})
		assert.False(t, r.Acquired)
		between(t, r.PTTL, 2*time.Second, 3*time.Second, "x's window")
		x.woken(t)
		assert.Equal(t, []string{"x", "y"}, queued(t, c, k), "gone dropped")
		ok, end := wokenEnd(t, c, k.Queue, "x")
		assert.True(t, ok)
		between(t, time.Duration(end-serverMS(t, c))*time.Millisecond, 2*time.Second, 3*time.Second, "x's window")
	})

	t.Run("WokenCaller", func(t *testing.T) {
		k := newKeys(t, c)
		do(t, c, c.B().Zadd().Key(k.Queue).ScoreMember().ScoreMember(2, "z").Build())
		reserve(t, c, k, "x", 5*time.Second)
		r := acquire(t, c, k, luascripts.AcquireArgs{Owner: "X", Lease: lease, Client: "x", Waiter: true})
		assert.Equal(t, luascripts.AcquireReply{Acquired: true, Token: 1}, r)
		assert.Equal(t, []string{"z"}, queued(t, c, k), "the others stay queued")
		assert.Equal(t, map[string]string{"X": "1"}, owners(t, c, k.Lock))
		between(t, pttl(t, c, k.Lock), lease-10*time.Second, lease, "the lease")
	})

	// A woken client comes late: nobody took its place, so it is granted.
	t.Run("WokenCallerLate", func(t *testing.T) {
		k := newKeys(t, c)
		do(t, c, c.B().Zadd().Key(k.Queue).ScoreMember().ScoreMember(2, "z").Build())
		reserve(t, c, k, "x", -time.Second)
		r := acquire(t, c, k, luascripts.AcquireArgs{Owner: "X", Lease: lease, Client: "x", Waiter: true})
		assert.True(t, r.Acquired)
		assert.Equal(t, []string{"z"}, queued(t, c, k))
	})

	// Without the waiter flag a grant leaves the queue alone.
	t.Run("WokenCallerNotWaiting", func(t *testing.T) {
		k := newKeys(t, c)
		reserve(t, c, k, "x", 5*time.Second)
		r := acquire(t, c, k, luascripts.AcquireArgs{Owner: "X", Lease: lease, Client: "x"})
		assert.True(t, r.Acquired)
		assert.Equal(t, []string{"x"}, queued(t, c, k))
	})
}

// TestAcquireWaitQueue: refused waiters queue their client once, oldest
// first, in a queue that outlives the holder's lease; a granted waiter
// leaves it.
func TestAcquireWaitQueue(t *testing.T) {
	c := standaloneClient(t)
	k := newKeys(t, c)
	take(t, c, k, "H")

	score := func(client string) float64 {
		t.Helper()
		s, err := do(t, c, c.B().Zscore().Key(k.Queue).Member(client).Build()).AsFloat64()
		require.NoError(t, err)
		return s
	}
	enqueue(t, c, k, "c1")
	first := score("c1")
	for _, client := range []string{"c2", "c1", "c3"} {
		enqueue(t, c, k, client)
	}
	require.False(t, acquire(t, c, k, luascripts.AcquireArgs{Owner: "S", Lease: lease, Client: "spinner"}).Acquired)
	assert.Equal(t, []string{"c1", "c2", "c3"}, queued(t, c, k), "once each, oldest first; a client that does not wait not at all")
	assert.Equal(t, first, score("c1"), "queued again, c1 keeps its place")
	between(t, pttl(t, c, k.Queue), lease+10*time.Second, lease+20*time.Second, "the holder's lease plus the slack and the extension's")

	// The queue's expiry is raised, never lowered.
	do(t, c, c.B().Pexpire().Key(k.Queue).Milliseconds(1000*1000).Build())
	at := expireAt(t, c, k.Queue)
	enqueue(t, c, k, "c4")
	assert.Equal(t, at, expireAt(t, c, k.Queue))

	// H's lease lapses; c2 takes the free lock, since c1, queued before
	// it, does not listen (it is dropped), and leaves the queue.
	do(t, c, c.B().Del().Key(k.Lock).Build())
	r := acquire(t, c, k, luascripts.AcquireArgs{Owner: "c2:x", Lease: lease, Client: "c2", Waiter: true})
	require.True(t, r.Acquired)
	assert.Equal(t, []string{"c3", "c4"}, queued(t, c, k))

	// The queue key goes with its last client.
	do(t, c, c.B().Del().Key(k.Lock).Build())
	do(t, c, c.B().Zrem().Key(k.Queue).Member("c3").Build())
	require.True(t, acquire(t, c, k, luascripts.AcquireArgs{Owner: "c4:x", Lease: lease, Client: "c4", Waiter: true}).Acquired)
	assert.False(t, exists(t, c, k.Queue))
}

// Tokens rise by one from grant to grant, whoever the owner and however the
// lock was granted, and the counter never expires.
func TestFencingToken(t *testing.T) {
	c := standaloneClient(t)
	k := newKeys(t, c)
	wake := luascripts.Wake{Window: time.Second}

	a := take(t, c, k, "A")
	assert.Equal(t, int64(1), a)
	require.Equal(t, int64(2), reenter(t, c, k, "A"))
	require.Equal(t, luascripts.ReleaseReply{Left: 1}, release(t, c, k, luascripts.ReleaseArgs{Owner: "A", Count: 2, Wake: wake}))
	require.Equal(t, "1", get(t, c, k.Fence), "re-entry and partial release take no token")
	require.Equal(t, luascripts.ReleaseReply{}, release(t, c, k, luascripts.ReleaseArgs{Owner: "A", Count: 1, Wake: wake}))

	b := take(t, c, k, "B")
	assert.Equal(t, a+1, b)
	h := release(t, c, k, luascripts.ReleaseArgs{Owner: "B", Count: 1, Heir: "B2", HeirLease: lease, Wake: wake})
	assert.Equal(t, luascripts.ReleaseReply{Handed: true, Token: b + 1}, h, "a handover is a new grant")
	require.Equal(t, luascripts.ReleaseReply{}, release(t, c, k, luascripts.ReleaseArgs{Owner: "B2", Count: 1, Wake: wake}))

	assert.Equal(t, h.Token+1, take(t, c, k, "C"))
	assert.Equal(t, -time.Millisecond, pttl(t, c, k.Fence), "the counter never expires")
}

// ---- reenter ----

func TestReenter(t *testing.T) {
	c := standaloneClient(t)

	t.Run("Held", func(t *testing.T) {
		k := newKeys(t, c)
		tok := take(t, c, k, "A")
		at := expireAt(t, c, k.Lock)
		assert.Equal(t, int64(2), reenter(t, c, k, "A"))
		assert.Equal(t, int64(3), reenter(t, c, k, "A"))
		assert.Equal(t, map[string]string{"A": "3"}, owners(t, c, k.Lock))
		assert.Equal(t, at, expireAt(t, c, k.Lock), "a re-entry shares its hold's lease")
		assert.Equal(t, fmt.Sprint(tok), get(t, c, k.Fence), "and its token")
	})

	t.Run("NotHeld", func(t *testing.T) {
		k := newKeys(t, c)
		assert.Equal(t, int64(0), reenter(t, c, k, "A"))
		assert.False(t, exists(t, c, k.Lock), "nothing created")

		take(t, c, k, "B")
		before := snapshot(t, c, k)
		assert.Equal(t, int64(0), reenter(t, c, k, "A"), "held by another owner")
		assert.Equal(t, before, snapshot(t, c, k))
	})

	t.Run("NegativeCount", func(t *testing.T) {
		k := newKeys(t, c)
		do(t, c, c.B().Hset().Key(k.Lock).FieldValue().FieldValue("A", "-5").Build())
		_, err := k.Reenter(t.Context(), c, "A")
		assert.ErrorIs(t, err, luascripts.ErrUnexpectedReply)
	})
}

// ---- release ----

// heldByA returns a lock that owner A holds count times, with queued
// queued in that order, and listeners for w1 and w2 (the others, if any,
// are gone: nobody listens for them).
func heldByA(t *testing.T, c rueidis.Client, sharded bool, count int, queued ...string) (luascripts.Keys, listener, listener) {
	t.Helper()
	k := newKeys(t, c)
	take(t, c, k, "A")
	for range count - 1 {
		reenter(t, c, k, "A")
	}
	for _, w := range queued {
		enqueue(t, c, k, w)
	}
	return k, listen(t, c, []string{standaloneAddr}, sharded, k, "w1"),
		listen(t, c, []string{standaloneAddr}, sharded, k, "w2")
}

func TestRelease(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			c := standaloneClient(t)
			wake := luascripts.Wake{Sharded: mode.sharded, Window: 5 * time.Second}
			// held: A holds count times, with w0 (gone) and w1, w2
			// (listening) queued, in that order.
			held := func(t *testing.T, count int) (luascripts.Keys, listener, listener) {
				return heldByA(t, c, mode.sharded, count, "w0", "w1", "w2")
			}

			t.Run("Decrement", func(t *testing.T) {
				k, w1, w2 := held(t, 3)
				before := snapshot(t, c, k)
				assert.Equal(t, luascripts.ReleaseReply{Left: 2}, release(t, c, k, luascripts.ReleaseArgs{Owner: "A", Count: 3, Wake: wake}))
				assert.Equal(t, luascripts.ReleaseReply{Left: 1}, release(t, c, k, luascripts.ReleaseArgs{Owner: "A", Count: 2, Wake: wake}))
				before.Hash["A"] = "1"
				assert.Equal(t, before, snapshot(t, c, k), "only the count moved")
				w1.quiet(t)
				w2.quiet(t)
			})

			t.Run("Mismatch", func(t *testing.T) {
				k, w1, w2 := held(t, 2)
				before := snapshot(t, c, k)
				for _, a := range []luascripts.ReleaseArgs{
					{Owner: "A", Count: 1},
					{Owner: "A", Count: 3},
					{Owner: "B", Count: 2},
					{Owner: "B", Count: 1},
					{Owner: "A", Count: 1, Heir: "A2", HeirLease: lease},
				} {
					a.Wake = wake
					assert.Equal(t, luascripts.ReleaseReply{Left: -1}, release(t, c, k, a), "%+v", a)
				}
				assert.Equal(t, before, snapshot(t, c, k))
				w1.quiet(t)
				w2.quiet(t)

				// Releasing a lock nobody holds does not create it.
				missing := newKeys(t, c)
				assert.Equal(t, luascripts.ReleaseReply{Left: -1}, release(t, c, missing, luascripts.ReleaseArgs{Owner: "A", Count: 1, Wake: wake}))
				assert.False(t, exists(t, c, missing.Lock))
			})

			// The last hold frees the lock and wakes the oldest queued
			// client that listens (w0 does not), which keeps its place for
			// its window.
			t.Run("Last", func(t *testing.T) {
				k, w1, w2 := held(t, 1)
				fence := get(t, c, k.Fence)
				assert.Equal(t, luascripts.ReleaseReply{Woken: 1}, release(t, c, k, luascripts.ReleaseArgs{Owner: "A", Count: 1, Wake: wake}))
				assert.False(t, exists(t, c, k.Lock))
				w1.woken(t)
				w2.quiet(t)
				assert.Equal(t, []string{"w1", "w2"}, queued(t, c, k), "w0 dropped, w1 woken")
				ok, end := wokenEnd(t, c, k.Queue, "w1")
				assert.True(t, ok)
				between(t, time.Duration(end-serverMS(t, c))*time.Millisecond, 0, wake.Window, "the window")
				assert.Equal(t, fence, get(t, c, k.Fence))
			})

			t.Run("LastWithoutWindow", func(t *testing.T) {
				k, w1, w2 := held(t, 1)
				assert.Equal(t, luascripts.ReleaseReply{Woken: 1}, release(t, c, k, luascripts.ReleaseArgs{Owner: "A", Count: 1, Wake: luascripts.Wake{Sharded: mode.sharded}}))
				w1.woken(t)
				w2.quiet(t)
				ok, _ := wokenEnd(t, c, k.Queue, "w1")
				assert.False(t, ok, "window 0: none")
				assert.Equal(t, []string{"w1", "w2"}, queued(t, c, k))
			})

			t.Run("LastNobodyListening", func(t *testing.T) {
				k := newKeys(t, c)
				take(t, c, k, "A")
				enqueue(t, c, k, "w0")
				w := listen(t, c, []string{standaloneAddr}, mode.sharded, k, "w")
				assert.Equal(t, luascripts.ReleaseReply{}, release(t, c, k, luascripts.ReleaseArgs{Owner: "A", Count: 1, Wake: wake}))
				assert.False(t, exists(t, c, k.Lock))
				assert.False(t, exists(t, c, k.Queue), "w0 dropped")
				w.quiet(t) // subscribed but never queued
			})

			// The last hold passes to the heir: a new grant, no wake-up.
			t.Run("Heir", func(t *testing.T) {
				k, w1, w2 := held(t, 1)
				before := snapshot(t, c, k)
				r := release(t, c, k, luascripts.ReleaseArgs{Owner: "A", Count: 1, Heir: "A2", HeirLease: 2 * lease, Wake: wake})
				assert.Equal(t, luascripts.ReleaseReply{Handed: true, Token: 2}, r)
				assert.Equal(t, map[string]string{"A2": "1"}, owners(t, c, k.Lock))
				between(t, pttl(t, c, k.Lock), lease, 2*lease, "the heir's lease")
				assert.Equal(t, "2", get(t, c, k.Fence))
				assert.Equal(t, before.Queue, snapshot(t, c, k).Queue, "nobody woken")
				w1.quiet(t)
				w2.quiet(t)
				assert.Equal(t, int64(2), reenter(t, c, k, "A2"), "the heir holds it")
			})

			// A heir whose lease ends before the TTL the queue was told
			// probes the first listening client, windowless: the waiters
			// would otherwise sleep past a lease that no release may end.
			t.Run("HeirShorterLease", func(t *testing.T) {
				k, w1, w2 := held(t, 1)
				r := release(t, c, k, luascripts.ReleaseArgs{Owner: "A", Count: 1, Heir: "A2", HeirLease: 7 * time.Second, HeirCheck: true, Wake: wake})
				assert.Equal(t, luascripts.ReleaseReply{Handed: true, Token: 2}, r)
				between(t, pttl(t, c, k.Lock), 5*time.Second, 7*time.Second, "the heir's lease")
				w1.woken(t)
				w2.quiet(t)
				ok, _ := wokenEnd(t, c, k.Queue, "w1")
				assert.False(t, ok, "a probe gives no window")
				assert.Equal(t, []string{"w1", "w2"}, queued(t, c, k), "w0, not listening, dropped")
			})

			// Without HeirCheck the caller vouches that the lock's TTL is no
			// longer than the heir's lease: no PTTL is read, nobody probed.
			t.Run("HeirUnchecked", func(t *testing.T) {
				k, w1, w2 := held(t, 1)
				before := snapshot(t, c, k)
				r := release(t, c, k, luascripts.ReleaseArgs{Owner: "A", Count: 1, Heir: "A2", HeirLease: 7 * time.Second, Wake: wake})
				assert.Equal(t, luascripts.ReleaseReply{Handed: true, Token: 2}, r)
				assert.Equal(t, before.Queue, snapshot(t, c, k).Queue, "nobody woken")
				w1.quiet(t)
				w2.quiet(t)
			})

			// A heir is used only at the last hold.
			t.Run("HeirNotLast", func(t *testing.T) {
				k, w1, _ := held(t, 2)
				r := release(t, c, k, luascripts.ReleaseArgs{Owner: "A", Count: 2, Heir: "A2", HeirLease: lease, Wake: wake})
				assert.Equal(t, luascripts.ReleaseReply{Left: 1}, r)
				assert.Equal(t, map[string]string{"A": "1"}, owners(t, c, k.Lock))
				assert.Equal(t, "1", get(t, c, k.Fence))
				w1.quiet(t)
			})
		})
	}
}

// TestReleaseRetry: a release retried after its reply was lost reports what
// the first call did, without doing it again; when the first call never ran
// the retry does it.
func TestReleaseRetry(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			c := standaloneClient(t)
			wake := luascripts.Wake{Sharded: mode.sharded, Window: 5 * time.Second}
			// held: A holds count times, with w1 and w2 queued and listening.
			held := func(t *testing.T, count int) (luascripts.Keys, listener, listener) {
				return heldByA(t, c, mode.sharded, count, "w1", "w2")
			}
			args := func(count int64, heir string) luascripts.ReleaseArgs {
				return luascripts.ReleaseArgs{Owner: "A", Count: count, Heir: heir, HeirLease: lease, Wake: wake, Retry: true}
			}

			t.Run("DecrementRan", func(t *testing.T) {
				k, w1, _ := held(t, 3)
				first := args(3, "")
				first.Retry = false
				require.Equal(t, luascripts.ReleaseReply{Left: 2}, release(t, c, k, first))
				before := snapshot(t, c, k)
				assert.Equal(t, luascripts.ReleaseReply{Left: 2}, release(t, c, k, args(3, "")))
				assert.Equal(t, before, snapshot(t, c, k), "no second drop")
				w1.quiet(t)
			})

			t.Run("DecrementNotRun", func(t *testing.T) {
				k, _, _ := held(t, 2)
				assert.Equal(t, luascripts.ReleaseReply{Left: 1}, release(t, c, k, args(2, "")))
				assert.Equal(t, map[string]string{"A": "1"}, owners(t, c, k.Lock))
			})

			t.Run("FreeRan", func(t *testing.T) {
				k, w1, w2 := held(t, 1)
				first := args(1, "")
				first.Retry = false
				require.Equal(t, luascripts.ReleaseReply{Woken: 1}, release(t, c, k, first))
				w1.woken(t)
				before := snapshot(t, c, k)
				assert.Equal(t, luascripts.ReleaseReply{}, release(t, c, k, args(1, "")))
				assert.Equal(t, before, snapshot(t, c, k), "no second wake-up, the window kept")
				w1.quiet(t)
				w2.quiet(t)
			})

			t.Run("FreeNotRun", func(t *testing.T) {
				k, w1, w2 := held(t, 1)
				assert.Equal(t, luascripts.ReleaseReply{Woken: 1}, release(t, c, k, args(1, "")))
				assert.False(t, exists(t, c, k.Lock))
				w1.woken(t)
				w2.quiet(t)
				ok, _ := wokenEnd(t, c, k.Queue, "w1")
				assert.True(t, ok)
			})

			t.Run("HandoverRan", func(t *testing.T) {
				k, w1, _ := held(t, 1)
				first := args(1, "A2")
				first.Retry = false
				r := release(t, c, k, first)
				require.Equal(t, luascripts.ReleaseReply{Handed: true, Token: 2}, r)
				before := snapshot(t, c, k)
				assert.Equal(t, r, release(t, c, k, args(1, "A2")), "the same token again")
				assert.Equal(t, before, snapshot(t, c, k), "no second grant")
				w1.quiet(t)
			})

			t.Run("HandoverNotRun", func(t *testing.T) {
				k, w1, _ := held(t, 1)
				assert.Equal(t, luascripts.ReleaseReply{Handed: true, Token: 2}, release(t, c, k, args(1, "A2")))
				assert.Equal(t, map[string]string{"A2": "1"}, owners(t, c, k.Lock))
				w1.quiet(t)
			})

			// The heir's hold is gone by the time of the retry: only that
			// the owner's hold is gone is left to report.
			t.Run("HandoverHeirGone", func(t *testing.T) {
				k, w1, _ := held(t, 1)
				first := args(1, "A2")
				first.Retry = false
				require.True(t, release(t, c, k, first).Handed)
				do(t, c, c.B().Del().Key(k.Lock).Build())
				before := snapshot(t, c, k)
				assert.Equal(t, luascripts.ReleaseReply{}, release(t, c, k, args(1, "A2")))
				assert.Equal(t, before, snapshot(t, c, k))
				w1.quiet(t)
			})

			t.Run("Mismatch", func(t *testing.T) {
				k, w1, w2 := held(t, 3)
				before := snapshot(t, c, k)
				// 4 is not among them: count 3 is what a ran release of 4 leaves.
				for _, n := range []int64{1, 2, 5} {
					assert.Equal(t, luascripts.ReleaseReply{Left: -1}, release(t, c, k, args(n, "")), "count 3, retry with %d", n)
				}
				o := args(4, "")
				o.Owner = "B"
				assert.Equal(t, luascripts.ReleaseReply{Left: -1}, release(t, c, k, o), "another owner")
				assert.Equal(t, before, snapshot(t, c, k))
				w1.quiet(t)
				w2.quiet(t)

				// A lost hold (count > 1) is not taken for a ran release.
				missing := newKeys(t, c)
				assert.Equal(t, luascripts.ReleaseReply{Left: -1}, release(t, c, missing, args(2, "")))
				assert.False(t, exists(t, c, missing.Lock))
			})
		})
	}
}

// ---- leave ----

func TestLeave(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			c := standaloneClient(t)
			wake := luascripts.Wake{Sharded: mode.sharded, Window: 5 * time.Second}
			lis := func(t *testing.T, k luascripts.Keys, client string) listener {
				t.Helper()
				return listen(t, c, []string{standaloneAddr}, mode.sharded, k, client)
			}

			t.Run("Dequeue", func(t *testing.T) {
				k := newKeys(t, c)
				take(t, c, k, "A")
				for _, w := range []string{"a", "b", "c"} {
					enqueue(t, c, k, w)
				}
				a, cc := lis(t, k, "a"), lis(t, k, "c")
				hash, at := hgetall(t, c, k.Lock), expireAt(t, c, k.Lock)
				assert.True(t, leave(t, c, k, "b", wake))
				assert.Equal(t, []string{"a", "c"}, queued(t, c, k))
				assert.False(t, leave(t, c, k, "nobody", wake), "not queued")
				assert.Equal(t, []string{"a", "c"}, queued(t, c, k))
				assert.Equal(t, hash, hgetall(t, c, k.Lock))
				assert.Equal(t, at, expireAt(t, c, k.Lock))
				a.quiet(t)
				cc.quiet(t)
			})

			// A woken client that leaves passes the wake-up on to the next
			// listening client, which gets a window of its own.
			t.Run("PassWakeUp", func(t *testing.T) {
				k := newKeys(t, c)
				do(t, c, c.B().Zadd().Key(k.Queue).ScoreMember().ScoreMember(1, "n0").ScoreMember(2, "n1").ScoreMember(3, "n2").Build())
				reserve(t, c, k, "me", time.Second)
				n1, n2 := lis(t, k, "n1"), lis(t, k, "n2")
				assert.True(t, leave(t, c, k, "me", wake))
				n1.woken(t)
				n2.quiet(t)
				ok, end := wokenEnd(t, c, k.Queue, "n1")
				assert.True(t, ok)
				between(t, time.Duration(end-serverMS(t, c))*time.Millisecond, time.Second, wake.Window, "a fresh window")
				assert.Equal(t, []string{"n1", "n2"}, queued(t, c, k), "n0 dropped, n1 woken")
				assert.False(t, exists(t, c, k.Lock))
			})

			t.Run("PassWithoutWindow", func(t *testing.T) {
				k := newKeys(t, c)
				do(t, c, c.B().Zadd().Key(k.Queue).ScoreMember().ScoreMember(1, "n1").Build())
				reserve(t, c, k, "me", time.Second)
				n1 := lis(t, k, "n1")
				assert.True(t, leave(t, c, k, "me", luascripts.Wake{Sharded: mode.sharded}))
				n1.woken(t)
				ok, _ := wokenEnd(t, c, k.Queue, "n1")
				assert.False(t, ok)
			})

			t.Run("WokenNobodyNext", func(t *testing.T) {
				k := newKeys(t, c)
				reserve(t, c, k, "me", time.Second)
				assert.True(t, leave(t, c, k, "me", wake))
				assert.False(t, exists(t, c, k.Queue))
			})

			// Another woken client in its window is not told again.
			t.Run("WokenAnother", func(t *testing.T) {
				k := newKeys(t, c)
				do(t, c, c.B().Zadd().Key(k.Queue).ScoreMember().ScoreMember(1, "me").ScoreMember(2, "n1").Build())
				reserve(t, c, k, "x", time.Second)
				x, n1 := lis(t, k, "x"), lis(t, k, "n1")
				_, end := wokenEnd(t, c, k.Queue, "x")
				assert.True(t, leave(t, c, k, "me", wake))
				_, after := wokenEnd(t, c, k.Queue, "x")
				assert.Equal(t, end, after, "x's window is not stretched")
				assert.Equal(t, []string{"x", "n1"}, queued(t, c, k))
				x.quiet(t)
				n1.quiet(t)
			})

			// A lock that is held wakes nobody.
			t.Run("WokenLockHeld", func(t *testing.T) {
				k := newKeys(t, c)
				take(t, c, k, "A")
				enqueue(t, c, k, "n1")
				reserve(t, c, k, "me", time.Second)
				n1 := lis(t, k, "n1")
				hash, at := hgetall(t, c, k.Lock), expireAt(t, c, k.Lock)
				assert.True(t, leave(t, c, k, "me", wake))
				assert.Equal(t, []string{"n1"}, queued(t, c, k))
				assert.Equal(t, hash, hgetall(t, c, k.Lock))
				assert.Equal(t, at, expireAt(t, c, k.Lock))
				n1.quiet(t)
			})
		})
	}
}

// ---- forceunlock ----

func TestForceUnlock(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			c := standaloneClient(t)
			k := newKeys(t, c)
			take(t, c, k, oid("A"))
			reenter(t, c, k, oid("A"))
			for _, w := range []string{"w0", "w1", "w2"} {
				enqueue(t, c, k, w)
			}
			w1 := listen(t, c, []string{standaloneAddr}, mode.sharded, k, "w1")
			w2 := listen(t, c, []string{standaloneAddr}, mode.sharded, k, "w2")

			wake := luascripts.Wake{Sharded: mode.sharded, Window: 5 * time.Second}
			assert.True(t, forceUnlock(t, c, k, wake))
			assert.False(t, exists(t, c, k.Lock))
			w1.woken(t)
			w2.quiet(t)
			assert.Equal(t, []string{"w1", "w2"}, queued(t, c, k), "w0 dropped, w1 woken")
			ok, _ := wokenEnd(t, c, k.Queue, "w1")
			assert.True(t, ok, "with a window, as a release would")
			assert.Equal(t, "1", get(t, c, k.Fence), "the counter stays")

			// A woken client that has not come is dropped, and the next
			// waiter woken, as a release would.
			assert.True(t, forceUnlock(t, c, k, wake))
			w2.woken(t)
			assert.Equal(t, []string{"w2"}, queued(t, c, k))

			do(t, c, c.B().Zadd().Key(k.Queue).ScoreMember().ScoreMember(1, "w2").Build())
			before := snapshot(t, c, k)
			assert.False(t, forceUnlock(t, c, k, wake), "no lock to delete, nobody woken to drop")
			assert.Equal(t, before, snapshot(t, c, k))
			w2.quiet(t)

			// A key of another type is not latchkey's: nothing is deleted.
			do(t, c, c.B().Del().Key(k.Queue).Build())
			take(t, c, k, oid("B"))
			do(t, c, c.B().Rpush().Key(k.Queue).Element("app").Build())
			lock := hgetall(t, c, k.Lock)
			deleted, foreign, err := k.Intro().ForceUnlock(t.Context(), c, wake)
			require.NoError(t, err)
			assert.False(t, deleted)
			assert.Equal(t, k.Queue, foreign)
			assert.Equal(t, lock, hgetall(t, c, k.Lock), "the lock stays")
			app, err := do(t, c, c.B().Lindex().Key(k.Queue).Index(0).Build()).ToString()
			require.NoError(t, err)
			assert.Equal(t, "app", app, "and so does the list")
			do(t, c, c.B().Del().Key(k.Queue).Build())
		})
	}
}

// TestFamilyForceUnlock: an RWMutex's force-unlock deletes its write and
// read holds and wakes the queued readers as a release would; a
// Semaphore's deletes every holder and wakes the clients the permits
// serve, keeping the size while they wait; both refuse a key of another
// type and delete nothing.
func TestFamilyForceUnlock(t *testing.T) {
	c := standaloneClient(t)
	force := func(in luascripts.Intro, w luascripts.Wake) (bool, string) {
		t.Helper()
		deleted, foreign, err := in.ForceUnlock(t.Context(), c, w)
		require.NoError(t, err)
		return deleted, foreign
	}
	t.Run("RWMutex", func(t *testing.T) {
		f := newRW(t, c)
		require.True(t, f.write(oid("W"), "cw", false).Acquired)
		require.False(t, f.read(oid("R"), "cr", true).Acquired)
		cr := f.listen("cr", false)
		deleted, _ := force(f.k.Intro(), f.wake)
		assert.True(t, deleted)
		cr.woken(t)
		assert.False(t, exists(t, c, f.k.Write))
		require.True(t, f.read(oid("R"), "cr", true).Acquired)
		deleted, _ = force(f.k.Intro(), f.wake)
		assert.True(t, deleted, "the read hold")
		f.gone()
		deleted, _ = force(f.k.Intro(), f.wake)
		assert.False(t, deleted, "nothing left")

		require.True(t, f.read(oid("R2"), "cr", false).Acquired)
		do(t, c, c.B().Set().Key(f.k.QueueW).Value("app").Build())
		deleted, foreign := force(f.k.Intro(), f.wake)
		assert.False(t, deleted)
		assert.Equal(t, f.k.QueueW, foreign)
		assert.True(t, exists(t, c, f.k.Readers), "deleted although refused")
	})
	t.Run("Semaphore", func(t *testing.T) {
		f := newSem(t, c, []string{standaloneAddr}, false, 2)
		require.True(t, f.acquire(oid("A"), "ca", 2, false).Acquired)
		require.False(t, f.acquire(oid("B"), "cb", 2, true).Acquired)
		cb := f.listen("cb")
		deleted, _ := force(f.k.Intro(), f.wake)
		assert.True(t, deleted)
		cb.woken(t)
		assert.False(t, exists(t, c, f.k.Holders))
		assert.Equal(t, int64(2), f.available(), "the size is kept while clients wait")
		require.True(t, f.acquire(oid("B"), "cb", 2, true).Acquired)

		do(t, c, c.B().Del().Key(f.k.Records).Build())
		do(t, c, c.B().Set().Key(f.k.Records).Value("app").Build())
		deleted, foreign := force(f.k.Intro(), f.wake)
		assert.False(t, deleted)
		assert.Equal(t, f.k.Records, foreign)
		assert.True(t, exists(t, c, f.k.Holders), "deleted although refused")
	})
}

// TestForceUnlockShape: the force-unlock scripts delete a key only when
// it holds what latchkey writes there (force.lua's foreign): a hold hash
// of owner ids ("<UUID>:<n>") with integer counts beside '#' fields, a
// records hash of owner ids, a lease set of owner ids, a Semaphore's wants
// of integers. Anything else, an application's key of the same type, is
// named and nothing is deleted.
func TestForceUnlockShape(t *testing.T) {
	c := standaloneClient(t)
	hset := func(key string, kv ...string) {
		t.Helper()
		do(t, c, c.B().Arbitrary("HSET").Keys(key).Args(kv...).Build())
	}
	refused := func(in luascripts.Intro, key string) {
		t.Helper()
		before, err := do(t, c, c.B().Dump().Key(key).Build()).ToString()
		require.NoError(t, err)
		deleted, foreign, err := in.ForceUnlock(t.Context(), c, luascripts.Wake{})
		require.NoError(t, err)
		assert.False(t, deleted)
		assert.Equal(t, key, foreign)
		after, err := do(t, c, c.B().Dump().Key(key).Build()).ToString()
		require.NoError(t, err)
		assert.Equal(t, before, after, "%s changed", key)
		do(t, c, c.B().Del().Key(key).Build())
	}

	k := newKeys(t, c)
	hset(k.Lock, oid("A"), "2", "#rec", "whatever", strings.ToUpper(oid("B")), "1")
	assert.True(t, forceUnlock(t, c, k, luascripts.Wake{}), "owner ids, counts and '#' fields: a lock")
	for _, kv := range [][]string{
		{"name", "bob", "email", "b@x"},                  // an application's hash
		{"views", "12"},                                  // of integers
		{"mode", "read", oid("A"), "1"},                  // a Redisson RReadWriteLock
		{oid("A"), "one"},                                // a count that is not an integer
		{oid("A") + ":write", "1"},                       // Redisson's write owner
		{"0b8e2f3c-1d4a-4b5c-8d6e-7f8091a2b3c4", "1"},    // no ":<n>"
		{"u-1d4a-4b5c-8d6e-7f8091a2b3c4:1", "1"},         // no UUID
		{"0b8e2f3c-1d4a-4b5c-8d6e-7f8091a2b3c4:1x", "1"}, // not a number
	} {
		hset(k.Lock, kv...)
		refused(k.Intro(), k.Lock)
	}

	rw := newRW(t, c)
	hset(rw.k.Readers, "someone", "1")
	refused(rw.k.Intro(), rw.k.Readers)
	hset(rw.k.ReadRecords, "someone", oid("A")+"|1|0|")
	refused(rw.k.Intro(), rw.k.ReadRecords)
	do(t, c, c.B().Zadd().Key(rw.k.ReadLeases).ScoreMember().ScoreMember(1, "alice").ScoreMember(2, oid("A")).Build())
	refused(rw.k.Intro(), rw.k.ReadLeases)

	sem := newSem(t, c, []string{standaloneAddr}, false, 2)
	hset(sem.k.Wants, "#size", "2", "some client", "many")
	refused(sem.k.Intro(), sem.k.Wants)
	hset(sem.k.Records, oid("A"), "1", "someone", "1")
	refused(sem.k.Intro(), sem.k.Records)
	hset(sem.k.Holders, "#size", "2", "#held", "1", "slots", "1")
	refused(sem.k.Intro(), sem.k.Holders)
}

// ---- inspect ----

// TestInspect: the Mutex's describe script reports its holder with count,
// lease and record, the reservation apart from any holder, changes
// nothing, and reports what is not latchkey's as damage beside the rest.
func TestInspect(t *testing.T) {
	c := standaloneClient(t)
	k := newKeys(t, c)
	d := describe(t, c, k.Intro(), 10)
	assert.Empty(t, d.Holds, "no lock")
	assert.False(t, exists(t, c, k.Lock), "inspect creates nothing")

	reserve(t, c, k, "x", 5*time.Second)
	d = describe(t, c, k.Intro(), 10)
	assert.Empty(t, d.Holds, "a woken client is not a holder")
	assert.Equal(t, "x", d.Woken)
	require.Len(t, d.Queues, 1)
	require.Len(t, d.Queues[0].Clients, 1)
	assert.Zero(t, d.Queues[0].Clients[0].Since)
	between(t, time.Until(d.Queues[0].Clients[0].Woken), 3*time.Second, 6*time.Second, "its window's end")
	do(t, c, c.B().Del().Key(k.Queue).Build())
	reserve(t, c, k, "x", -time.Second)
	assert.Empty(t, describe(t, c, k.Intro(), 10).Woken, "its window passed")
	do(t, c, c.B().Del().Key(k.Queue).Build())

	take(t, c, k, "A")
	reenter(t, c, k, "A")
	reenter(t, c, k, "A")
	before := snapshot(t, c, k)
	d = describe(t, c, k.Intro(), 10)
	require.Len(t, d.Holds, 1)
	assert.Equal(t, "A", d.Holds[0].Owner)
	assert.Equal(t, int64(3), d.Holds[0].Count)
	between(t, d.Holds[0].PTTL, lease-10*time.Second, lease, "the lease")
	assert.Equal(t, before, snapshot(t, c, k), "inspect changes nothing")
	do(t, c, c.B().Pexpire().Key(k.Lock).Milliseconds(1<<62).Build())
	d = describe(t, c, k.Intro(), 10)
	assert.Equal(t, luascripts.MaxPTTL, d.Holds[0].PTTL, "a huge PTTL saturates")

	do(t, c, c.B().Hset().Key(k.Lock).FieldValue().FieldValue("B", "x").Build())
	do(t, c, c.B().Hset().Key(k.Lock).FieldValue().FieldValue("#rec", "junk").Build())
	d = describe(t, c, k.Intro(), 10)
	require.Len(t, d.Holds, 2, "what could be read")
	assert.Len(t, d.Damaged, 3, "B's count, and A's and B's record: %q", d.Damaged)
}

// ---- renew ----

func TestRenew(t *testing.T) {
	c := standaloneClient(t)
	base := "latchkey:{" + uniqueTag(t) + "}"
	k := func(s string) luascripts.Keys { return keysFor(t, c, base+":"+s) }
	held, other, missing, released, long := k("held"), k("other"), k("missing"), k("released"), k("long")

	short := func(l luascripts.Keys, owner string) {
		require.True(t, acquire(t, c, l, luascripts.AcquireArgs{Owner: owner, Lease: 2 * time.Second, Client: "c"}).Acquired)
	}
	short(held, "A")
	short(other, "B")
	short(released, "A")
	require.Equal(t, luascripts.ReleaseReply{}, release(t, c, released, luascripts.ReleaseArgs{Owner: "A", Count: 1}))
	take(t, c, long, "A")
	otherAt := expireAt(t, c, other.Lock)

	keys := []string{held.Lock, other.Lock, missing.Lock, released.Lock, long.Lock}
	v, err := luascripts.Renew.Exec(t.Context(), c, keys,
		[]string{luascripts.Millis(60 * time.Second), "A", "A", "A", "A", "A"}).AsIntSlice()
	require.NoError(t, err)
	assert.Equal(t, []int64{1, 0, 0, 0, 1}, v)
	got, err := luascripts.ParseRenew(v, len(keys))
	require.NoError(t, err)
	assert.Equal(t, []bool{true, false, false, false, true}, got)

	assert.Greater(t, pttl(t, c, held.Lock), 30*time.Second, "held lease raised")
	assert.Equal(t, map[string]string{"A": "1"}, owners(t, c, held.Lock))
	assert.Equal(t, otherAt, expireAt(t, c, other.Lock), "another owner's lease untouched")
	assert.Equal(t, map[string]string{"B": "1"}, owners(t, c, other.Lock))
	assert.False(t, exists(t, c, missing.Lock), "missing key not created")
	assert.False(t, exists(t, c, released.Lock), "released key not recreated")
	assert.Greater(t, pttl(t, c, long.Lock), 80*time.Second, "a longer lease is not lowered")
}

// TestRenewLeaseSet: a group whose keys include a lease set (a side whose
// holders share keys) is held only while its owner's score there has not
// passed; renewing it moves the score and every key's expiry out, and a
// group not held changes nothing, in one batch with one that is.
func TestRenewLeaseSet(t *testing.T) {
	c := standaloneClient(t)
	base := "latchkey:{" + uniqueTag(t) + "}"
	counts, leases, records := base+":h", base+":h:e", base+":h:rec"
	t.Cleanup(func() {
		assert.NoError(t, c.Do(context.Background(), c.B().Del().Key(counts, leases, records).Build()).Error())
	})
	now := serverMillis(t, c)
	do(t, c, c.B().Hset().Key(counts).FieldValue().FieldValue("A", "1").FieldValue("D", "1").FieldValue("X", "1").Build())
	// D's lease ran out a second ago; X has none.
	do(t, c, c.B().Zadd().Key(leases).ScoreMember().ScoreMember(float64(now+10_000), "A").ScoreMember(float64(now-1000), "D").Build())
	do(t, c, c.B().Hset().Key(records).FieldValue().FieldValue("A", "a").FieldValue("D", "d").FieldValue("X", "x").Build())
	for _, k := range []string{counts, leases, records} {
		do(t, c, c.B().Pexpire().Key(k).Milliseconds(10_000).Build())
	}
	at := map[string]int64{}
	for _, k := range []string{counts, leases, records} {
		at[k] = expireAt(t, c, k)
	}
	score := func(owner string) float64 {
		t.Helper()
		f, err := do(t, c, c.B().Zscore().Key(leases).Member(owner).Build()).AsFloat64()
		require.NoError(t, err)
		return f
	}

	group := []string{counts, luascripts.LeaseSet(leases), records}
	call := luascripts.Call{Args: []string{luascripts.Millis(time.Minute)}}
	for _, o := range []string{"D", "X", "nobody"} {
		call.AppendRenew(o, group[0], group[1:]...)
	}
	assert.Equal(t, []string{counts, leases, records, counts, leases, records, counts, leases, records}, call.Keys, "the mark is taken off")
	v, err := luascripts.Renew.Exec(t.Context(), c, call.Keys, call.Args).AsIntSlice()
	require.NoError(t, err)
	assert.Equal(t, []int64{0, 0, 0, 0, 0, 0, 0, 0, 0}, v, "a lapsed lease, no lease, no field")
	assert.Equal(t, float64(now-1000), score("D"), "a lapsed lease was revived")
	for k, when := range at {
		assert.Equal(t, when, expireAt(t, c, k), "%s changed for a group not held", k)
	}

	held, err := luascripts.RunRenewHold(t.Context(), c, [][]string{group}, "A", time.Minute, luascripts.Sync{})
	require.NoError(t, err)
	assert.True(t, held)
	assert.GreaterOrEqual(t, score("A"), float64(now+60_000), "the lease moved out")
	assert.Equal(t, float64(now-1000), score("D"), "another owner's lease moved")
	for _, k := range []string{counts, leases, records} {
		assert.Greater(t, pttl(t, c, k), 50*time.Second, "%s kept", k)
	}
	// A shorter renewal lowers nothing.
	held, err = luascripts.RunRenewHold(t.Context(), c, [][]string{group}, "A", time.Second, luascripts.Sync{})
	require.NoError(t, err)
	assert.True(t, held)
	assert.GreaterOrEqual(t, score("A"), float64(now+60_000))
	assert.Greater(t, pttl(t, c, leases), 50*time.Second)
}

// TestHolderRecordLivesWithTheLock: a Mutex's holder record is the field
// "#rec" of the lock hash, written by the grant's HSET (an acquire's and a
// handover's), never counted as an owner, renewed with the hash's expiry
// (no key of its own to renew), deleted with the last release, and gone
// when the lease runs out.
func TestHolderRecordLivesWithTheLock(t *testing.T) {
	c := standaloneClient(t)
	k := newKeys(t, c)
	record := func() string {
		t.Helper()
		v, err := c.Do(t.Context(), c.B().Hget().Key(k.Lock).Field("#rec").Build()).ToString()
		if rueidis.IsRedisNil(err) {
			return ""
		}
		require.NoError(t, err)
		return v
	}
	tok := acquire(t, c, k, luascripts.AcquireArgs{Owner: "A", Lease: 2 * time.Second, Client: "a", About: `{"id":"a"}`}).Token
	assert.Regexp(t, fmt.Sprintf(`^A\|%d\|[0-9]+\|\{"id":"a"\}$`, tok), record(), "owner, token, time, description")
	assert.Equal(t, map[string]string{"A": "1"}, owners(t, c, k.Lock), "the record is no owner")
	keys, err := do(t, c, c.B().Keys().Pattern(k.Lock+"*").Build()).AsStrSlice()
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{k.Lock, k.Fence}, keys, "no key of its own")

	// Re-entered and renewed with the hash: one key per group.
	assert.Equal(t, int64(2), reenter(t, c, k, "A"))
	call := luascripts.Call{Args: []string{luascripts.Millis(time.Minute)}}
	call.AppendRenew("A", k.Lock)
	assert.Equal(t, []string{k.Lock}, call.Keys)
	v, err := luascripts.Renew.Exec(t.Context(), c, call.Keys, call.Args).AsIntSlice()
	require.NoError(t, err)
	assert.Equal(t, []int64{1}, v)
	assert.Greater(t, pttl(t, c, k.Lock), 50*time.Second)
	d := describe(t, c, k.Intro(), 10)
	require.Len(t, d.Holds, 1)
	assert.Equal(t, luascripts.Held{Owner: "A", Count: 2, PTTL: d.Holds[0].PTTL, Record: d.Holds[0].Record}, d.Holds[0])
	assert.Equal(t, "A", d.Holds[0].Record.Owner)
	assert.Equal(t, tok, d.Holds[0].Record.Token)

	// A release that leaves a hold keeps it; a handover writes the heir's.
	assert.Equal(t, luascripts.ReleaseReply{Left: 1}, release(t, c, k, luascripts.ReleaseArgs{Owner: "A", Count: 2}))
	assert.Regexp(t, `^A\|`, record())
	r := release(t, c, k, luascripts.ReleaseArgs{Owner: "A", Count: 1, Heir: "A2", HeirLease: 200 * time.Millisecond, HeirAbout: `{"id":"a"}`})
	require.True(t, r.Handed)
	assert.Regexp(t, fmt.Sprintf(`^A2\|%d\|`, r.Token), record())
	assert.Equal(t, map[string]string{"A2": "1"}, owners(t, c, k.Lock))

	// The lease runs out: the hash goes, record and all.
	require.Eventually(t, func() bool { return !exists(t, c, k.Lock) }, 5*time.Second, 20*time.Millisecond)
	assert.Equal(t, "", record())

	// The last release deletes the hash, record and all.
	take(t, c, k, "B")
	assert.Regexp(t, `^B\|`, record())
	assert.Equal(t, luascripts.ReleaseReply{}, release(t, c, k, luascripts.ReleaseArgs{Owner: "B", Count: 1}))
	assert.False(t, exists(t, c, k.Lock))
	d = describe(t, c, k.Intro(), 10)
	assert.Empty(t, d.Holds)
}

// serverMillis is the server's clock, in ms.
func serverMillis(t *testing.T, c rueidis.Client) int64 {
	t.Helper()
	now, err := redistest.ServerMillis(t.Context(), c)
	require.NoError(t, err)
	return now
}

// ---- NOSCRIPT fallback ----

// Every script runs on a server that has just lost its script cache, and
// loads itself again (EVALSHA, then EVAL).
func TestEveryScriptAfterFlush(t *testing.T) {
	c := standaloneClient(t)
	k := newKeys(t, c)
	steps := []struct {
		s   *luascripts.Script
		run func()
	}{
		{luascripts.Acquire, func() {
			assert.Equal(t, luascripts.AcquireReply{Acquired: true, Token: 1}, acquire(t, c, k, luascripts.AcquireArgs{Owner: oid("A"), Lease: lease, Client: "a"}))
		}},
		{luascripts.Reenter, func() { assert.Equal(t, int64(2), reenter(t, c, k, oid("A"))) }},
		{luascripts.Describe, func() {
			assert.Equal(t, int64(2), describe(t, c, k.Intro(), 1).Holds[0].Count)
		}},
		{luascripts.Renew, func() {
			v, err := luascripts.Renew.Exec(t.Context(), c, []string{k.Lock}, []string{luascripts.Millis(lease), oid("A")}).AsIntSlice()
			require.NoError(t, err)
			assert.Equal(t, []int64{1}, v)
		}},
		{luascripts.Release, func() {
			assert.Equal(t, luascripts.ReleaseReply{Left: 1}, release(t, c, k, luascripts.ReleaseArgs{Owner: oid("A"), Count: 2}))
		}},
		{luascripts.Leave, func() { assert.False(t, leave(t, c, k, "a", luascripts.Wake{})) }},
		{luascripts.ForceUnlock, func() { assert.True(t, forceUnlock(t, c, k, luascripts.Wake{})) }},
	}
	for _, s := range steps {
		do(t, c, c.B().ScriptFlush().Build())
		require.False(t, scriptCached(t, c, s.s), s.s.Name())
		s.run()
		assert.True(t, scriptCached(t, c, s.s), "%s: the EVAL fallback loaded the script", s.s.Name())
	}
	assert.False(t, exists(t, c, k.Lock))
}

func TestExecMultiAfterScriptFlush(t *testing.T) {
	c := standaloneClient(t)
	const n = 6
	keys := make([]luascripts.Keys, n)
	for i := range keys {
		keys[i] = newKeys(t, c)
		if i%2 == 1 {
			take(t, c, keys[i], "B")
		}
	}
	do(t, c, c.B().ScriptFlush().Build())
	require.False(t, scriptCached(t, c, luascripts.Acquire))

	calls := make([]luascripts.Call, n)
	for i, k := range keys {
		calls[i] = luascripts.Call{Keys: k.AcquireKeys(), Args: []string{"A", luascripts.Millis(lease), "a", "0", "", "p50", k.Channel}}
	}
	results := luascripts.Acquire.ExecMulti(t.Context(), c, calls)
	require.Len(t, results, n)
	for i, r := range results {
		got, err := luascripts.DecodeAcquire(r)
		require.NoError(t, err, "call %d", i)
		if i%2 == 1 {
			assert.False(t, got.Acquired, "call %d: held by B", i)
			between(t, got.PTTL, lease-10*time.Second, lease, fmt.Sprintf("call %d: B's lease", i))
			continue
		}
		assert.Equal(t, luascripts.AcquireReply{Acquired: true, Token: 1}, got, "call %d", i)
	}
	assert.True(t, scriptCached(t, c, luascripts.Acquire), "EVAL fallback loaded the script")

	// With the script cached, the same path answers without a fallback.
	fresh := newKeys(t, c)
	results = luascripts.Acquire.ExecMulti(t.Context(), c, []luascripts.Call{{Keys: fresh.AcquireKeys(), Args: calls[0].Args}})
	require.Len(t, results, 1)
	v, err := results[0].AsIntSlice()
	require.NoError(t, err)
	assert.Equal(t, []int64{1, 1}, v)
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

// tagsOnEveryMaster returns one fresh hash tag per master.
func tagsOnEveryMaster(t *testing.T, c rueidis.Client) []string {
	t.Helper()
	base := uniqueTag(t)
	var tags []string
	seen := map[int64]bool{}
	for i := 0; len(tags) < 3; i++ {
		require.Less(t, i, 1000, "no tags found on all three masters")
		tag := fmt.Sprintf("%s-%d", base, i)
		if s := third(slotOf(t, c, "{"+tag+"}")); !seen[s] {
			seen[s] = true
			tags = append(tags, tag)
		}
	}
	return tags
}

// Every key and channel of a lock shares its slot: the scripts touch them
// together, and SPUBLISH from a script must stay in its slot.
func TestClusterKeysShareSlot(t *testing.T) {
	c := clusterClient(t)
	for _, tag := range tagsOnEveryMaster(t, c) {
		k := luascripts.NewKeys("latchkey:{" + tag + "}")
		slot := slotOf(t, c, k.Lock)
		for _, name := range []string{k.Channel, k.Fence, k.Queue, k.Inbox("some-client")} {
			assert.Equal(t, slot, slotOf(t, c, name), name)
		}
		assert.True(t, strings.HasPrefix(k.Inbox("x"), k.Channel+":"))
	}
}

// The scripts that wake clients do it with SPUBLISH on every shard: release
// (with a window), leave (passing it on) and forceunlock.
func TestClusterSharded(t *testing.T) {
	c := clusterClient(t)
	wake := luascripts.Wake{Sharded: true, Window: 5 * time.Second}
	for _, tag := range tagsOnEveryMaster(t, c) {
		k := keysFor(t, c, "latchkey:{"+tag+"}")
		lis := func(client string) listener {
			return listen(t, c, clusterAddrs, true, k, client)
		}
		tok := take(t, c, k, oid("A"))
		require.Equal(t, int64(2), reenter(t, c, k, oid("A")))
		enqueue(t, c, k, "w1")
		enqueue(t, c, k, "w2")
		enqueue(t, c, k, "w3")
		w1, w2, w3 := lis("w1"), lis("w2"), lis("w3")

		assert.Equal(t, luascripts.ReleaseReply{Left: 1}, release(t, c, k, luascripts.ReleaseArgs{Owner: oid("A"), Count: 2, Wake: wake}))
		w1.quiet(t)
		assert.Equal(t, luascripts.ReleaseReply{Woken: 1}, release(t, c, k, luascripts.ReleaseArgs{Owner: oid("A"), Count: 1, Wake: wake}))
		w1.woken(t)
		require.False(t, acquire(t, c, k, luascripts.AcquireArgs{Owner: "X", Lease: lease, Client: "x", Wake: wake}).Acquired, "kept for w1")

		// w1 leaves: w2 is woken with a window.
		assert.True(t, leave(t, c, k, "w1", wake))
		w2.woken(t)
		w3.quiet(t)
		got := acquire(t, c, k, luascripts.AcquireArgs{Owner: oid("W2"), Lease: lease, Client: "w2", Waiter: true, Wake: wake})
		assert.Equal(t, luascripts.AcquireReply{Acquired: true, Token: tok + 1}, got)

		assert.True(t, forceUnlock(t, c, k, wake))
		w3.woken(t)
		w2.quiet(t)
		assert.False(t, exists(t, c, k.Lock))
		assert.Equal(t, []string{"w3"}, queued(t, c, k), "w3 woken, in its window")
	}
}

func TestClusterRenewExecMulti(t *testing.T) {
	c := clusterClient(t)
	base := uniqueTag(t)
	const n = 40
	const short = 10 * time.Second

	type lock struct {
		keys []luascripts.Keys // two locks per call, same tag
		want []int64
	}
	locks := make([]lock, n)
	slots := map[int64]bool{}
	thirds := map[int64]bool{}
	acq := func(k luascripts.Keys, owner string) {
		require.True(t, acquire(t, c, k, luascripts.AcquireArgs{Owner: owner, Lease: short, Client: "c"}).Acquired)
	}
	for i := range locks {
		tag := fmt.Sprintf("%s-%d", base, i)
		a, b := keysFor(t, c, "latchkey:{"+tag+"}"), keysFor(t, c, "latchkey:{"+tag+"}:2")
		l := lock{keys: []luascripts.Keys{a, b}}
		switch i % 4 {
		case 0: // both held by A
			acq(a, "A")
			acq(b, "A")
			l.want = []int64{1, 1}
		case 1: // a held by A, b by B
			acq(a, "A")
			acq(b, "B")
			l.want = []int64{1, 0}
		case 2: // a missing, b held by A
			acq(b, "A")
			l.want = []int64{0, 1}
		case 3: // neither exists
			l.want = []int64{0, 0}
		}
		locks[i] = l
		s := slotOf(t, c, a.Lock)
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
		calls[i] = luascripts.Call{Keys: []string{l.keys[0].Lock, l.keys[1].Lock}, Args: []string{luascripts.Millis(lease), "A", "A"}}
	}
	checkReplies := func(results []rueidis.RedisResult) {
		t.Helper()
		require.Len(t, results, n)
		for i, r := range results {
			v, err := r.AsIntSlice()
			require.NoError(t, err, "call %d", i)
			assert.Equal(t, locks[i].want, v, "call %d", i)
			_, err = luascripts.ParseRenew(v, 2)
			assert.NoError(t, err, "call %d", i)
		}
	}
	checkReplies(luascripts.Renew.ExecMulti(t.Context(), c, calls))

	// Synced (this Cluster has no replicas, so WAIT counts none): every
	// call still runs once on its own master, whichever node the batch
	// went to first, and after the first batch the learnt routes send
	// each call straight to its master: no more -MOVED.
	sync := luascripts.Sync{Replicas: 1, Timeout: 10 * time.Millisecond, Routes: luascripts.NewRoutes()}
	for round := range 2 {
		moved := movedCount(t, c)
		results, acks := luascripts.Renew.ExecMultiSync(t.Context(), c, calls, sync)
		checkReplies(results)
		for i, ack := range acks {
			var nr *luascripts.NotReplicatedError
			require.ErrorAs(t, ack, &nr, "call %d", i)
			assert.Zero(t, nr.Got)
		}
		if round == 1 {
			assert.Equal(t, moved, movedCount(t, c), "a batch sent with learnt routes was redirected")
		}
	}
	for i, l := range locks {
		for j, k := range l.keys {
			switch {
			case l.want[j] == 1:
				assert.Greater(t, pttl(t, c, k.Lock), lease/2, "%s renewed", k.Lock)
			case i%4 == 1:
				assert.LessOrEqual(t, pttl(t, c, k.Lock), short, "%s not renewed", k.Lock)
			default:
				assert.False(t, exists(t, c, k.Lock), "%s not created", k.Lock)
			}
		}
	}
}

// movedCount sums the -MOVED replies every node of c has sent.
func movedCount(t *testing.T, c rueidis.Client) int {
	t.Helper()
	total := 0
	for addr, node := range c.Nodes() {
		info, err := node.Do(t.Context(), node.B().Info().Section("errorstats").Build()).ToString()
		require.NoError(t, err, addr)
		var n int
		if i := strings.Index(info, "errorstat_MOVED:count="); i >= 0 {
			_, err := fmt.Sscanf(info[i:], "errorstat_MOVED:count=%d", &n)
			require.NoError(t, err)
		}
		total += n
	}
	return total
}

// TestRenewOne: the one-lock wrapper Extend uses reports the owner's hold
// and moves its expiry out, and finds another owner's lock not held.
func TestRenewOne(t *testing.T) {
	c := standaloneClient(t)
	k := newKeys(t, c)
	require.True(t, acquire(t, c, k, luascripts.AcquireArgs{Owner: "A", Lease: 2 * time.Second, Client: "a"}).Acquired)

	held, err := luascripts.RunRenewHold(t.Context(), c, [][]string{{k.Lock}}, "A", time.Minute, luascripts.Sync{})
	require.NoError(t, err)
	require.True(t, held)
	pttl, err := c.Do(t.Context(), c.B().Pttl().Key(k.Lock).Build()).AsInt64()
	require.NoError(t, err)
	require.Greater(t, pttl, int64(50_000), "the expiry did not move out")

	held, err = luascripts.RunRenewHold(t.Context(), c, [][]string{{k.Lock}}, "B", time.Minute, luascripts.Sync{})
	require.NoError(t, err)
	require.False(t, held, "B does not hold the lock")
	require.Equal(t, luascripts.ReleaseReply{}, release(t, c, k, luascripts.ReleaseArgs{Owner: "A", Count: 1}))
}
