package rlock

import (
	"context"
	"slices"
	"time"

	"github.com/latchkey/latchkey/notify"
)

// The room: how the primitives besides Mutex (RWMutex, Semaphore) wait.
// A Client keeps one room per primitive and kind of request (an RWMutex's
// readers and writers have a room each). Like Mutex's gate, a room has one
// baton: its holder is the only goroutine of this client that waits in
// Redis, so the client has at most one entry in the primitive's wait queue
// and one subscription to its inbox, and one message wakes the one
// goroutine that can act on it. (Readers, which never exclude each other,
// make their first try before taking their turn.) Unlike the gate, the baton passes on as
// soon as its holder is granted: holds of these primitives share, so the
// next local waiter may well be granted at once too.
//
// The Redis side is the primitive's: its queue orders clients oldest first,
// its scripts keep a client's entry until the client is granted or leaves,
// and they refuse a newcomer that would overtake a queued client they must
// not (a writer, a large request). That order is what makes the waiting
// fair; the room only guarantees one contender per client.

// room is one primitive's (and kind's) local queue; its fields are guarded
// by Client.mu, except sub, which only the baton's holder touches.
type room struct {
	busy    bool
	waiters []chan struct{} // oldest first; each receives the baton once
	// sub is this client's subscription to its inbox, kept while the client
	// may be in the primitive's queue: a contender queues only once
	// subscribed, and sub is dropped only once the client is off the queue.
	sub *notify.Subscription
}

// contest is what a room needs from its primitive for one request.
type contest struct {
	room  string // the room's key among the client's rooms: unique per primitive and kind
	inbox string // the channel on which the primitive wakes this client
	// try runs the primitive's acquire once. queued asks it to queue the
	// client if refused (it is subscribed by then), and to dequeue it if
	// granted. Refused, it returns how long the wait may last before the
	// state can change without a message (holders' leases running out),
	// as a PTTL: -1 for "no expiry to wait for". An error that is
	// transient (an undone call of unknown outcome) is retried.
	try func(ctx context.Context, queued bool) (granted bool, pttl time.Duration, err error)
	// leave takes the client off the queue, and wakes whom that unblocks,
	// when its last contender gives up. Best effort and bounded.
	leave  func()
	onWait func()
	// spin polls with backoff instead of waiting for messages (the
	// SpinRWMutex): the client never queues, so it never subscribes.
	spin bool
	// shared: requests of this kind never exclude each other (an
	// RWMutex's readers), so they may ask before their turn in the room.
	shared bool
}

// contend waits for ct's room's baton, then contends until try grants,
// ctx ends, the client closes or deadline passes (errBusy; zero for none).
// noWait tries once without waiting.
func (c *Client) contend(ctx context.Context, ct contest, deadline time.Time, noWait bool) error {
	if ct.shared {
		// Requests of a kind that never block each other (readers) need
		// not take turns to ask: a plain try first, outside the room. Only
		// waiting, which queues the client, goes through it.
		ok, _, err := ct.try(ctx, false)
		switch {
		case err == nil && ok:
			return nil
		case err != nil && !transient(ctx, err):
			return err
		case noWait || (!deadline.IsZero() && !time.Now().Before(deadline)):
			return busyOr(err)
		}
	}
	r, err := c.enterRoom(ctx, ct, deadline, noWait)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(c.closing, func() { cancel(ErrClosed) })
	defer stop()
	err = c.contendBaton(cctx, r, ct, deadline, noWait && !ct.shared)
	c.leaveRoom(r, ct, err == nil)
	if err != nil {
		return ended(ctx, cctx, err)
	}
	return nil
}

// enterRoom gives the caller the baton of ct's room, waiting behind this
// client's earlier requests unless noWait.
func (c *Client) enterRoom(ctx context.Context, ct contest, deadline time.Time, noWait bool) (*room, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	r := c.rooms[ct.room]
	if r == nil {
		r = &room{}
		c.rooms[ct.room] = r
	}
	if !r.busy {
		r.busy = true
		c.contenders.Add(1)
		c.mu.Unlock()
		return r, nil
	}
	if noWait {
		c.mu.Unlock()
		return nil, errBusy
	}
	ch := make(chan struct{}, 1)
	r.waiters = append(r.waiters, ch)
	c.mu.Unlock()

	if ct.onWait != nil {
		ct.onWait()
	}
	var expired <-chan time.Time
	if !deadline.IsZero() {
		timer := time.NewTimer(time.Until(deadline))
		defer timer.Stop()
		expired = timer.C
	}
	var err error
	select {
	case <-ch:
		return r, nil
	case <-ctx.Done():
		err = ctxErr(ctx)
	case <-c.closing.Done():
		err = ErrClosed
	case <-expired:
		err = errBusy
	}
	c.mu.Lock()
	if i := slices.Index(r.waiters, ch); i >= 0 {
		r.waiters = slices.Delete(r.waiters, i, i+1)
		c.mu.Unlock()
		return nil, err
	}
	c.mu.Unlock()
	// The baton came as we gave up: pass it on.
	<-ch
	c.leaveRoom(r, ct, false)
	return nil, err
}

// contendBaton is the baton holder's part: a plain try first (unless the
// client is subscribed, and so queued: a plain try would not keep its
// place), then the notified wait. The protocol is Mutex's (see
// pubsubWait): take the subscription's mark, try (queueing the client if
// refused), and wait for a message, a change of subscription since the
// mark, or the pttl the try returned, whichever comes first.
func (c *Client) contendBaton(ctx context.Context, r *room, ct contest, deadline time.Time, noWait bool) error {
	if ct.spin {
		return c.spinBaton(ctx, ct, deadline, noWait)
	}
	if r.sub == nil {
		// A shared request asked already, but its turn may have come
		// after a release: ask again before subscribing.
		ok, _, err := ct.try(ctx, false)
		switch {
		case err == nil && ok:
			return nil
		case err != nil && !transient(ctx, err):
			return err
		case noWait || (!deadline.IsZero() && !time.Now().Before(deadline)):
			return busyOr(err)
		}
		sctx := ctx
		if !deadline.IsZero() {
			var cancel context.CancelFunc
			sctx, cancel = context.WithDeadline(ctx, deadline)
			defer cancel()
		}
		sub, err := c.hub.Subscribe(sctx, ct.inbox)
		if err != nil {
			if ctx.Err() == nil && sctx.Err() != nil {
				return errBusy
			}
			return err
		}
		r.sub = sub
	}
	var lastErr error
	retry := c.opts.SpinBackoffMin
	for {
		mark := r.sub.Mark()
		ok, pttl, err := ct.try(ctx, true)
		var wait time.Duration
		switch {
		case err == nil && ok:
			return nil
		case err == nil:
			lastErr, retry = nil, c.opts.SpinBackoffMin
			wait = ttlBound(pttl)
		case transient(ctx, err):
			lastErr, wait = err, retry
			retry = min(retry*2, c.opts.SpinBackoffMax)
		default:
			return err
		}
		var open bool
		if wait, open = boundWait(wait, deadline); !open {
			return busyOr(lastErr)
		}
		if ct.onWait != nil {
			ct.onWait()
		}
		if _, err := r.sub.Wait(ctx, mark, wait); err != nil {
			return withLast(err, lastErr)
		}
	}
}

// leaveRoom gives up r's baton: to the next local waiter, with the
// subscription (the client keeps its place in the queue, or, after a
// grant, queues again at the waiter's first try), or, when none waits, r
// goes idle: the client leaves the queue unless it was just granted (the
// grant dequeued it) and the subscription ends.
func (c *Client) leaveRoom(r *room, ct contest, granted bool) {
	defer c.contenders.Done()
	for {
		c.mu.Lock()
		if len(r.waiters) > 0 && !c.closed {
			ch := r.waiters[0]
			r.waiters = r.waiters[1:]
			c.contenders.Add(1)
			c.mu.Unlock()
			ch <- struct{}{}
			return
		}
		sub := r.sub
		if sub == nil {
			r.busy = false
			if len(r.waiters) == 0 {
				delete(c.rooms, ct.room)
			}
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		if !granted {
			// Still holding the baton, so that no new contender of ours
			// queues the client while the leave script takes it off.
			ct.leave()
		}
		r.sub = nil
		sub.Release()
	}
}

// spinBaton is the spin variant's wait: tries between sleeps of
// exponential backoff with jitter (as Mutex's spinWait), never sleeping
// past the holders' remaining TTL.
func (c *Client) spinBaton(ctx context.Context, ct contest, deadline time.Time, noWait bool) error {
	backoff := c.opts.SpinBackoffMin
	for {
		ok, pttl, err := ct.try(ctx, false)
		switch {
		case err == nil && ok:
			return nil
		case err != nil && !transient(ctx, err):
			return err
		case noWait:
			return busyOr(err)
		}
		d := jitter(backoff)
		if err == nil {
			d = min(d, ttlBound(pttl))
		}
		var open bool
		if d, open = boundWait(d, deadline); !open {
			return busyOr(err)
		}
		if ct.onWait != nil {
			ct.onWait()
		}
		if !sleep(ctx, nil, d) {
			return withLast(context.Cause(ctx), err)
		}
		backoff = min(backoff*2, c.opts.SpinBackoffMax)
	}
}
