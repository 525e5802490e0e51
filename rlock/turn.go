package rlock

import (
	"context"
	"slices"
	"time"

	"github.com/latchkey/latchkey/notify"
)

// turn is one side's local queue (docs/design.md: "Turn", "Handover"): its
// baton's holder is the client's only contender for the side, so one message
// wakes the one goroutine that can act on it. An exclusive side keeps the
// baton for the whole hold, so that its release can hand over; others pass
// it on at the grant. Guarded by Client.mu, except sub (the baton holder's).
type turn struct {
	busy    bool          // someone holds the baton
	waiters []*turnWaiter // oldest first
	streak  int           // handovers in a row since the lock last went back to Redis
	// last is what the client's owners of the side wait behind, for a
	// WaitError: the last refusal of the baton holder's tries, superseded
	// at an exclusive side's grant by the record of the hold that keeps the
	// baton (adopt), and dropped when a hold or a grant passes the baton on
	// (leaveTurn, handedOver): a refusal older than a grant names a holder
	// that may be long gone. A contender that gives up leaves its refusal
	// for the next, whose first try replaces it. nil: nothing known.
	last *refusal

	// sub is the client's subscription to the side's wake-ups; the client
	// is queued in Redis only while it is set.
	sub *notify.Subscription
}

// turnWaiter is one new owner waiting for the baton.
type turnWaiter struct {
	sd *side // its side: a Mutex and an Election of one name share the turn
	lo lockOptions
	ch chan try // capacity 1: the baton, sent once (see try)
}

// enlist counts the caller in contenders, which Close awaits, unless
// Close has begun (false). Every Add happens under c.mu while the client is
// not closed (as enterTurn's, chooseHeir's and leaveTurn's), so that none
// comes after Close's Wait has begun.
func (c *Client) enlist() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.contenders.Add(1)
	return true
}

// enterTurn gives the caller sd's baton, perhaps with the lock, waiting
// behind the client's other owners until ctx ends, the client closes or
// deadline passes (errBusy; zero: none). noWait does not wait. A caller
// that gave up gets what it waited behind then (the turn's last), for its
// WaitError.
func (c *Client) enterTurn(ctx context.Context, sd *side, lo lockOptions, deadline time.Time, noWait bool) (_ *turn, _ try, blocker *refusal, _ error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, try{}, nil, ErrClosed
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
		return t, try{}, nil, nil
	}
	if noWait {
		c.mu.Unlock()
		return nil, try{}, nil, errBusy
	}
	w := &turnWaiter{sd: sd, lo: lo, ch: make(chan try, 1)}
	t.waiters = append(t.waiters, w)
	c.mu.Unlock()

	c.onWait(lo.obs, sd.name)
	var expired <-chan time.Time
	if !deadline.IsZero() {
		timer := time.NewTimer(time.Until(deadline))
		defer timer.Stop()
		expired = timer.C
	}
	var err error
	select {
	case b := <-w.ch:
		return t, b, nil, nil
	case <-ctx.Done():
		err = ctxErr(ctx)
	case <-c.closing.Done():
		err = ErrClosed
	case <-expired:
		err = errBusy
	}
	c.mu.Lock()
	blocker = t.last // the baton holder's hold, or what refused its tries
	if i := slices.Index(t.waiters, w); i >= 0 {
		t.waiters = slices.Delete(t.waiters, i, i+1)
		c.mu.Unlock()
		return nil, try{}, blocker, err
	}
	c.mu.Unlock()
	// Chosen as we gave up: the baton, perhaps with the lock, is on its way
	// (within a ReleaseTimeout). Pass both on.
	if b := <-w.ch; b.Acquired {
		// Released as Unlock would, before Close (which awaits the count)
		// returns; a failure expires within its lease.
		_ = c.adopt(sd, t, b, w.lo).releaseLast()
		c.contenders.Done()
	} else {
		if b.owner != "" {
			_ = sd.undo(b.owner, 1)
		}
		c.leaveTurn(t, sd, true, true)
	}
	return nil, try{}, blocker, err
}

// chooseHeir returns the waiter that the last release of a hold of side sd
// hands the lock to, or nil: none waits, the oldest waiter is of another
// kind, the client is closing, or MaxLocalHandovers in a row were made (the
// lock goes back to Redis, to other clients).
func (c *Client) chooseHeir(t *turn, sd *side) *turnWaiter {
	c.mu.Lock()
	defer c.mu.Unlock()
	// With SyncReplicas no release hands over: a handover is a grant that
	// WAIT would have to confirm after the release already happened.
	if c.closed || len(t.waiters) == 0 || c.opts.MaxLocalHandovers < 0 || t.streak >= c.opts.MaxLocalHandovers || c.opts.SyncReplicas.Replicas > 0 {
		return nil
	}
	w := t.waiters[0]
	// A handover is the grant of sd's release script, which is the heir's
	// own only if the heir is of sd's kind: a Mutex's would make a
	// campaigner leader without its value or an announcement. Another kind
	// (still first come, first served) gets the baton without the lock
	// and contends with its own acquire.
	if w.sd.what != sd.what {
		return nil
	}
	t.waiters = t.waiters[1:]
	c.contenders.Add(1) // w holds the baton now; it is done contending once the grant is its hold, or given back
	return w
}

// handedOver records the outcome of a release that chose heir w and gives
// w the baton: with the grant when the release handed the lock over.
func (c *Client) handedOver(t *turn, w *turnWaiter, b try) {
	c.mu.Lock()
	if b.Acquired {
		t.streak++
	} else {
		t.streak = 0
	}
	t.last = nil // the released hold's record; the heir's grant records its own
	c.mu.Unlock()
	w.ch <- b
}

// leaveTurn gives t's baton to the next waiter, with the subscription and
// the client's place in the queue, or t goes idle. contending: the caller
// held the baton without a hold. queued: the client may be queued, so the
// leave script takes it off before the subscription ends, lest a release
// wake a client that stopped listening.
func (c *Client) leaveTurn(t *turn, sd *side, contending, queued bool) {
	if contending {
		defer c.contenders.Done()
	}
	for {
		c.mu.Lock()
		if !contending {
			// A grant passes the baton on, or a hold ends: the refusals
			// before it, or the hold's record, no longer say who blocks.
			t.last = nil
		}
		if len(t.waiters) > 0 && !c.closed {
			w := t.waiters[0]
			t.waiters = t.waiters[1:]
			t.streak = 0
			c.contenders.Add(1)
			c.mu.Unlock()
			w.ch <- try{}
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
			// Still holding the baton: no contender of ours queues meanwhile.
			sd.leaveQueue()
		}
		t.sub = nil
		sub.Release()
	}
}

// keepTurn is an exclusive side's grant: the hold keeps the baton, and the
// subscription (the grant dequeued the client) ends unless a waiter needs it.
// The caller stays counted in contenders until the grant is a hold.
func (c *Client) keepTurn(t *turn) {
	c.mu.Lock()
	keep := len(t.waiters) > 0
	c.mu.Unlock()
	if !keep && t.sub != nil {
		t.sub.Release()
		t.sub = nil
	}
}
