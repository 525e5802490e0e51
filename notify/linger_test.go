package notify

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"
)

// modeEnv is where one pub/sub mode's subscription to one channel lives:
// the client for the hub, a client on the server that holds the channel's
// subscriptions (for NUMSUB and INFO commandstats) and one that publishes.
type modeEnv struct {
	mode    Mode
	client  rueidis.Client // for the hub; on Cluster, a cluster client
	node    rueidis.Client // the standalone server, or the channel's owner
	channel string
}

// forEachMode runs f in Classic mode on the standalone server and in
// Sharded mode on the Cluster.
func forEachMode(t *testing.T, f func(t *testing.T, e modeEnv)) {
	t.Run("classic", func(t *testing.T) {
		f(t, modeEnv{mode: Classic, client: newClient(t, redisAddr), node: newClient(t, redisAddr), channel: uniqueChannel(t)})
	})
	t.Run("sharded", func(t *testing.T) {
		cc := newClient(t, clusterAddrs...)
		channels, owners := shardedChannels(t, cc, 1)
		f(t, modeEnv{mode: Sharded, client: cc, node: newNodeClient(t, clusterAddrs[owners[0]]), channel: channels[0]})
	})
}

func (e modeEnv) sharded() bool { return e.mode == Sharded }

// subscribes is how many SUBSCRIBEs (SSUBSCRIBEs) the channel's server has
// run since it started; unsubscribes likewise.
func (e modeEnv) subscribes(t *testing.T) int64 {
	if e.sharded() {
		return commandCalls(t, e.node, "ssubscribe")
	}
	return commandCalls(t, e.node, "subscribe")
}

func (e modeEnv) unsubscribes(t *testing.T) int64 {
	if e.sharded() {
		return commandCalls(t, e.node, "sunsubscribe")
	}
	return commandCalls(t, e.node, "unsubscribe")
}

func (e modeEnv) numsub(t *testing.T) int64 {
	t.Helper()
	n, err := numsubOf(t.Context(), e.node, e.sharded(), e.channel)
	require.NoError(t, err)
	return n
}

// publish sends msg on the channel and returns how many subscribed
// connections got it.
func (e modeEnv) publish(t *testing.T, msg string) int64 {
	t.Helper()
	return publishPayload(t, e.client, e.sharded(), e.channel, msg)
}

// requireMessageWakes publishes one message, requires the server to deliver
// it to one connection, and requires it to wake s, which took mark.
func (e modeEnv) requireMessageWakes(t *testing.T, s *Subscription, mark Mark, what string) {
	t.Helper()
	require.EqualValues(t, 1, e.publish(t, "released"), "%s: subscribed connections", what)
	w, err := s.Wait(t.Context(), mark, longWait)
	require.NoError(t, err, what)
	require.Equal(t, WokenOne, w, what)
}

// hubGoroutines counts the goroutines running the hubs' code: channel loops,
// linger timers' callbacks, loggers. Tests do not run in parallel and close
// their hubs when they end, so only the calling test's hubs count; the
// calling goroutine, listed first, does not.
//
// A goroutine that has just called wg.Done, or left the hub's map, still
// has its last instructions to run, so await a count rather than read it.
func requireHubGoroutines(t *testing.T, want int, what string) {
	t.Helper()
	require.Eventually(t, func() bool { return hubGoroutines() == want }, eventually, tick, "%s: %d hub goroutines, want %d", what, hubGoroutines(), want)
}

func hubGoroutines() int {
	var dump strings.Builder
	_ = pprof.Lookup("goroutine").WriteTo(&dump, 2) // 2: every stack, as a panic prints them
	count := 0
	for i, g := range strings.Split(dump.String(), "\n\n") {
		if i > 0 && strings.Contains(g, "latchkey/notify.(*Hub).") {
			count++
		}
	}
	return count
}

// The issue this answers: one waiter that comes back to the same channel
// again and again, as a process contending for a busy lock does. Without a
// linger each wait costs a SUBSCRIBE and an UNSUBSCRIBE; with one, only the
// first wait subscribes and none unsubscribes, and every wait still gets its
// message.
func TestLingerSavesSubscribePerWait(t *testing.T) {
	forEachMode(t, func(t *testing.T, e modeEnv) {
		const waits = 20
		run := func(linger time.Duration) (subscribes, unsubscribes int64) {
			h := newHub(t, e.client, Options{Mode: e.mode, Linger: linger})
			subsBefore, unsubsBefore := e.subscribes(t), e.unsubscribes(t)
			for i := range waits {
				s, err := h.Subscribe(t.Context(), e.channel)
				require.NoError(t, err)
				e.requireMessageWakes(t, s, s.Mark(), fmt.Sprintf("wait %d", i))
				s.Release()
			}
			if linger < 0 {
				// The last Release's UNSUBSCRIBE runs after it returned.
				requireNumsubEventually(t, e.node, e.sharded(), e.channel, 0)
			}
			subscribes, unsubscribes = e.subscribes(t)-subsBefore, e.unsubscribes(t)-unsubsBefore
			h.Close()
			return subscribes, unsubscribes
		}

		subs, unsubs := run(noLinger)
		t.Logf("%s, no linger: %d waits, %d SUBSCRIBE, %d UNSUBSCRIBE", e.mode, waits, subs, unsubs)
		require.EqualValues(t, waits, subs, "without a linger every wait subscribes")
		require.EqualValues(t, waits, unsubs, "without a linger every Release unsubscribes")

		subs, unsubs = run(0) // the default linger, far longer than the test
		t.Logf("%s, default linger: %d waits, %d SUBSCRIBE, %d UNSUBSCRIBE", e.mode, waits, subs, unsubs)
		require.EqualValues(t, 1, subs, "with a linger only the first wait subscribes")
		require.Zero(t, unsubs, "with a linger no Release unsubscribes")
	})
}

// Between the last Release and the next Subscribe, the lingering
// subscription stays on the server, Channels lists it, Subscribed says so,
// and the metrics count it open and lingering.
func TestLingeringSubscriptionIsVisible(t *testing.T) {
	forEachMode(t, func(t *testing.T, e modeEnv) {
		meter := newFakeMeter()
		h := newHub(t, e.client, Options{Mode: e.mode, Meter: meter})
		require.False(t, h.Subscribed(e.channel), "before any Subscribe")

		s, err := h.Subscribe(t.Context(), e.channel)
		require.NoError(t, err)
		require.True(t, h.Subscribed(e.channel), "held")
		require.Equal(t, map[string]int64{"latchkey.notify.subscriptions": 1, "latchkey.notify.lingering": 0}, meter.collect(t))

		s.Release()
		require.True(t, h.Subscribed(e.channel), "lingering")
		require.EqualValues(t, 1, e.numsub(t), "the lingering subscription is gone from the server")
		require.Equal(t, []string{e.channel}, h.Channels())
		require.Equal(t, map[string]int64{"latchkey.notify.subscriptions": 1, "latchkey.notify.lingering": 1}, meter.collect(t))

		s, err = h.Subscribe(t.Context(), e.channel)
		require.NoError(t, err)
		require.Equal(t, map[string]int64{"latchkey.notify.subscriptions": 1, "latchkey.notify.lingering": 0}, meter.collect(t),
			"a waiter took the channel over")
		s.Release()

		h.Close()
		require.False(t, h.Subscribed(e.channel), "after Close")
	})
}

// A waiter who takes a lingering channel over cancels the linger: its
// subscription is not ended under it when the linger would have run out.
// The waiter's Wait is the window of observation: an ended round would wake
// it (WokenAll) and a message after it would reach nobody.
func TestTakeoverCancelsLinger(t *testing.T) {
	forEachMode(t, func(t *testing.T, e modeEnv) {
		const linger = 100 * time.Millisecond
		h := newHub(t, e.client, Options{Mode: e.mode, Linger: linger})
		s, err := h.Subscribe(t.Context(), e.channel)
		require.NoError(t, err)
		s.Release()
		s, err = h.Subscribe(t.Context(), e.channel)
		require.NoError(t, err)
		defer s.Release()

		mark := s.Mark()
		w, err := s.Wait(t.Context(), mark, 3*linger)
		require.NoError(t, err)
		require.Equal(t, TimedOut, w, "the subscription changed under its waiter")
		require.EqualValues(t, 1, e.numsub(t), "unsubscribed under a waiter when the linger ran out")
		e.requireMessageWakes(t, s, mark, "after the linger would have run out")
	})
}

// Once a linger passes with nobody subscribing again, the channel is
// unsubscribed on the server and gone from the hub, and the next waiter
// subscribes anew.
func TestLingerEndsWithUnsubscribe(t *testing.T) {
	forEachMode(t, func(t *testing.T, e modeEnv) {
		const linger = 300 * time.Millisecond
		h := newHub(t, e.client, Options{Mode: e.mode, Linger: linger})
		s, err := h.Subscribe(t.Context(), e.channel)
		require.NoError(t, err)

		released := time.Now() // before Release, which starts the linger
		s.Release()
		requireNumsubEventually(t, e.node, e.sharded(), e.channel, 0)
		require.GreaterOrEqual(t, time.Since(released), linger, "unsubscribed before the linger was over")
		// The channel loop leaves the hub after its UNSUBSCRIBE was answered.
		require.Eventually(t, func() bool { return len(h.Channels()) == 0 }, eventually, tick, "channels: %v", h.Channels())
		require.False(t, h.Subscribed(e.channel))
		requireHubGoroutines(t, 0, "the channel's goroutine outlived its subscription")

		before := e.subscribes(t)
		s, err = h.Subscribe(t.Context(), e.channel)
		require.NoError(t, err)
		require.EqualValues(t, 1, e.subscribes(t)-before, "a waiter after the linger subscribes again")
		require.EqualValues(t, 1, e.numsub(t))
		e.requireMessageWakes(t, s, s.Mark(), "subscribed again")
		s.Release()
	})
}

// A wake-up that nobody holding the channel could claim is not kept for the
// next waiter: neither the one pending at the last Release, nor a message or
// a PassOn while the channel lingers. The waiter who takes the channel over
// starts from its own Mark, and messages after it wake it as usual.
func TestLingerKeepsNoWakeUpForTheNextWaiter(t *testing.T) {
	forEachMode(t, func(t *testing.T, e modeEnv) {
		tap := newTap(e.client)
		meter := newFakeMeter()
		h := newHub(t, tap, Options{Mode: e.mode, Meter: meter})
		s, err := h.Subscribe(t.Context(), e.channel)
		require.NoError(t, err)

		// Pending when the last waiter leaves: dropped with it.
		require.EqualValues(t, 1, e.publish(t, "released"))
		tap.requireHandled(t, e.channel, 1)
		s.Release()
		// While lingering: the server still delivers (so the hub handles
		// the message), but nobody claims it.
		require.EqualValues(t, 1, e.publish(t, "released"), "the lingering subscription is gone from the server")
		tap.requireHandled(t, e.channel, 2)
		s.PassOn() // a released waiter's hand-over finds nobody either
		require.EqualValues(t, 2, meter.counter("latchkey.notify.wakeups.received"))
		require.EqualValues(t, 1, meter.counter("latchkey.notify.wakeups.unclaimed"), "the message during the linger")
		// A broadcast during the linger must not confuse a later Mark.
		require.EqualValues(t, 1, e.publish(t, WakeAllPayload))
		tap.requireHandled(t, e.channel, 3)

		before := e.subscribes(t)
		s, err = h.Subscribe(t.Context(), e.channel)
		require.NoError(t, err)
		require.EqualValues(t, 0, e.subscribes(t)-before, "the lingering subscription was not reused")
		mark := s.Mark()
		w, err := s.Wait(t.Context(), mark, 0)
		require.NoError(t, err)
		require.Equal(t, TimedOut, w, "a wake-up from before the Subscribe was taken for one after the Mark")

		e.requireMessageWakes(t, s, mark, "a message after the takeover")
		require.EqualValues(t, 1, meter.counter("latchkey.notify.wakeups.unclaimed"))
		s.Release()
	})
}

// Close ends a lingering subscription at once: unsubscribed on the server
// and no goroutine left, before Close returns. A linger short enough to
// end while Close runs must not leave its timer's callback behind either.
func TestCloseEndsLinger(t *testing.T) {
	forEachMode(t, func(t *testing.T, e modeEnv) {
		const linger = time.Minute // far longer than the test: Close must not wait for it
		h := NewHub(e.client, Options{Mode: e.mode, Linger: linger})
		s, err := h.Subscribe(t.Context(), e.channel)
		require.NoError(t, err)
		s.Release()
		require.EqualValues(t, 1, e.numsub(t))
		requireHubGoroutines(t, 1, "the lingering channel's loop")

		start := time.Now()
		h.Close()
		// Not a claim about speed: a Close that waited for the linger's
		// timer instead of stopping it would take the whole linger.
		require.Less(t, time.Since(start), linger/2, "Close waited for the linger to end")
		require.EqualValues(t, 0, e.numsub(t), "still subscribed after Close returned")
		require.Empty(t, h.Channels())
		requireHubGoroutines(t, 0, "a hub goroutine outlived Close")

		for i := range 50 {
			h := NewHub(e.client, Options{Mode: e.mode, Linger: time.Millisecond})
			s, err := h.Subscribe(t.Context(), e.channel)
			require.NoError(t, err)
			s.Release()
			h.Close()
			requireHubGoroutines(t, 0, fmt.Sprintf("round %d: a hub goroutine outlived Close", i))
			require.EqualValues(t, 0, e.numsub(t), "round %d: still subscribed after Close returned", i)
		}
	})
}

// logRecorder is a slog handler that hands each record's message to a
// channel, so a test can await what the hub logs.
type logRecorder chan string

func (r logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (r logRecorder) Handle(_ context.Context, rec slog.Record) error {
	r <- rec.Message
	return nil
}
func (r logRecorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r logRecorder) WithGroup(string) slog.Handler      { return r }

// rueidis makes a lost subscription again after a reconnect whether or not
// anyone holds it: lingering, that is logged and counted as always, and the
// waiter who takes the channel over afterwards gets its messages.
func TestResubscriptionDuringLinger(t *testing.T) {
	for _, k := range killers {
		t.Run(k.name, func(t *testing.T) {
			c := newClient(t, redisAddr)
			admin := newClient(t, redisAddr)
			logs := make(logRecorder, 10)
			h := newHub(t, c, Options{Logger: slog.New(logs)})
			ch := uniqueChannel(t)
			s := subscribeN(t, h, ch, 1)[0]
			staleMark := s.Mark()
			s.Release()

			k.kill(t, admin, c)
			require.Equal(t, "latchkey: subscription lost and made again", await(t, logs, "the resubscription to be logged"))
			require.EqualValues(t, 1, numsub(t, admin, ch), "the resubscription's confirmation came before the server counted it")
			require.Equal(t, []string{ch}, h.Channels())

			before := commandCalls(t, admin, "subscribe")
			s, err := h.Subscribe(t.Context(), ch)
			require.NoError(t, err)
			t.Cleanup(s.Release)
			require.EqualValues(t, 0, commandCalls(t, admin, "subscribe")-before, "the resubscribed lingering subscription was not reused")
			w, err := s.Wait(t.Context(), staleMark, 0)
			require.NoError(t, err)
			require.Equal(t, WokenAll, w, "a Mark from before the loss must not wait")

			// The log came after the epoch's bump, so this Mark is after it.
			mark := s.Mark()
			require.EqualValues(t, 1, publish(t, admin, ch))
			w, err = s.Wait(t.Context(), mark, longWait)
			require.NoError(t, err)
			require.Equal(t, WokenOne, w)
			require.Empty(t, logs, "more than one resubscription logged")
		})
	}
}

// A lingering sharded subscription whose slot moves away ends with the old
// master's sunsubscribe; nobody wants it, so the hub does not follow the
// slot but drops the channel, and the next waiter subscribes on the new
// owner.
func TestLingeringSubscriptionEndsWithItsSlot(t *testing.T) {
	cl := migrationCluster(t)
	cc := newClient(t, cl.Addrs...)
	const linger = time.Minute // far longer than the test: the Close below must not wait for it
	h := newHub(t, cc, Options{Mode: Sharded, Linger: linger})
	channel := "{linger}:" + uniqueChannel(t)
	slot, from, to := migrationTarget(t, cl, channel)
	fromNode, toNode := newNodeClient(t, from), newNodeClient(t, to)

	s := subscribeN(t, h, channel, 1)[0]
	s.Release()
	require.True(t, h.Subscribed(channel))
	require.NoError(t, cl.MigrateSlot(t.Context(), slot, to))

	require.Eventually(t, func() bool { return len(h.Channels()) == 0 }, eventually, tick, "channels: %v", h.Channels())
	require.False(t, h.Subscribed(channel))
	requireHubGoroutines(t, 0, "the ended channel's goroutine is still there")
	for _, node := range []rueidis.Client{fromNode, toNode} {
		n, err := numsubOf(t.Context(), node, true, channel)
		require.NoError(t, err)
		require.Zero(t, n, "a subscription nobody wants followed the slot")
	}

	resubscribed(t, h, channel) // rueidis may need a slot-map refresh first
	s = subscribeN(t, h, channel, 1)[0]
	requireServedBy(t, fromNode, toNode, channel)
	requireWakesOneEach(t, cc, []*Subscription{s}, channel)

	// The ended channel's linger timer went with it: Close does not wait
	// for it (not a claim about speed; waiting would take most of the linger).
	start := time.Now()
	h.Close()
	require.Less(t, time.Since(start), linger/2, "Close waited for an ended channel's linger")
}

// Subscribed is false while the server has not confirmed the subscription:
// a Subscribe then would wait.
func TestSubscribedIsFalseUntilConfirmed(t *testing.T) {
	tap := newTap(newClient(t, redisAddr))
	tap.gate = make(chan struct{})
	h := newHub(t, tap, Options{})
	ch := uniqueChannel(t)

	done := pendingSubscribe(t, h, ch)
	require.False(t, h.Subscribed(ch), "pending, not confirmed")
	close(tap.gate)
	require.NoError(t, await(t, done, "the Subscribe to be confirmed"))
	require.True(t, h.Subscribed(ch), "confirmed and lingering")
	require.False(t, h.Subscribed(fmt.Sprintf("%s:other", ch)))
}
