// Package notify shares Redis pub/sub subscriptions among the goroutines of one
// process that wait for the same event.
//
// A Hub keeps at most one subscription per channel, reference counted by the
// waiters that hold a Subscription to it; the last Release unsubscribes. Each
// message on a channel wakes exactly one local waiter, and every
// (re)subscription wakes all of them, because messages published while a
// subscription was down are lost and nobody can tell which waiter missed one.
//
// A message whose payload is exactly WakeAllPayload is a broadcast: it wakes
// every local waiter of the channel, as a resubscription does (Wait returns
// WokenAll, and a Mark taken before it no longer matches). A publisher uses
// it for an event that every waiter, in every process, must see once, such
// as a latch reaching zero: one message on a channel that all of them share.
//
// The hub is general: it knows channels, not locks. Package rlock composes it
// with the lock scripts. Its waiting protocol is:
//
//	sub, err := hub.Subscribe(ctx, channel) // returns once the server confirmed
//	defer sub.Release()
//	for {
//		mark := sub.Mark()       // before the check, so no event between the two is missed
//		if condition() { break } // e.g. try to acquire the lock
//		wake, err := sub.Wait(ctx, mark, bound)
//		...
//	}
//
// One goroutine runs per subscribed channel (it owns the rueidis Receive call);
// waiters add none of their own. Nothing the hub runs on rueidis' connection
// goroutine blocks.
package notify

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/rueidis"
	"go.opentelemetry.io/otel/metric"
)

// Mode selects the Redis pub/sub flavour.
type Mode int

const (
	// Classic uses SUBSCRIBE/UNSUBSCRIBE. On Cluster, a classic PUBLISH is
	// broadcast to every node, so prefer Sharded there.
	Classic Mode = iota
	// Sharded uses SSUBSCRIBE/SUNSUBSCRIBE (Redis 7+): a channel lives on the
	// shard that owns its slot. The publisher must use SPUBLISH.
	Sharded
)

// String names the mode as in logs: "classic" or "sharded".
func (m Mode) String() string {
	if m == Sharded {
		return "sharded"
	}
	return "classic"
}

// Defaults for Options' zero values.
const (
	DefaultRetryBackoff       = 100 * time.Millisecond
	DefaultUnsubscribeTimeout = 2 * time.Second
)

// Options configures a Hub. The zero value is Classic mode with the defaults.
type Options struct {
	// Mode is the pub/sub flavour; it must match how publishers publish.
	Mode Mode
	// RetryBackoff is the pause before a subscription that ended while still
	// wanted is made again (rueidis already retries after reconnects; this
	// covers what it gives up on). Waiters keep their own bound meanwhile.
	RetryBackoff time.Duration
	// UnsubscribeTimeout bounds the UNSUBSCRIBE sent when the last waiter
	// leaves a channel or the hub closes.
	UnsubscribeTimeout time.Duration
	// Logger, when set, hears of each subscription lost under live waiters
	// and made again (Warn). Nil is silent.
	Logger *slog.Logger
	// Meter, when set, records wake-ups received and unclaimed and the
	// subscriptions open. Nil records nothing.
	Meter metric.Meter
}

// WakeAllPayload is the payload of a broadcast message: it wakes every local
// waiter of the channel (Wait returns WokenAll), where any other payload
// wakes one. Its value is part of the protocol between publishers and hubs
// (scripts publish it), so it never changes.
const WakeAllPayload = "all"

// ErrClosed is returned by Subscribe and Wait once the hub is closed.
var ErrClosed = errors.New("latchkey/notify: hub closed")

// ErrSubscribe wraps the reason a subscription could not be confirmed.
var ErrSubscribe = errors.New("latchkey/notify: subscribe failed")

// Hub multiplexes waiters onto one subscription per channel.
type Hub struct {
	client rueidis.Client
	opts   Options
	ctx    context.Context // ends when the hub closes; parent of every Receive
	cancel context.CancelFunc
	done   chan struct{}
	wg     sync.WaitGroup

	// mu guards everything below and every channel's state. It is held only
	// for a few field updates, never across I/O, so taking it from rueidis'
	// connection goroutine (the subscription hook) cannot stall that goroutine.
	mu     sync.Mutex
	closed bool
	chans  map[string]*channel

	meters *meters // nil without Options.Meter
}

// NewHub returns a hub that subscribes through client. It starts no goroutine
// until the first Subscribe.
func NewHub(client rueidis.Client, opts Options) *Hub {
	if opts.RetryBackoff <= 0 {
		opts.RetryBackoff = DefaultRetryBackoff
	}
	if opts.UnsubscribeTimeout <= 0 {
		opts.UnsubscribeTimeout = DefaultUnsubscribeTimeout
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &Hub{client: client, opts: opts, ctx: ctx, cancel: cancel, done: make(chan struct{}), chans: make(map[string]*channel)}
	if opts.Meter != nil {
		h.meters = newMeters(h, opts.Meter)
	}
	return h
}

// Close ends every subscription (unsubscribing on the server), makes every
// pending Subscribe and Wait return ErrClosed, and returns once the hub's
// goroutines have ended. It is safe to call more than once.
func (h *Hub) Close() {
	h.mu.Lock()
	if !h.closed {
		h.closed = true
		close(h.done)
	}
	h.mu.Unlock()
	h.cancel()
	h.wg.Wait()
	h.meters.close()
}

// Channels returns the channels the hub is subscribed to or subscribing to,
// for tests and metrics.
func (h *Hub) Channels() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]string, 0, len(h.chans))
	for name := range h.chans {
		out = append(out, name)
	}
	return out
}

// Subscribe joins the subscription to channel, creating it if needed, and
// returns once the server has confirmed it: an event published after
// Subscribe returns reaches this waiter (or, with wake-one, another one).
// The caller must Release the Subscription.
func (h *Hub) Subscribe(ctx context.Context, name string) (*Subscription, error) {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, ErrClosed
	}
	// A caller that already gave up gets its cause, not whichever of ctx and
	// a quick confirmation the select below happens to pick.
	if err := context.Cause(ctx); err != nil {
		h.mu.Unlock()
		return nil, err
	}
	ch := h.chans[name]
	if ch == nil {
		ch = newChannel(name)
		h.chans[name] = ch
		h.wg.Add(1)
		go h.run(ch)
	}
	ch.refs++
	r := ch.cur
	h.mu.Unlock()

	sub := &Subscription{hub: h, ch: ch}
	select {
	case <-r.ready:
		if r.err == nil {
			return sub, nil
		}
		sub.Release()
		select {
		case <-h.done:
			return nil, ErrClosed // the round failed because the hub closed
		default:
			return nil, r.err
		}
	case <-ctx.Done():
		sub.Release()
		return nil, context.Cause(ctx)
	case <-h.done:
		sub.Release()
		return nil, ErrClosed
	}
}

// run owns one channel's subscription for as long as anyone wants it. Each
// pass of the loop is one rueidis Receive call (a "round"); rueidis itself
// resubscribes after reconnects inside a round.
func (h *Hub) run(ch *channel) {
	defer h.wg.Done()
	for {
		h.mu.Lock()
		if ch.refs == 0 || h.closed {
			delete(h.chans, ch.name)
			h.mu.Unlock()
			return
		}
		r := ch.cur
		rctx, cancel := context.WithCancel(h.ctx)
		ch.stop = cancel
		h.mu.Unlock()

		start := time.Now()
		err := h.receive(rctx, ch, r)
		// rctx ends only when Release stopped the round or the hub closed:
		// the subscription was given up, not lost, so a waiter who arrived
		// since must not pay the failure backoff below.
		stopped := rctx.Err() != nil
		cancel()

		h.mu.Lock()
		ch.stop = nil
		if !r.finished {
			if err == nil {
				err = errors.New("subscription ended before the server confirmed it")
			}
			r.finish(fmt.Errorf("%w: %s: %w", ErrSubscribe, ch.name, err))
		}
		if ch.cur == r {
			ch.cur = newRound()
		}
		wanted := ch.refs > 0 && !h.closed
		if wanted {
			// The subscription ended under live waiters: whatever was
			// published since is lost, so let every waiter look again.
			// This is also how a sharded channel follows its slot to
			// another master: the old one ends the subscription with a
			// sunsubscribe push, rueidis returns from Receive with no
			// error, and the next round subscribes on the new owner.
			ch.bumpLocked()
		}
		h.mu.Unlock()
		if wanted && !stopped && h.opts.Logger != nil {
			h.opts.Logger.Warn("latchkey: subscription ended under waiters; subscribing again",
				"channel", ch.name, "mode", h.opts.Mode.String(), "error", err)
		}
		if wanted && !stopped && time.Since(start) < h.opts.RetryBackoff {
			select {
			case <-time.After(h.opts.RetryBackoff):
			case <-h.done:
			}
		}
	}
}

func (h *Hub) receive(ctx context.Context, ch *channel, r *round) error {
	var sub, unsub rueidis.Completed
	if h.opts.Mode == Sharded {
		sub = h.client.B().Ssubscribe().Channel(ch.name).Build()
	} else {
		sub = h.client.B().Subscribe().Channel(ch.name).Build()
	}
	onSubscription := func(s rueidis.PubSubSubscription) {
		if s.Kind != "subscribe" && s.Kind != "ssubscribe" {
			return
		}
		h.mu.Lock()
		again := r.finished // rueidis resubscribed after a reconnect
		ch.bumpLocked()
		r.finish(nil) // no-op after the first confirmation
		h.mu.Unlock()
		if again && h.opts.Logger != nil {
			// Not on rueidis' connection goroutine: a handler may block.
			h.wg.Add(1)
			go func() {
				defer h.wg.Done()
				h.opts.Logger.Warn("latchkey: subscription lost and made again", "channel", ch.name, "mode", h.opts.Mode.String())
			}()
		}
	}
	// Cancelling a Receive only stops rueidis delivering; the server keeps the
	// subscription until told otherwise. The return hook runs on the very
	// connection that subscribed, which is the only place an UNSUBSCRIBE
	// means anything.
	onReturn := func(err error, cc rueidis.CommandClient) error {
		if ctx.Err() == nil {
			return err // the connection or the server ended it; nothing to undo
		}
		if h.opts.Mode == Sharded {
			unsub = cc.B().Sunsubscribe().Channel(ch.name).Build()
		} else {
			unsub = cc.B().Unsubscribe().Channel(ch.name).Build()
		}
		uctx, cancel := context.WithTimeout(context.Background(), h.opts.UnsubscribeTimeout)
		defer cancel()
		_ = cc.Do(uctx, unsub).Error() // best effort: a dead connection has no subscription left
		return err
	}
	rctx := rueidis.WithOnReceiveReturnHook(rueidis.WithOnSubscriptionHook(ctx, onSubscription), onReturn)
	// A message that arrives after the last waiter left is dropped with the
	// channel; a publisher that must not lose it takes the listener out of
	// its audience before the unsubscribe (latchkey's leave script does).
	err := h.client.Receive(rctx, sub, func(m rueidis.PubSubMessage) {
		if m.Message == WakeAllPayload {
			// The mutex is held only for a few field updates: this does not
			// stall rueidis' connection goroutine.
			h.mu.Lock()
			ch.bumpLocked()
			h.mu.Unlock()
			h.meters.receivedAll()
			return
		}
		select {
		case ch.permit <- struct{}{}:
			h.meters.receivedOne(true)
		default: // a wake-up is already pending; one is enough to make progress
			h.meters.receivedOne(false)
		}
	})
	if ctx.Err() != nil {
		return nil
	}
	return err
}
