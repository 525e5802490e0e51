package rlock

import (
	"context"
	"slices"
	"time"

	"github.com/latchkey/latchkey/notify"
)

// The turn. A Client keeps one turn per side of a lock its goroutines want
// (a Mutex, an RWMutex's readers, its writers, a Semaphore's holders; the
// spin variants have turns of their own, as they never queue). A turn has
// one baton: its holder is the only goroutine of this client that contends
// for the side in Redis, so the client has at most one queue entry and one
// subscription per side, and one message wakes the one goroutine that can
// act on it. Every other new owner waits here, first come first served,
// without any I/O.
//
// An exclusive side (Mutex) keeps the baton for as long as the hold lasts,
// so that its release can hand the lock straight to the next local waiter
// (a handover: a new grant in the release's round trip). Other sides pass
// the baton on at the grant: their holds share, and the next local waiter
// is likely to be granted at once too.

// turn is one side's local queue. Its fields are guarded by Client.mu,
// except sub, which only the baton's holder touches.
type turn struct {
	busy    bool          // someone holds the baton
	waiters []*turnWaiter // oldest first
	streak  int           // handovers in a row since the lock last went back to Redis

	// sub is this client's subscription to the side's wake-ups, kept while
	// the client may be in the side's wait queue or has waiters that will
	// need it. The client is queued only while sub is set: a contender
	// queues only once subscribed, and sub is dropped only once the client
	// is off the queue (a grant took it off, or the leave script).
	sub *notify.Subscription
}

// turnWaiter is one new owner waiting for the baton.
type turnWaiter struct {
	lo lockOptions
	ch chan baton // capacity 1: the baton, sent once
}

// baton is what a waiter receives with the turn: a grant the releasing
// owner made for it (a handover), or nothing, and then it contends. A
// handover whose outcome is unknown names the owner id it may have been
// made to, for the waiter to undo before it contends.
type baton struct {
	granted bool
	owner   string // the heir's owner id; "" when no handover was tried
	token   int64
	sent    time.Time // when the handing release was sent: the lease runs from there
}

// enterTurn gives the caller sd's baton, waiting behind this client's
// other owners until ctx ends, the client closes, or deadline passes
// (errBusy; zero for none); with noWait it does not wait at all. The baton
// may come with the lock.
func (c *Client) enterTurn(ctx context.Context, sd *side, lo lockOptions, deadline time.Time, noWait bool) (*turn, baton, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, baton{}, ErrClosed
	}
	t := c.turns[sd.turnKey()]
	if t == nil {
		t = &turn{}
		c.turns[sd.turnKey()] = t
	}
	if !t.busy {
		t.busy = true
		c.contenders.Add(1)
		c.mu.Unlock()
		return t, baton{}, nil
	}
	if noWait {
		c.mu.Unlock()
		return nil, baton{}, errBusy
	}
	w := &turnWaiter{lo: lo, ch: make(chan baton, 1)}
	t.waiters = append(t.waiters, w)
	c.mu.Unlock()

	sd.onWait(lo)
	var expired <-chan time.Time
	if !deadline.IsZero() {
		timer := time.NewTimer(time.Until(deadline))
		defer timer.Stop()
		expired = timer.C
	}
	var err error
	select {
	case b := <-w.ch:
		return t, b, nil
	case <-ctx.Done():
		err = ctxErr(ctx)
	case <-c.closing.Done():
		err = ErrClosed
	case <-expired:
		err = errBusy
	}
	c.mu.Lock()
	if i := slices.Index(t.waiters, w); i >= 0 {
		t.waiters = slices.Delete(t.waiters, i, i+1)
		c.mu.Unlock()
		return nil, baton{}, err
	}
	c.mu.Unlock()
	// Chosen as we gave up: the baton, perhaps with the lock, is on its way
	// (within a release's ReleaseTimeout). Pass both on.
	b := <-w.ch
	if b.owner != "" && !b.granted {
		_ = sd.undo(b.owner, 1)
	}
	if b.granted {
		c.contenders.Done()
		// Ours already, and not wanted: release it like an Unlock would.
		// A release that fails leaves a lock that expires within its lease.
		_ = c.adopt(sd, t, try{reply: reply{granted: true, token: b.token}, owner: b.owner}, w.lo).releaseLast()
		return nil, baton{}, err
	}
	c.leaveTurn(t, sd, true, true)
	return nil, baton{}, err
}

// chooseHeir is called at an exclusive hold's last release, once the hold
// has given up t's baton. It returns the waiter to hand the lock to, or
// nil: none waits, the client is closing, or the client has handed the
// lock over MaxLocalHandovers times in a row (then the lock goes back to
// Redis, which wakes the oldest other client, and the waiter contends).
func (c *Client) chooseHeir(t *turn) *turnWaiter {
	c.mu.Lock()
	defer c.mu.Unlock()
	// With SyncReplicas no release hands over: a handover is a grant that
	// WAIT would have to confirm after the release already happened.
	if c.closed || len(t.waiters) == 0 || c.opts.MaxLocalHandovers < 0 || t.streak >= c.opts.MaxLocalHandovers || c.opts.SyncReplicas.Replicas > 0 {
		return nil
	}
	w := t.waiters[0]
	t.waiters = t.waiters[1:]
	c.contenders.Add(1) // w holds the baton now; it is done contending once it takes the grant
	return w
}

// handedOver records the outcome of a release that chose heir w and gives
// w the baton: with the grant when the release handed the lock over.
func (c *Client) handedOver(t *turn, w *turnWaiter, b baton) {
	c.mu.Lock()
	if b.granted {
		t.streak++
	} else {
		t.streak = 0
	}
	c.mu.Unlock()
	w.ch <- b
}

// leaveTurn gives up t's baton: to the next waiter, with the subscription
// (the client keeps its place in the queue), or, when none waits, t goes
// idle and the subscription ends. contending says the caller held the
// baton without a hold (it is then done contending); queued, that the
// client may still be in the side's queue: then, unless a local waiter
// goes on waiting in its place, the leave script takes it off first, so
// that no release wakes a client that stopped listening.
func (c *Client) leaveTurn(t *turn, sd *side, contending, queued bool) {
	if contending {
		defer c.contenders.Done()
	}
	for {
		c.mu.Lock()
		if len(t.waiters) > 0 && !c.closed {
			w := t.waiters[0]
			t.waiters = t.waiters[1:]
			t.streak = 0
			c.contenders.Add(1)
			c.mu.Unlock()
			w.ch <- baton{}
			return
		}
		sub := t.sub
		if sub == nil {
			t.busy, t.streak = false, 0
			if len(t.waiters) == 0 {
				delete(c.turns, sd.turnKey())
			}
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		if queued {
			// Still holding the baton, so that no new contender of ours
			// queues the client while the leave script takes it off.
			sd.leaveQueue()
		}
		t.sub = nil
		sub.Release()
	}
}

// keepTurn is an exclusive side's grant: the hold keeps the baton, the
// contender is done, and the subscription ends unless a local waiter will
// need it (the grant took the client off the queue).
func (c *Client) keepTurn(t *turn) {
	c.mu.Lock()
	keep := len(t.waiters) > 0
	c.mu.Unlock()
	if !keep && t.sub != nil {
		t.sub.Release()
		t.sub = nil
	}
	c.contenders.Done()
}
