package notify

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"
)

// Subscribe returns only once the server has confirmed the subscription, so
// the server must count the subscriber right away, with no waiting.
func TestSubscribeReturnsAfterServerConfirmed(t *testing.T) {
	admin := newClient(t, redisAddr)
	h := newHub(t, newClient(t, redisAddr), Options{})

	for range 20 {
		ch := uniqueChannel(t)
		s, err := h.Subscribe(t.Context(), ch)
		require.NoError(t, err)
		require.EqualValues(t, 1, numsub(t, admin, ch), "Subscribe returned before the server counted the subscription")
		require.Equal(t, ch, s.Channel())
		s.Release()
	}
}

// Waiters on one channel share one server subscription, which the last
// Release ends (without a linger; linger_test.go has the lingering kind).
func TestSubscriptionIsSharedAndReferenceCounted(t *testing.T) {
	admin := newClient(t, redisAddr)
	h := newHub(t, newClient(t, redisAddr), Options{Linger: noLinger})
	ch := uniqueChannel(t)

	subscribesBefore := commandCalls(t, admin, "subscribe")
	subs := subscribeN(t, h, ch, 10)
	require.EqualValues(t, 1, commandCalls(t, admin, "subscribe")-subscribesBefore, "10 waiters must share one SUBSCRIBE")
	require.EqualValues(t, 1, numsub(t, admin, ch))
	require.Equal(t, []string{ch}, h.Channels())

	for _, s := range subs[:9] {
		s.Release()
	}
	subs[0].Release() // idempotent: must not count as the tenth waiter leaving
	require.Equal(t, []string{ch}, h.Channels(), "one waiter is left")

	// The subscription is still live: a message reaches the remaining waiter.
	last := subs[9]
	mark := last.Mark()
	require.EqualValues(t, 1, publish(t, admin, ch))
	w, err := last.Wait(t.Context(), mark, longWait)
	require.NoError(t, err)
	require.Equal(t, WokenOne, w)
	require.EqualValues(t, 1, numsub(t, admin, ch))

	last.Release()
	last.Release()
	requireNumsubEventually(t, admin, false, ch, 0)
	require.Eventually(t, func() bool { return len(h.Channels()) == 0 }, eventually, tick, "channels: %v", h.Channels())

	// A fresh subscription after all that starts from a clean count.
	s, err := h.Subscribe(t.Context(), ch)
	require.NoError(t, err)
	require.EqualValues(t, 1, numsub(t, admin, ch))
	s.Release()
	requireNumsubEventually(t, admin, false, ch, 0)
}

// One message wakes exactly one waiter; the others keep waiting.
func TestMessageWakesExactlyOneWaiter(t *testing.T) {
	c := newClient(t, redisAddr)
	tap := newTap(c)
	h := newHub(t, tap, Options{})
	ch := uniqueChannel(t)

	const waiters, messages = 6, 5
	subs := subscribeN(t, h, ch, waiters)
	results := startWaiters(t, subs, longWait)

	woken := make(map[int]bool)
	for k := 1; k <= messages; k++ {
		require.EqualValues(t, 1, publish(t, c, ch), "one subscribed connection for %d waiters", waiters)
		r := await(t, results, fmt.Sprintf("the waiter woken by message %d", k))
		require.NoError(t, r.err)
		require.Equal(t, WokenOne, r.wake)
		require.False(t, woken[r.id], "waiter %d woken twice", r.id)
		woken[r.id] = true
		tap.requireHandled(t, ch, k)
		require.Empty(t, results, "message %d woke more than one waiter", k)
	}

	// The last waiter got no message: only the hub closing ends its wait.
	h.Close()
	r := await(t, results, "the last waiter to see the hub close")
	require.ErrorIs(t, r.err, ErrClosed)
	require.False(t, woken[r.id])
}

// A message that finds nobody waiting leaves one wake-up, never more.
func TestMessageWithoutWaiterLeavesOnePermit(t *testing.T) {
	c := newClient(t, redisAddr)
	tap := newTap(c)
	h := newHub(t, tap, Options{})
	ch := uniqueChannel(t)
	s := subscribeN(t, h, ch, 1)[0]
	mark := s.Mark()

	require.EqualValues(t, 1, publish(t, c, ch))
	tap.requireHandled(t, ch, 1)
	w, err := s.Wait(t.Context(), mark, 0)
	require.NoError(t, err)
	require.Equal(t, WokenOne, w, "the wake-up must be kept for a later Wait")
	w, err = s.Wait(t.Context(), mark, 0)
	require.NoError(t, err)
	require.Equal(t, TimedOut, w, "the wake-up was taken")

	require.EqualValues(t, 1, publish(t, c, ch))
	require.EqualValues(t, 1, publish(t, c, ch))
	tap.requireHandled(t, ch, 3)
	w, err = s.Wait(t.Context(), mark, longWait)
	require.NoError(t, err)
	require.Equal(t, WokenOne, w)
	w, err = s.Wait(t.Context(), mark, 50*time.Millisecond)
	require.NoError(t, err)
	require.Equal(t, TimedOut, w, "two messages without a waiter must leave one wake-up, not two")
}

// killers end the server side of the hub's subscribed connection. rueidis
// uses RESP3, where the subscription shares its first pipeline connection
// with ordinary commands such as CLIENT ID. Both ways work against Redis 7.0:
// RESP3 subscribers count as TYPE pubsub too.
var killers = []struct {
	name string
	kill func(t *testing.T, admin, hubClient rueidis.Client)
}{
	{"type-pubsub", func(t *testing.T, admin, _ rueidis.Client) {
		n, err := admin.Do(t.Context(), admin.B().ClientKill().TypePubsub().Build()).AsInt64()
		require.NoError(t, err)
		require.GreaterOrEqual(t, n, int64(1), "CLIENT KILL TYPE pubsub killed nothing")
	}},
	{"id-from-client-list", func(t *testing.T, admin, hubClient rueidis.Client) {
		id := subscribedConnection(t, admin, hubClient)
		n, err := admin.Do(t.Context(), admin.B().ClientKill().Id(id).Build()).AsInt64()
		require.NoError(t, err)
		require.EqualValues(t, 1, n)
	}},
}

// subscribedConnection returns the server-side id of hubClient's subscribed
// connection, checking in CLIENT LIST that it is the one with the
// subscription.
func subscribedConnection(t *testing.T, admin, hubClient rueidis.Client) int64 {
	t.Helper()
	id, err := hubClient.Do(t.Context(), hubClient.B().ClientId().Build()).AsInt64()
	require.NoError(t, err)
	require.Contains(t, subscribedClientIDs(t, admin), id, "CLIENT ID answered on a connection without the subscription")
	return id
}

// subscribedClientIDs lists the connections CLIENT LIST shows with classic or
// sharded subscriptions.
func subscribedClientIDs(t *testing.T, admin rueidis.Client) []int64 {
	t.Helper()
	list, err := admin.Do(t.Context(), admin.B().ClientList().Build()).ToString()
	require.NoError(t, err)
	list = strings.TrimPrefix(list, "txt:") // RESP3 verbatim string
	var ids []int64
	for line := range strings.Lines(list) {
		fields := make(map[string]string)
		for _, f := range strings.Fields(line) {
			k, v, _ := strings.Cut(f, "=")
			fields[k] = v
		}
		if fields["sub"] != "0" || fields["ssub"] != "0" {
			id, err := strconv.ParseInt(fields["id"], 10, 64)
			require.NoError(t, err, "CLIENT LIST line %q", line)
			ids = append(ids, id)
		}
	}
	return ids
}

// A lost subscription wakes every waiter (WokenAll); rueidis resubscribes and
// messages wake one waiter again.
func TestLostSubscriptionWakesAllWaiters(t *testing.T) {
	for _, k := range killers {
		t.Run(k.name, func(t *testing.T) {
			c := newClient(t, redisAddr)
			admin := newClient(t, redisAddr)
			h := newHub(t, c, Options{})
			ch := uniqueChannel(t)
			subs := subscribeN(t, h, ch, 5)
			staleMark := subs[0].Mark()
			results := startWaiters(t, subs, longWait)

			k.kill(t, admin, c)
			for range subs {
				r := await(t, results, "waiters to see the subscription lost")
				require.NoError(t, r.err)
				require.Equal(t, WokenAll, r.wake)
			}
			// A Mark from before the loss makes even a non-blocking Wait say so.
			w, err := subs[0].Wait(t.Context(), staleMark, 0)
			require.NoError(t, err)
			require.Equal(t, WokenAll, w)

			// rueidis resubscribed; the hub still has one channel.
			requireNumsubEventually(t, admin, false, ch, 1)
			require.Equal(t, []string{ch}, h.Channels())

			// A new waiter is woken by a message. A Mark taken before the
			// client has processed the resubscription's confirmation can
			// still see that bump: per the protocol, look again.
			s := subscribeN(t, h, ch, 1)[0]
			mark := s.Mark()
			require.EqualValues(t, 1, publish(t, admin, ch))
			for bumps := 0; ; bumps++ {
				require.Less(t, bumps, 5, "too many WokenAll after one resubscription")
				w, err = s.Wait(t.Context(), mark, longWait)
				require.NoError(t, err)
				if w != WokenAll {
					break
				}
				mark = s.Mark()
			}
			require.Equal(t, WokenOne, w)

			// And the hub's client works for ordinary commands again.
			pong, err := c.Do(t.Context(), c.B().Ping().Build()).ToString()
			require.NoError(t, err)
			require.Equal(t, "PONG", pong)
		})
	}
}

func TestWaitBound(t *testing.T) {
	c := newClient(t, redisAddr)
	tap := newTap(c)
	h := newHub(t, tap, Options{})
	ch := uniqueChannel(t)
	s := subscribeN(t, h, ch, 1)[0]
	mark := s.Mark()

	const bound = 50 * time.Millisecond
	start := time.Now()
	w, err := s.Wait(t.Context(), mark, bound)
	require.NoError(t, err)
	require.Equal(t, TimedOut, w)
	require.GreaterOrEqual(t, time.Since(start), bound, "Wait returned before its bound")

	for _, max := range []time.Duration{0, -time.Second} {
		w, err = s.Wait(t.Context(), mark, max)
		require.NoError(t, err)
		require.Equal(t, TimedOut, w, "max %v without a pending wake-up", max)
	}
	// Either kind of non-blocking Wait takes a pending wake-up.
	for i, max := range []time.Duration{0, -time.Second} {
		require.EqualValues(t, 1, publish(t, c, ch))
		tap.requireHandled(t, ch, i+1)
		w, err = s.Wait(t.Context(), mark, max)
		require.NoError(t, err)
		require.Equal(t, WokenOne, w, "max %v with a pending wake-up", max)
	}
	w, err = s.Wait(t.Context(), mark, 0)
	require.NoError(t, err)
	require.Equal(t, TimedOut, w)
}

func TestWaitEndsWithContext(t *testing.T) {
	c := newClient(t, redisAddr)
	tap := newTap(c)
	h := newHub(t, tap, Options{})
	ch := uniqueChannel(t)
	s := subscribeN(t, h, ch, 1)[0]

	t.Run("cancel cause", func(t *testing.T) {
		cause := errors.New("caller gave up")
		ctx, cancel := context.WithCancelCause(context.Background())
		done := make(chan waitResult, 1)
		mark := s.Mark()
		go func() {
			w, err := s.Wait(ctx, mark, longWait)
			done <- waitResult{wake: w, err: err}
		}()
		cancel(cause)
		r := await(t, done, "Wait to see its context cancelled")
		require.ErrorIs(t, r.err, cause)
		require.Zero(t, r.wake)
	})
	t.Run("deadline", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		_, err := s.Wait(ctx, s.Mark(), longWait)
		require.ErrorIs(t, err, context.DeadlineExceeded)
	})
	t.Run("already cancelled", func(t *testing.T) {
		cause := errors.New("cancelled before waiting")
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(cause)
		_, err := s.Wait(ctx, s.Mark(), longWait)
		require.ErrorIs(t, err, cause)
	})
	// None of that disturbed the subscription.
	mark := s.Mark()
	require.EqualValues(t, 1, publish(t, c, ch))
	w, err := s.Wait(t.Context(), mark, longWait)
	require.NoError(t, err)
	require.Equal(t, WokenOne, w)
}

// A Subscribe whose context is done fails with the context's cause and
// leaves no subscription behind, on the server or in the hub, once the
// linger is over. The linger is short, so that the rounds given up before
// their confirmation linger and end too, within the test's patience.
func TestSubscribeWithCancelledContextLeavesNothing(t *testing.T) {
	admin := newClient(t, redisAddr)
	h := newHub(t, newClient(t, redisAddr), Options{Linger: shortLinger})
	cause := errors.New("caller gave up")

	var channels []string
	for range 20 {
		ch := uniqueChannel(t)
		channels = append(channels, ch)
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(cause)
		s, err := h.Subscribe(ctx, ch)
		require.ErrorIs(t, err, cause)
		require.Nil(t, s)
	}

	// Cancelled while in flight, at whatever point the round has reached:
	// success and the cause are both fine, a leftover subscription is not.
	for range 50 {
		ch := uniqueChannel(t)
		channels = append(channels, ch)
		ctx, cancel := context.WithCancelCause(context.Background())
		done := make(chan error, 1)
		go func() {
			s, err := h.Subscribe(ctx, ch)
			if err == nil {
				s.Release()
			}
			done <- err
		}()
		cancel(cause)
		if err := await(t, done, "Subscribe to return"); err != nil {
			require.ErrorIs(t, err, cause)
		}
	}

	require.Eventually(t, func() bool { return len(h.Channels()) == 0 }, eventually, tick, "channels: %v", h.Channels())
	for _, ch := range channels {
		requireNumsubEventually(t, admin, false, ch, 0)
	}

	// The hub is still usable on those channels.
	s, err := h.Subscribe(t.Context(), channels[0])
	require.NoError(t, err)
	require.EqualValues(t, 1, numsub(t, admin, channels[0]))
	s.Release()
}

// PassOn hands a taken wake-up to another waiter without a new message.
func TestPassOnWakesAnotherWaiter(t *testing.T) {
	c := newClient(t, redisAddr)
	tap := newTap(c)
	h := newHub(t, tap, Options{})
	ch := uniqueChannel(t)
	subs := subscribeN(t, h, ch, 2)
	results := startWaiters(t, subs, longWait)

	require.EqualValues(t, 1, publish(t, c, ch))
	first := await(t, results, "the waiter woken by the message")
	require.NoError(t, first.err)
	require.Equal(t, WokenOne, first.wake)
	tap.requireHandled(t, ch, 1)
	require.Empty(t, results, "one message woke both waiters")

	// The waiter gives up without acting: the other one must be woken.
	// (The waiter goroutine has returned, so using its Subscription here is
	// not sharing it.)
	subs[first.id].PassOn()
	second := await(t, results, "the waiter woken by PassOn")
	require.NoError(t, second.err)
	require.Equal(t, WokenOne, second.wake)
	require.NotEqual(t, first.id, second.id)
	require.Equal(t, 1, tap.handledOn(ch), "the second wake-up came from PassOn, not a message")

	// Nothing is left pending; PassOn with nobody waiting keeps one wake-up,
	// and passing twice neither blocks nor keeps two.
	s := subs[0]
	mark := s.Mark()
	w, err := s.Wait(t.Context(), mark, 0)
	require.NoError(t, err)
	require.Equal(t, TimedOut, w)
	s.PassOn()
	s.PassOn()
	w, err = s.Wait(t.Context(), mark, 0)
	require.NoError(t, err)
	require.Equal(t, WokenOne, w)
	w, err = s.Wait(t.Context(), mark, 0)
	require.NoError(t, err)
	require.Equal(t, TimedOut, w)
}

func TestCloseWakesWaitersAndUnsubscribes(t *testing.T) {
	admin := newClient(t, redisAddr)
	h := newHub(t, newClient(t, redisAddr), Options{})

	var channels []string
	var subs []*Subscription
	for range 3 {
		ch := uniqueChannel(t)
		channels = append(channels, ch)
		subs = append(subs, subscribeN(t, h, ch, 2)...)
		require.EqualValues(t, 1, numsub(t, admin, ch))
	}
	results := startWaiters(t, subs, longWait)

	h.Close()
	// Close waits for its goroutines, which unsubscribe before they end, and
	// rueidis answers UNSUBSCRIBE only after the server processed it: no
	// waiting needed here.
	require.Empty(t, h.Channels())
	for _, ch := range channels {
		require.EqualValues(t, 0, numsub(t, admin, ch), "%q still subscribed after Close returned", ch)
	}
	for range subs {
		r := await(t, results, "waiters to see the hub close")
		require.ErrorIs(t, r.err, ErrClosed)
	}

	_, err := h.Subscribe(t.Context(), channels[0])
	require.ErrorIs(t, err, ErrClosed)
	_, err = h.Subscribe(t.Context(), uniqueChannel(t))
	require.ErrorIs(t, err, ErrClosed)
	_, err = subs[0].Wait(t.Context(), subs[0].Mark(), longWait)
	require.ErrorIs(t, err, ErrClosed)

	// Close is idempotent, also concurrently; Release after Close is harmless.
	closed := make(chan struct{})
	go func() {
		var wg sync.WaitGroup
		for range 3 {
			wg.Go(h.Close)
		}
		wg.Wait()
		h.Close()
		close(closed)
	}()
	await(t, closed, "repeated Close to return")
	for _, s := range subs {
		s.Release()
	}
	require.Empty(t, h.Channels())
}

// A Subscribe still waiting for the server's confirmation ends with ErrClosed
// when the hub closes.
func TestCloseEndsPendingSubscribe(t *testing.T) {
	admin := newClient(t, redisAddr)
	tap := newTap(newClient(t, redisAddr))
	tap.gate = make(chan struct{}) // never opened: no SUBSCRIBE is ever sent
	h := newHub(t, tap, Options{})
	ch := uniqueChannel(t)

	done := pendingSubscribe(t, h, ch)
	select {
	case err := <-done:
		require.FailNow(t, "Subscribe returned before the server confirmed", "err: %v", err)
	default:
	}

	h.Close()
	require.ErrorIs(t, await(t, done, "the pending Subscribe to return"), ErrClosed)
	require.Empty(t, h.Channels())
	require.EqualValues(t, 0, numsub(t, admin, ch))
}

// Waiters leaving and arriving concurrently make the hub unsubscribe and
// resubscribe the same channel (or, lingering, end the linger while waiters
// take it over); whoever is subscribed at the end must get the messages.
func TestReleaseThenReviveRace(t *testing.T) {
	// A linger as short as the revivals' pace makes its timer race them.
	for _, linger := range []time.Duration{noLinger, time.Millisecond} {
		t.Run(fmt.Sprintf("linger=%v", linger), func(t *testing.T) {
			testReleaseThenReviveRace(t, Options{Linger: linger})
		})
	}
}

func testReleaseThenReviveRace(t *testing.T, opts Options) {
	c := newClient(t, redisAddr)
	admin := newClient(t, redisAddr)
	h := newHub(t, c, opts)
	ch := uniqueChannel(t)

	const rounds, goroutines, perGoroutine = 200, 4, 3
	start := time.Now()
	for i := range rounds {
		var wg sync.WaitGroup
		errs := make(chan error, goroutines*perGoroutine)
		for range goroutines {
			wg.Go(func() {
				for range perGoroutine {
					s, err := h.Subscribe(t.Context(), ch)
					if err != nil {
						errs <- err
						return
					}
					s.Release()
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err, "round %d", i)
		}

		s, err := h.Subscribe(t.Context(), ch)
		require.NoError(t, err, "round %d", i)
		mark := s.Mark()
		require.EqualValues(t, 1, publish(t, admin, ch), "round %d: subscribed connections", i)
		w, err := s.Wait(t.Context(), mark, longWait)
		require.NoError(t, err, "round %d", i)
		require.Equal(t, WokenOne, w, "round %d", i)
		s.Release()
	}
	t.Logf("%d rounds in %s", rounds, time.Since(start))

	requireNumsubEventually(t, admin, false, ch, 0)
	require.Eventually(t, func() bool { return len(h.Channels()) == 0 }, eventually, tick, "channels: %v", h.Channels())
}

// A waiter arriving just after the last one left revives the subscription.
// The round was stopped on purpose, not lost, so reviving must not pay the
// failure backoff: with a huge RetryBackoff, Subscribe must still return well
// before it. Without a linger, so that the round is indeed stopped.
func TestReviveAfterReleaseSkipsRetryBackoff(t *testing.T) {
	admin := newClient(t, redisAddr)
	const backoff = time.Minute
	h := newHub(t, newClient(t, redisAddr), Options{RetryBackoff: backoff, Linger: noLinger})
	ch := uniqueChannel(t)

	for i := range 5 {
		s, err := h.Subscribe(t.Context(), ch)
		require.NoError(t, err)
		s.Release() // stops the round at once: the next Subscribe revives it

		ctx, cancel := context.WithTimeout(t.Context(), backoff/2)
		s, err = h.Subscribe(ctx, ch)
		cancel()
		require.NoError(t, err, "round %d: Subscribe after Release waited for RetryBackoff", i)
		require.EqualValues(t, 1, numsub(t, admin, ch))
		mark := s.Mark()
		require.EqualValues(t, 1, publish(t, admin, ch))
		w, err := s.Wait(t.Context(), mark, longWait)
		require.NoError(t, err)
		require.Equal(t, WokenOne, w)
		s.Release()
	}
}

// The hub's message handler runs behind rueidis' connection reader; if it
// blocked, the reader would stall and so would every command on that
// connection.
func TestMessageFloodDoesNotStallTheConnection(t *testing.T) {
	c := newClient(t, redisAddr)
	admin := newClient(t, redisAddr)
	tap := newTap(c)
	h := newHub(t, tap, Options{})
	ch := uniqueChannel(t)
	s := subscribeN(t, h, ch, 1)[0]
	mark := s.Mark()

	// The commands below must share the subscribed connection to prove
	// anything; rueidis (RESP3) puts both on its first pipeline.
	subscribedConnection(t, admin, c)

	const messages = 1000
	cmds := make(rueidis.Commands, 0, messages)
	for i := range messages {
		cmds = append(cmds, admin.B().Publish().Channel(ch).Message(strconv.Itoa(i)).Build())
	}
	for i, r := range admin.DoMulti(t.Context(), cmds...) {
		n, err := r.AsInt64()
		require.NoError(t, err)
		require.EqualValues(t, 1, n, "message %d", i)
	}

	// The server writes the PONG after all the messages on that connection,
	// so it comes back only once the reader got past them.
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	start := time.Now()
	pong, err := c.Do(ctx, c.B().Ping().Build()).ToString()
	require.NoError(t, err, "the connection stalled behind %d messages", messages)
	require.Equal(t, "PONG", pong)
	t.Logf("PING after %d messages took %s", messages, time.Since(start))

	tap.requireHandled(t, ch, messages)
	w, err := s.Wait(t.Context(), mark, longWait)
	require.NoError(t, err)
	require.Equal(t, WokenOne, w)
	w, err = s.Wait(t.Context(), mark, 0)
	require.NoError(t, err)
	require.Equal(t, TimedOut, w, "%d messages without a waiter must leave one wake-up", messages)
}

// Ending a round must not stall its connection either. When a round ends
// (the last Release without a linger, a linger running out, Close), rueidis
// stops reading the round's 16-message buffer and calls the hub's return
// hook, which unsubscribes. Had the hook waited there for the UNSUBSCRIBE's
// reply, messages still arriving would fill that buffer, rueidis'
// connection reader would block handing them over, and the reply would sit
// behind it: every command on the connection (lock scripts, releases,
// watchdog renewals) would wait out UnsubscribeTimeout.
func TestUnsubscribeUnderFloodDoesNotStallTheConnection(t *testing.T) {
	c := newClient(t, redisAddr)
	admin := newClient(t, redisAddr)
	h := newHub(t, c, Options{Linger: noLinger}) // each Release ends the round
	ch := uniqueChannel(t)

	ctx, stop := context.WithCancel(t.Context())
	var publishers sync.WaitGroup
	defer publishers.Wait()
	defer stop()
	// Pipelined bursts, so that the server writes many messages at a time:
	// one PUBLISH per round trip would not outpace an UNSUBSCRIBE's reply
	// on a slow machine.
	const burst = 64
	var published atomic.Int64
	for range 8 {
		publishers.Go(func() {
			cmds := make(rueidis.Commands, burst)
			for ctx.Err() == nil {
				for i := range cmds {
					cmds[i] = admin.B().Publish().Channel(ch).Message("released").Build()
				}
				admin.DoMulti(ctx, cmds...)
				published.Add(burst)
			}
		})
	}

	// A bound, not a measurement: the PINGs take milliseconds unless one
	// waits out UnsubscribeTimeout (2 s by default) behind the stalled reader.
	const bound = 500 * time.Millisecond
	const rounds, pings = 10, 20
	var worst time.Duration
	for i := range rounds {
		s, err := h.Subscribe(t.Context(), ch)
		require.NoError(t, err, "round %d", i)
		if i == 0 {
			// The PINGs must share the subscribed connection to prove
			// anything; rueidis (RESP3) puts both on its first pipeline.
			subscribedConnection(t, admin, c)
		}
		s.Release()
		for range pings {
			start := time.Now()
			require.NoError(t, c.Do(t.Context(), c.B().Ping().Build()).Error(), "round %d", i)
			worst = max(worst, time.Since(start))
		}
	}
	t.Logf("worst PING over %d unsubscribes under a flood: %s; %d published", rounds, worst, published.Load())
	require.Less(t, worst, bound, "a PING waited behind an UNSUBSCRIBE under a flood")
}

// holdClient wraps a client for the hub and holds its handler back at the
// first message: it reports the message on held, then waits for release
// before the hub sees it. rueidis can so be caught handing over a message
// it had already read when the round it belongs to was stopped.
type holdClient struct {
	rueidis.Client
	held    chan struct{}
	release chan struct{}
	once    sync.Once
}

func (c *holdClient) Receive(ctx context.Context, subscribe rueidis.Completed, fn func(rueidis.PubSubMessage)) error {
	return c.Client.Receive(ctx, subscribe, func(m rueidis.PubSubMessage) {
		c.once.Do(func() {
			close(c.held)
			<-c.release
		})
		fn(m)
	})
}

// A message of a round that was stopped is nobody's: the waiters it was
// published for have all left (that is why the round stopped), and one who
// subscribed since, waiting for the next round's confirmation, must not
// take it for an event after its Mark. rueidis may still hand such a
// message over after the stop; here it holds it while the last waiter
// leaves and a newcomer subscribes.
func TestMessageOfStoppedRoundWakesNoLaterWaiter(t *testing.T) {
	admin := newClient(t, redisAddr)
	hc := &holdClient{Client: newClient(t, redisAddr), held: make(chan struct{}), release: make(chan struct{})}
	h := newHub(t, hc, Options{Linger: noLinger}) // the last Release stops the round
	ch := uniqueChannel(t)

	s, err := h.Subscribe(t.Context(), ch)
	require.NoError(t, err)
	require.EqualValues(t, 1, publish(t, admin, ch))
	await(t, hc.held, "the hub's handler to get the message")
	s.Release()

	// The newcomer waits for the next round, which starts only once the
	// stopped one returned, so its Subscribe is pending until release.
	type result struct {
		s   *Subscription
		err error
	}
	done := make(chan result, 1)
	go func() {
		s, err := h.Subscribe(context.Background(), ch)
		done <- result{s, err}
	}()
	require.Eventually(t, func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		c := h.chans[ch]
		return c != nil && c.refs == 1
	}, eventually, tick, "the newcomer to join the channel")

	close(hc.release)
	res := await(t, done, "the newcomer's Subscribe")
	require.NoError(t, res.err)
	defer res.s.Release()
	// The message was handled before the stopped round's Receive returned,
	// so before the newcomer's round began: a wake-up it left is pending now.
	w, err := res.s.Wait(t.Context(), res.s.Mark(), 0)
	require.NoError(t, err)
	require.Equal(t, TimedOut, w, "a message published before the Subscribe woke the newcomer")

	mark := res.s.Mark()
	require.EqualValues(t, 1, publish(t, admin, ch))
	w, err = res.s.Wait(t.Context(), mark, longWait)
	require.NoError(t, err)
	require.Equal(t, WokenOne, w, "a message after the Subscribe")
}
