// Package notify shares Redis pub/sub subscriptions among the goroutines of one
// process that wait for the same event.
//
// A Hub keeps at most one subscription per channel, reference counted by the
// waiters that hold a Subscription to it. When the last one is released the
// subscription lingers (Options.Linger): a waiter who comes back within the
// linger reuses it without a round trip, and only a channel nobody wanted
// for that long is unsubscribed. A process that waits for the same lock
// again and again so pays one SUBSCRIBE per busy period, not one per wait.
// Each message on a channel wakes one local waiter, and every
// (re)subscription wakes all of them, because messages published while a
// subscription was down are lost and nobody can tell which waiter missed one.
// A message that comes while no waiter is in Wait is kept for the next, but
// a channel keeps one such wake-up at most: two messages then wake only one
// later waiter (enough for it to check again; rlock has one per channel).
// A message that arrives while nobody holds the channel (it is lingering) is
// dropped: no waiter is owed it, and a later one must not take it for an
// event after its Mark. So is one that rueidis hands over after the
// subscription was given up, even if a waiter has subscribed again since.
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
// A caller whose first step would be a cheap check that needs no
// subscription (a plain try of a lock that may well be free) can ask
// Subscribed first: when the subscription is already live, subscribing
// costs nothing, so it may as well subscribe and make its first check the
// one the protocol above needs.
//
// One goroutine runs per subscribed channel (it owns the rueidis Receive call),
// lingering ones included; waiters add none of their own. Nothing the hub runs
// on rueidis' connection goroutine blocks.
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
	// shard that owns its slot. The publisher must use SPUBLISH. After the
	// server ends a subscription (a slot moved, a failover), the hub
	// subscribes again only once a keyed read (EXISTS) of the channel's
	// name is no longer redirected, so that the subscription lands on the
	// slot's master, whose SPUBLISH counts it: a client whose ACL refuses
	// that read subscribes at once, wherever rueidis routes it.
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
	DefaultLinger             = 5 * time.Second
)

// Options configures a Hub. The zero value is Classic mode with the defaults.
type Options struct {
	// Mode is the pub/sub flavour; it must match how publishers publish.
	Mode Mode
	// RetryBackoff is the pause before a subscription that ended while still
	// wanted is made again (rueidis already retries after reconnects; this
	// covers what it gives up on). Waiters keep their own bound meanwhile.
	RetryBackoff time.Duration
	// UnsubscribeTimeout bounds the UNSUBSCRIBE sent when a channel's
	// linger ends or the hub closes.
	UnsubscribeTimeout time.Duration
	// Linger is how long a channel stays subscribed after its last waiter
	// left, for the next waiter to reuse at no cost: zero means
	// DefaultLinger (5 s), negative means no linger (the last Release
	// unsubscribes at once). A lingering subscription costs one server-side
	// subscription and one goroutine; Close ends it at once.
	Linger time.Duration
	// Logger, when set, hears of each subscription lost under live waiters
	// and made again (Warn). Nil is silent.
	Logger *slog.Logger
	// Meter, when set, records wake-ups received and unclaimed and the
	// subscriptions open and lingering. Nil records nothing.
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
	if opts.Linger == 0 {
		opts.Linger = DefaultLinger
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &Hub{client: client, opts: opts, ctx: ctx, cancel: cancel, done: make(chan struct{}), chans: make(map[string]*channel)}
	if opts.Meter != nil {
		h.meters = newMeters(h, opts.Meter)
	}
	return h
}

// Close ends every subscription, lingering ones included (unsubscribing on
// the server), makes every pending Subscribe and Wait return ErrClosed, and
// returns once the hub's goroutines have ended. It is safe to call more than
// once.
func (h *Hub) Close() {
	h.mu.Lock()
	if !h.closed {
		h.closed = true
		close(h.done)
	}
	h.mu.Unlock()
	// Cancelling h.ctx ends the lingering rounds with the others, and each
	// channel's run stops its linger's timer as it ends (a callback already
	// running is one of the hub's goroutines), so Close need not wait for a
	// linger to run out.
	h.cancel()
	h.wg.Wait()
	h.meters.close()
}

// Channels returns the channels the hub is subscribed to or subscribing to,
// for tests and metrics. Lingering channels are included: the server still
// counts their subscriptions.
func (h *Hub) Channels() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]string, 0, len(h.chans))
	for name := range h.chans {
		out = append(out, name)
	}
	return out
}

// counts returns how many channels Channels would list and how many of them
// are lingering, without building the list (the metrics' callback).
func (h *Hub) counts() (open, lingering int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, ch := range h.chans {
		if ch.linger != nil {
			lingering++
		}
	}
	return len(h.chans), lingering
}

// Subscribed reports whether name's subscription is live and confirmed, held
// by waiters or lingering, so that a Subscribe to it now would return at
// once, with no round trip. It is a hint: the linger may end, or the
// subscription be lost, right after it answered; Subscribe stays correct
// either way, only slower. A caller uses it to skip work that is worth
// doing only to avoid a subscription (see the package comment).
func (h *Hub) Subscribed(name string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	ch := h.chans[name]
	return !h.closed && ch != nil && ch.cur.finished && ch.cur.err == nil
}

// Subscribe joins the subscription to channel, creating it if needed, and
// returns once the server has confirmed it: an event published after
// Subscribe returns reaches this waiter (or, with wake-one, another one).
// A lingering subscription is taken over as it is, without a round trip;
// nothing that arrived while it lingered is pending for the new waiter.
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
	h.stopLingerLocked(ch)
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
			// The round is over: the hub closed, the linger ran out, or a
			// lingering subscription ended on its own (a connection rueidis
			// gave up on, a slot that moved) and is not made again for
			// nobody. A linger timer left has nothing to end, and Close
			// must not wait for it.
			h.stopLingerLocked(ch)
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
			// error, and the next round subscribes on the new owner,
			// once awaitSlotMaster below finds rueidis routing the
			// slot to a master (after a failover it would not yet).
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
		if wanted && !stopped && h.opts.Mode == Sharded {
			h.awaitSlotMaster(ch)
		}
	}
}

// awaitSlotMaster waits, after a sharded subscription the server ended,
// until rueidis routes the channel's slot to a master again. A master that
// lost the slot to a failover (CLUSTER FAILOVER, or a promoted replica it
// rejoined as) ends the subscription with a sunsubscribe push and becomes
// a replica; Receive returns nil, which does not make rueidis refresh its
// slot map, so the next SSUBSCRIBE would go to the same node, which as a
// replica accepts it. Messages would still reach us (the master forwards
// them), but SPUBLISH on the master counts only its own subscribers: it
// would answer 0, and a publisher that takes 0 for "nobody listens" (as
// latchkey's wake does, dropping the waiter from its queue) would pass us
// over at every release. A keyed read on a connection pinned to the slot
// map's node answers -MOVED from such a replica, which also makes rueidis
// refresh the map; we ask again each RetryBackoff until the node answers.
// A slot that moved between masters needs none of this (the old master
// refuses the SSUBSCRIBE with -MOVED, and rueidis follows it), but the
// check cannot tell the two apart and costs one round trip.
//
// Any other reply ends the wait: the key's value is irrelevant, and an
// error (a connection lost, an ACL that does not let the client read the
// channel's name as a key) is the next round's to meet or, at worst, the
// old behaviour.
func (h *Hub) awaitSlotMaster(ch *channel) {
	for {
		if !h.slotMapStale(ch.name) {
			return
		}
		select {
		case <-time.After(h.opts.RetryBackoff):
		case <-h.done:
			return
		}
		h.mu.Lock()
		wanted := ch.refs > 0 && !h.closed
		h.mu.Unlock()
		if !wanted {
			return
		}
	}
}

// slotMapStale reports whether the node rueidis' slot map names for the
// channel's slot redirects a keyed read of it with -MOVED. A sharded
// channel hashes to a slot as a key of the same name does.
func (h *Hub) slotMapStale(name string) bool {
	ctx, cancel := context.WithTimeout(h.ctx, h.opts.UnsubscribeTimeout)
	defer cancel()
	var err error
	// Dedicated: a plain Do would follow the redirect and hide it.
	_ = h.client.Dedicated(func(d rueidis.DedicatedClient) error {
		err = d.Do(ctx, d.B().Exists().Key(name).Build()).Error()
		return nil
	})
	re, ok := rueidis.IsRedisErr(err)
	if !ok {
		return false
	}
	_, moved := re.IsMoved()
	return moved
}

func (h *Hub) receive(ctx context.Context, ch *channel, r *round) error {
	var sub rueidis.Completed
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
	//
	// The hook only starts the UNSUBSCRIBE; unsubs awaits it. rueidis calls
	// the hook after it stopped reading the round's message buffer (16
	// slots) and drains that buffer only once Receive has returned. A hook
	// that waited for the reply would let messages still arriving fill the
	// buffer and block rueidis' connection reader, with the reply queued
	// behind it: the hook, and every command on the connection (lock
	// scripts, releases, watchdog renewals), would wait out
	// UnsubscribeTimeout. A WaitGroup, not one channel: rueidis may call
	// the hook again when it retries the Receive on another connection.
	var unsubs sync.WaitGroup
	onReturn := func(err error, cc rueidis.CommandClient) error {
		if ctx.Err() == nil {
			return err // the connection or the server ended it; nothing to undo
		}
		var unsub rueidis.Completed
		if h.opts.Mode == Sharded {
			unsub = cc.B().Sunsubscribe().Channel(ch.name).Build()
		} else {
			unsub = cc.B().Unsubscribe().Channel(ch.name).Build()
		}
		unsubs.Go(func() {
			uctx, cancel := context.WithTimeout(context.Background(), h.opts.UnsubscribeTimeout)
			defer cancel()
			_ = cc.Do(uctx, unsub).Error() // best effort: a dead connection has no subscription left
		})
		return err
	}
	rctx := rueidis.WithOnReceiveReturnHook(rueidis.WithOnSubscriptionHook(ctx, onSubscription), onReturn)
	// A message that arrives after the last waiter left is dropped, whether
	// the channel lingers or is gone; a publisher that must not lose it takes
	// the listener out of its audience before the last Release (latchkey's
	// leave script does).
	err := h.client.Receive(rctx, sub, func(m rueidis.PubSubMessage) {
		// The mutex is held only for a few field updates: this does not
		// stall rueidis' connection goroutine.
		h.mu.Lock()
		if m.Message == WakeAllPayload {
			ch.bumpLocked()
			h.mu.Unlock()
			h.meters.receivedAll()
			return
		}
		// Read refs and fill the permit in one critical section with
		// Release's drain: a message either reaches the waiters who hold
		// the channel or, lingering, nobody, never a waiter who subscribes
		// later and would take it for an event after its Mark. A round
		// that is no longer ch.cur was stopped when its last waiter left
		// (unsubscribeLocked), yet rueidis may still hand over a message it
		// had read: whoever holds the channel now subscribed after the
		// stop, so that message is nobody's either.
		claimed := false
		if ch.refs > 0 && ch.cur == r {
			select {
			case ch.permit <- struct{}{}:
				claimed = true
			default: // a wake-up is already pending; one is enough to make progress
			}
		}
		h.mu.Unlock()
		h.meters.receivedOne(claimed)
	})
	// Now that rueidis drains the buffer, the reply can come. Waiting for it
	// here, before run starts the next round, keeps this UNSUBSCRIBE from
	// overtaking that round's SUBSCRIBE (which it would undo), and is how
	// Close, which waits for run, waits for it too.
	unsubs.Wait()
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// releaseLastLocked is Release's part when ch's last waiter left: drop the
// pending wake-up, which nobody is owed now, and let the subscription linger
// or end it. Callers hold h.mu.
func (h *Hub) releaseLastLocked(ch *channel) {
	select {
	case <-ch.permit:
	default:
	}
	if ch.stop == nil {
		return // between rounds: run sees refs == 0 and ends the channel
	}
	if h.opts.Linger < 0 || h.closed {
		h.unsubscribeLocked(ch)
		return
	}
	ch.lingerSeq++
	seq := ch.lingerSeq
	// The timer's callback counts as one of the hub's goroutines, so that
	// Close, which stops the timer, also waits for a callback already
	// running. Adding is safe: ch's run goroutine is counted (its round is
	// running), so the count is not zero, and Close has not begun to wait
	// (h.closed is false under the mutex).
	h.wg.Add(1)
	ch.linger = time.AfterFunc(h.opts.Linger, func() {
		defer h.wg.Done()
		h.mu.Lock()
		defer h.mu.Unlock()
		if ch.lingerSeq != seq {
			return // taken over, or ended, since the timer fired
		}
		ch.linger = nil
		if ch.stop != nil { // nil when the round ended meanwhile; run ends the channel
			h.unsubscribeLocked(ch)
		}
	})
}

// unsubscribeLocked stops ch's running round, whose return hook unsubscribes;
// run then ends the channel unless a waiter came back. Callers hold h.mu and
// know ch.stop is set.
func (h *Hub) unsubscribeLocked(ch *channel) {
	ch.stop()
	// Whoever arrives before the running round has unsubscribed must wait
	// for the next round's confirmation, not trust this one.
	ch.cur = newRound()
}

// stopLingerLocked cancels ch's linger, if any: a waiter took the channel
// over, the hub is closing, or the subscription ended on its own. A timer
// that already fired finds lingerSeq changed and does nothing. Callers hold
// h.mu.
func (h *Hub) stopLingerLocked(ch *channel) {
	if ch.linger == nil {
		return
	}
	ch.lingerSeq++
	if ch.linger.Stop() {
		h.wg.Done() // the callback will not run to do it
	}
	ch.linger = nil
}
