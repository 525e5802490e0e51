package notify

import (
	"fmt"
	"testing"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"
)

// publishPayload publishes msg (SPUBLISH when sharded) and returns how many
// subscribed connections got it.
func publishPayload(t *testing.T, c rueidis.Client, sharded bool, channel, msg string) int64 {
	t.Helper()
	cmd := c.B().Publish().Channel(channel).Message(msg).Build()
	if sharded {
		cmd = c.B().Spublish().Channel(channel).Message(msg).Build()
	}
	n, err := c.Do(t.Context(), cmd).AsInt64()
	require.NoError(t, err)
	return n
}

// One WakeAllPayload message wakes every waiter of the channel in every hub
// (two hubs stand for two processes), leaves no wake-up behind for later
// waits, and changes the epoch, so a Mark taken before it no longer waits.
func TestWakeAllPayloadWakesEveryWaiter(t *testing.T) {
	admin := newClient(t, redisAddr)
	taps := []*tapClient{newTap(newClient(t, redisAddr)), newTap(newClient(t, redisAddr))}
	ch := uniqueChannel(t)

	const perHub = 4
	var subs []*Subscription
	for _, tap := range taps {
		subs = append(subs, subscribeN(t, newHub(t, tap, Options{}), ch, perHub)...)
	}
	staleMark := subs[0].Mark()
	results := startWaiters(t, subs, longWait)

	require.EqualValues(t, len(taps), publishPayload(t, admin, false, ch, WakeAllPayload), "one subscribed connection per hub")
	woken := make(map[int]bool)
	for range subs {
		r := await(t, results, "every waiter to be woken by one broadcast")
		require.NoError(t, r.err)
		require.Equal(t, WokenAll, r.wake)
		require.False(t, woken[r.id], "waiter %d reported twice", r.id)
		woken[r.id] = true
	}
	for _, tap := range taps {
		tap.requireHandled(t, ch, 1)
	}

	// The mark from before the broadcast says so even without blocking.
	w, err := subs[0].Wait(t.Context(), staleMark, 0)
	require.NoError(t, err)
	require.Equal(t, WokenAll, w)
	// A broadcast leaves no single wake-up pending.
	for _, s := range subs {
		w, err = s.Wait(t.Context(), s.Mark(), 0)
		require.NoError(t, err)
		require.Equal(t, TimedOut, w, "a broadcast must not leave a permit")
	}

	// Other payloads still wake one waiter per hub.
	results = startWaiters(t, subs, longWait)
	require.EqualValues(t, len(taps), publishPayload(t, admin, false, ch, "unlock"))
	for range taps {
		r := await(t, results, "one waiter per hub for an ordinary message")
		require.NoError(t, r.err)
		require.Equal(t, WokenOne, r.wake)
	}
	for _, tap := range taps {
		tap.requireHandled(t, ch, 2)
	}
	require.Empty(t, results, "an ordinary message woke more than one waiter per hub")
	// The rest wake at the next broadcast.
	require.EqualValues(t, len(taps), publishPayload(t, admin, false, ch, WakeAllPayload))
	for range len(subs) - len(taps) {
		r := await(t, results, "the remaining waiters to be woken by a broadcast")
		require.NoError(t, r.err)
		require.Equal(t, WokenAll, r.wake)
	}
}

// A broadcast that arrives between a waiter's Mark and its Wait is not
// lost: the Wait returns at once.
func TestWakeAllPayloadBetweenMarkAndWait(t *testing.T) {
	c := newClient(t, redisAddr)
	tap := newTap(c)
	h := newHub(t, tap, Options{})
	ch := uniqueChannel(t)
	s := subscribeN(t, h, ch, 1)[0]

	for i := 1; i <= 3; i++ {
		mark := s.Mark()
		require.EqualValues(t, 1, publishPayload(t, c, false, ch, WakeAllPayload))
		tap.requireHandled(t, ch, i)
		w, err := s.Wait(t.Context(), mark, longWait)
		require.NoError(t, err)
		require.Equal(t, WokenAll, w, "broadcast %d", i)
	}
}

// In sharded mode an SPUBLISH of WakeAllPayload wakes every waiter of its
// channel and nobody on another channel.
func TestWakeAllPayloadSharded(t *testing.T) {
	cc := newClient(t, clusterAddrs...)
	tap := newTap(cc)
	h := newHub(t, tap, Options{Mode: Sharded})
	channels, _ := shardedChannels(t, cc, 2)

	const n = 3
	woken := subscribeN(t, h, channels[0], n)
	other := subscribeN(t, h, channels[1], 1)[0]
	otherMark := other.Mark()
	results := startWaiters(t, woken, longWait)

	require.EqualValues(t, 1, publishPayload(t, cc, true, channels[0], WakeAllPayload))
	for i := range n {
		r := await(t, results, fmt.Sprintf("waiter %d of %q", i, channels[0]))
		require.NoError(t, r.err)
		require.Equal(t, WokenAll, r.wake)
	}
	tap.requireHandled(t, channels[0], 1)
	w, err := other.Wait(t.Context(), otherMark, 0)
	require.NoError(t, err)
	require.Equal(t, TimedOut, w, "a broadcast on %q woke a waiter of %q", channels[0], channels[1])
}
