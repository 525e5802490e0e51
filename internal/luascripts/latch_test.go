package luascripts_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/internal/luascripts"
	"github.com/latchkey/latchkey/notify"
)

// ---- count-down latch ----

// latchKeysFor returns the latch keys at base and deletes the latch when the
// test ends (tests that stop before zero leave it set).
func latchKeysFor(t *testing.T, c rueidis.Client, base string) luascripts.LatchKeys {
	t.Helper()
	k := luascripts.NewLatchKeys(base)
	t.Cleanup(func() {
		assert.NoError(t, c.Do(context.Background(), c.B().Del().Key(k.Latch).Build()).Error())
	})
	return k
}

func newLatchKeys(t *testing.T, c rueidis.Client) luascripts.LatchKeys {
	t.Helper()
	return latchKeysFor(t, c, "latchkey:{"+uniqueTag(t)+"}")
}

// latchKeep is how long the tests' latchset calls have a zero kept.
const latchKeep = 5 * time.Second

func latchSet(t *testing.T, c rueidis.Client, k luascripts.LatchKeys, n int64, round string) bool {
	t.Helper()
	ok, err := luascripts.RunLatchSet(t.Context(), c, k, n, round, latchKeep)
	require.NoError(t, err)
	return ok
}

// zeroKept asserts that the latch is at zero, its round's tombstone: the
// count 0 under round, kept latchKeep at most.
func zeroKept(t *testing.T, c rueidis.Client, k luascripts.LatchKeys, round string) {
	t.Helper()
	assert.Equal(t, map[string]string{"count": "0", "round": round, "keep": "5000"}, hgetall(t, c, k.Latch))
	between(t, pttl(t, c, k.Latch), time.Millisecond, latchKeep, "the zero's expiry")
	assert.Equal(t, luascripts.LatchState{Round: round}, readLatch(t, c, k), "not set")
}

func countDown(t *testing.T, c rueidis.Client, k luascripts.LatchKeys, sharded bool) luascripts.CountDownStatus {
	t.Helper()
	n, err := luascripts.RunLatchCountDown(t.Context(), c, k, sharded, notify.WakeAllPayload)
	require.NoError(t, err)
	return n
}

func readLatch(t *testing.T, c rueidis.Client, k luascripts.LatchKeys) luascripts.LatchState {
	t.Helper()
	st, err := luascripts.ReadLatch(t.Context(), c, k)
	require.NoError(t, err)
	return st
}

// latchListener subscribes to the latch's channel.
func latchListener(t *testing.T, c rueidis.Client, addrs []string, sharded bool, k luascripts.LatchKeys) listener {
	t.Helper()
	return listener{c: c, sharded: sharded, inbox: k.Channel, msgs: subscribe(t, addrs, sharded, k.Channel)}
}

func TestLatchSet(t *testing.T) {
	c := standaloneClient(t)
	k := newLatchKeys(t, c)

	assert.Equal(t, luascripts.LatchState{}, readLatch(t, c, k), "no latch")
	assert.True(t, latchSet(t, c, k, 3, "r1"))
	assert.Equal(t, map[string]string{"count": "3", "round": "r1", "keep": "5000"}, hgetall(t, c, k.Latch))
	assert.Equal(t, time.Duration(-1)*time.Millisecond, pttl(t, c, k.Latch), "a latch has no expiry")
	assert.Equal(t, luascripts.LatchState{Count: 3, Round: "r1"}, readLatch(t, c, k))

	assert.False(t, latchSet(t, c, k, 5, "r2"), "a count is set already")
	assert.Equal(t, map[string]string{"count": "3", "round": "r1", "keep": "5000"}, hgetall(t, c, k.Latch), "refused: nothing changed")

	// A count of zero or less (zero is what the scripts leave, expiring)
	// counts as unset, and whatever else the hash held goes.
	do(t, c, c.B().Hset().Key(k.Latch).FieldValue().FieldValue("count", "0").FieldValue("junk", "x").Build())
	assert.Equal(t, luascripts.LatchState{Round: "r1"}, readLatch(t, c, k))
	do(t, c, c.B().Pexpire().Key(k.Latch).Milliseconds(60000).Build())
	assert.True(t, latchSet(t, c, k, 2, "r3"))
	assert.Equal(t, map[string]string{"count": "2", "round": "r3", "keep": "5000"}, hgetall(t, c, k.Latch))
	assert.Equal(t, time.Duration(-1)*time.Millisecond, pttl(t, c, k.Latch), "a latch set again has no expiry")

	// The largest count survives the round trip exactly.
	big := newLatchKeys(t, c)
	assert.True(t, latchSet(t, c, big, 1<<63-1, "r"))
	assert.Equal(t, int64(1<<63-1), readLatch(t, c, big).Count)
	assert.Equal(t, luascripts.CountDownCounting, countDown(t, c, big, false))
	assert.Equal(t, int64(1<<63-2), readLatch(t, c, big).Count, "exact")
}

func TestLatchCountDown(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			c := standaloneClient(t)
			k := newLatchKeys(t, c)
			l := latchListener(t, c, []string{standaloneAddr}, mode.sharded, k)

			assert.Equal(t, luascripts.CountDownNoLatch, countDown(t, c, k, mode.sharded), "no latch")
			assert.False(t, exists(t, c, k.Latch), "a count-down creates nothing")
			l.quiet(t)

			require.True(t, latchSet(t, c, k, 3, "r1"))
			assert.Equal(t, luascripts.CountDownCounting, countDown(t, c, k, mode.sharded))
			assert.Equal(t, int64(2), readLatch(t, c, k).Count)
			assert.Equal(t, luascripts.CountDownCounting, countDown(t, c, k, mode.sharded))
			assert.Equal(t, luascripts.LatchState{Count: 1, Round: "r1"}, readLatch(t, c, k))
			l.quiet(t)

			assert.Equal(t, luascripts.CountDownWoke, countDown(t, c, k, mode.sharded))
			l.expect(t, notify.WakeAllPayload)
			zeroKept(t, c, k, "r1")

			assert.Equal(t, luascripts.CountDownNoLatch, countDown(t, c, k, mode.sharded), "past zero: not set")
			zeroKept(t, c, k, "r1")
			l.quiet(t)

			// Zero lets the latch be set again.
			require.True(t, latchSet(t, c, k, 1, "r2"))
			assert.Equal(t, time.Duration(-1)*time.Millisecond, pttl(t, c, k.Latch), "set again: no expiry")
			assert.Equal(t, luascripts.CountDownWoke, countDown(t, c, k, mode.sharded))
			l.expect(t, notify.WakeAllPayload)
			zeroKept(t, c, k, "r2")
			do(t, c, c.B().Del().Key(k.Latch).Build())

			// A hash without a count (not one latchset writes) ends at once,
			// and goes: it has no keep.
			do(t, c, c.B().Hset().Key(k.Latch).FieldValue().FieldValue("round", "x").Build())
			assert.Equal(t, luascripts.CountDownWoke, countDown(t, c, k, mode.sharded))
			l.expect(t, notify.WakeAllPayload)
			assert.False(t, exists(t, c, k.Latch))

			// A zero that nobody listens for says so.
			quiet := newLatchKeys(t, c)
			require.True(t, latchSet(t, c, quiet, 1, "r"))
			assert.Equal(t, luascripts.CountDownReleased, countDown(t, c, quiet, mode.sharded))
			zeroKept(t, c, quiet, "r")
		})
	}
}

func TestLatchScriptsAfterFlush(t *testing.T) {
	c := standaloneClient(t)
	k := newLatchKeys(t, c)
	for _, s := range []struct {
		s   *luascripts.Script
		run func()
	}{
		{luascripts.LatchSet, func() { assert.True(t, latchSet(t, c, k, 1, "r")) }},
		{luascripts.LatchRead, func() { assert.Equal(t, luascripts.LatchState{Count: 1, Round: "r"}, readLatch(t, c, k)) }},
		{luascripts.LatchCountDown, func() { assert.Equal(t, luascripts.CountDownReleased, countDown(t, c, k, false)) }},
	} {
		do(t, c, c.B().ScriptFlush().Build())
		require.False(t, scriptCached(t, c, s.s), s.s.Name())
		s.run()
		assert.True(t, scriptCached(t, c, s.s), "%s: the EVAL fallback loaded the script", s.s.Name())
	}
}

func TestLatchScriptNames(t *testing.T) {
	for _, tc := range []struct {
		s    *luascripts.Script
		name string
	}{
		{luascripts.LatchSet, "latchset"},
		{luascripts.LatchCountDown, "latchcountdown"},
		{luascripts.LatchRead, "latchread"},
	} {
		assert.Equal(t, tc.name, tc.s.Name())
		assert.Contains(t, tc.s.Source(), "-- "+tc.name+":")
		assert.NotContains(t, tc.s.Source(), "-- queue:", "a latch queues nobody")
	}
}

// The latch's key and channel share the slot of its name's hash tag, and
// the count-down SPUBLISHes from the script on every master.
func TestClusterLatch(t *testing.T) {
	c := clusterClient(t)
	for _, tag := range tagsOnEveryMaster(t, c) {
		base := "latchkey:{" + tag + "}"
		k := latchKeysFor(t, c, base)
		slot := slotOf(t, c, base)
		assert.Equal(t, slot, slotOf(t, c, k.Latch))
		assert.Equal(t, slot, slotOf(t, c, k.Channel))
		lock := luascripts.NewKeys(base)
		for _, name := range []string{lock.Lock, lock.Channel, lock.Fence, lock.Queue, lock.Inbox("c")} {
			assert.NotEqual(t, name, k.Latch, "the latch and the lock of one name share no key")
			assert.NotEqual(t, name, k.Channel)
		}

		l := latchListener(t, c, clusterAddrs, true, k)
		require.True(t, latchSet(t, c, k, 2, "r"))
		assert.Equal(t, luascripts.CountDownCounting, countDown(t, c, k, true))
		l.quiet(t)
		assert.Equal(t, luascripts.CountDownWoke, countDown(t, c, k, true), "the listener on the slot's master counts")
		l.expect(t, notify.WakeAllPayload)
		zeroKept(t, c, k, "r")
	}
}

func TestParseLatch(t *testing.T) {
	s := func(v string) *string { return &v }
	for _, tc := range []struct {
		in   []*string
		want luascripts.LatchState
		ok   bool
	}{
		{[]*string{nil, nil}, luascripts.LatchState{}, true},
		{[]*string{s("4"), s("r")}, luascripts.LatchState{Count: 4, Round: "r"}, true},
		{[]*string{s("-3"), s("r")}, luascripts.LatchState{Round: "r"}, true},
		{[]*string{s("9223372036854775807"), nil}, luascripts.LatchState{Count: 1<<63 - 1}, true},
		{[]*string{s("x"), s("r")}, luascripts.LatchState{}, false},
		{[]*string{s("1.5"), nil}, luascripts.LatchState{}, false},
		{[]*string{nil}, luascripts.LatchState{}, false},
		{nil, luascripts.LatchState{}, false},
	} {
		got, err := luascripts.ParseLatch(tc.in)
		if !tc.ok {
			require.ErrorIs(t, err, luascripts.ErrUnexpectedReply, "%v", tc.in)
			continue
		}
		require.NoError(t, err)
		assert.Equal(t, tc.want, got)
	}
}

// TestRegressLatchSetRetryAfterZero: a retry of a latchset whose round was
// counted down to zero finds its round ended and sets nothing; another
// round sets the count. Zero deleted the latch, so the retry set the count
// again: a latch nobody counts down, without expiry.
func TestRegressLatchSetRetryAfterZero(t *testing.T) {
	c := standaloneClient(t)
	k := newLatchKeys(t, c)
	require.True(t, latchSet(t, c, k, 1, "r1"))
	assert.Equal(t, luascripts.CountDownReleased, countDown(t, c, k, false))
	assert.True(t, latchSet(t, c, k, 1, "r1"), "the retry: its own round")
	assert.Equal(t, luascripts.LatchState{Round: "r1"}, readLatch(t, c, k), "the retry set the count again")
	assert.Equal(t, luascripts.CountDownNoLatch, countDown(t, c, k, false), "past zero: not set")
	zeroKept(t, c, k, "r1")

	// The zero goes by itself.
	short := newLatchKeys(t, c)
	ok, err := luascripts.RunLatchSet(t.Context(), c, short, 1, "r", time.Millisecond)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, luascripts.CountDownReleased, countDown(t, c, short, false))
	require.Eventually(t, func() bool { return !exists(t, c, short.Latch) }, waitFor, time.Millisecond)

	// Another round sets the count over the zero, without expiry.
	require.True(t, latchSet(t, c, k, 2, "r2"))
	assert.Equal(t, luascripts.LatchState{Count: 2, Round: "r2"}, readLatch(t, c, k))
	assert.Equal(t, time.Duration(-1)*time.Millisecond, pttl(t, c, k.Latch), "a set latch has no expiry")
	assert.False(t, latchSet(t, c, k, 1, "r1"), "a retry of an old round, past its zero's keep")
}
