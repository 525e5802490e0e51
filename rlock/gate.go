package rlock

import (
	"context"
	"slices"
	"time"

	"github.com/latchkey/latchkey/notify"
)

// The gate. A Client keeps one gate per lock its goroutines want. A gate
// has one baton: the owner that holds it is the only one of this client
// that contends for the lock in Redis, or holds it; every other new owner
// waits in the gate, first come first served, without any I/O. So one
// goroutine per process (per Client) is ever queued in Redis, and a release
// by this client can pass the lock straight to the next local waiter in the
// same round trip (a handover: a new grant with a new owner id and token).
// Re-entries never pass through the gate: they already hold the lock.

// gate is one lock's local queue. Its fields are guarded by Client.mu,
// except sub, which only the baton's holder touches.
type gate struct {
	busy    bool          // someone holds the baton
	waiters []*gateWaiter // oldest first
	streak  int           // handovers in a row since the lock last went back to Redis

	// sub is this client's subscription to the lock's wake-ups, kept while
	// the client may be in the lock's wait queue or has waiters that will
	// need it. The client is queued only while sub is set: a contender
	// queues only once subscribed, and sub is dropped only once the
	// client is off the queue (the grant took it off, or the leave script).
	sub *notify.Subscription
}

// gateWaiter is one new owner waiting for the baton.
type gateWaiter struct {
	lo lockOptions
	ch chan baton // capacity 1: the baton, sent once
}

// baton is what a waiter receives with the baton: a grant the releasing
// owner made for it (a handover), or nothing, and then it contends. A
// handover whose outcome is unknown names the owner id it may have been
// made to, for the waiter to undo before it contends.
type baton struct {
	granted bool
	owner   string // the heir's owner id; "" when no handover was tried
	token   int64
	sent    time.Time // when the handing release was sent: the lease runs from there
}

// enter gives the caller key's baton, waiting behind this client's other
// owners until ctx ends, the client closes, or (TryLock) deadline passes;
// with noWait it does not wait at all. The baton may come with the lock.
func (c *Client) enter(ctx context.Context, m *Mutex, lo lockOptions, deadline time.Time, noWait bool) (*gate, baton, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, baton{}, ErrClosed
	}
	g := c.gates[m.keys.Lock]
	if g == nil {
		g = &gate{}
		c.gates[m.keys.Lock] = g
	}
	if !g.busy {
		g.busy = true
		c.contenders.Add(1)
		c.mu.Unlock()
		return g, baton{}, nil
	}
	if noWait {
		c.mu.Unlock()
		return nil, baton{}, errBusy
	}
	w := &gateWaiter{lo: lo, ch: make(chan baton, 1)}
	g.waiters = append(g.waiters, w)
	c.mu.Unlock()

	m.onWait(lo)
	var expired <-chan time.Time
	if !deadline.IsZero() {
		timer := time.NewTimer(time.Until(deadline))
		defer timer.Stop()
		expired = timer.C
	}
	var err error
	select {
	case b := <-w.ch:
		return g, b, nil
	case <-ctx.Done():
		err = ctxErr(ctx)
	case <-c.closing.Done():
		err = ErrClosed
	case <-expired:
		err = errBusy
	}
	c.mu.Lock()
	if i := slices.Index(g.waiters, w); i >= 0 {
		g.waiters = slices.Delete(g.waiters, i, i+1)
		c.mu.Unlock()
		return nil, baton{}, err
	}
	c.mu.Unlock()
	// Chosen as we gave up: the baton, perhaps with the lock, is on its way
	// (within a release's ReleaseTimeout). Pass both on.
	b := <-w.ch
	if b.owner != "" && !b.granted {
		m.undoHandover(b.owner)
	}
	if b.granted {
		c.contenders.Done()
		// Ours already, and not wanted: release it like an Unlock would.
		// A release that fails leaves a lock that expires within its lease.
		_ = m.releaseLast(m.newHold(g, b.owner, b.token, w.lo))
		return nil, baton{}, err
	}
	c.leaveGate(g, m, true)
	return nil, baton{}, err
}

// chooseHeir is called at a hold's last Unlock, once the hold has given up
// g's baton (hold.end). It returns the waiter to hand the lock to, or nil:
// none waits, the client is closing, or the client has handed the lock over
// MaxLocalHandovers times in a row (then the lock goes back to Redis, which
// wakes the oldest other client, and the waiter contends for it).
func (c *Client) chooseHeir(g *gate) *gateWaiter {
	c.mu.Lock()
	defer c.mu.Unlock()
	// With SyncReplicas no release hands over: a handover is a grant that
	// WAIT would have to confirm after the release already happened.
	if c.closed || len(g.waiters) == 0 || c.opts.MaxLocalHandovers < 0 || g.streak >= c.opts.MaxLocalHandovers || c.opts.SyncReplicas.Replicas > 0 {
		return nil
	}
	w := g.waiters[0]
	g.waiters = g.waiters[1:]
	c.contenders.Add(1) // w holds the baton now; it is done contending once it takes the grant
	return w
}

// handedOver records the outcome of a release that chose heir w and gives
// w the baton: with the grant when the release handed the lock over.
func (c *Client) handedOver(g *gate, w *gateWaiter, b baton) {
	c.mu.Lock()
	if b.granted {
		g.streak++
	} else {
		g.streak = 0
	}
	c.mu.Unlock()
	w.ch <- b
}

// leaveGate gives up g's baton: to the next waiter, who then contends, or,
// when none waits, g goes idle. A holder whose lock went back to Redis
// passes contending=false; a contender that gave up passes true, and first
// takes its client off the lock's wait queue (the leave script) when no
// local waiter will go on waiting in its place, so that no release wakes a
// client that stopped listening.
func (c *Client) leaveGate(g *gate, m *Mutex, contending bool) {
	if contending {
		defer c.contenders.Done()
	}
	for {
		c.mu.Lock()
		if len(g.waiters) > 0 && !c.closed {
			w := g.waiters[0]
			g.waiters = g.waiters[1:]
			g.streak = 0
			c.contenders.Add(1)
			c.mu.Unlock()
			w.ch <- baton{}
			return
		}
		sub := g.sub
		if sub == nil {
			g.busy, g.streak = false, 0
			if len(g.waiters) == 0 {
				delete(c.gates, m.keys.Lock)
			}
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		if contending {
			// Still holding the baton, so that no new contender of ours
			// queues the client while the leave script takes it off.
			m.leave()
		}
		g.sub = nil
		sub.Release()
	}
}

// dropSub ends g's subscription after a grant when no local waiter will
// need it; the grant took the client off the queue.
func (c *Client) dropSub(g *gate) {
	if g.sub == nil {
		return
	}
	c.mu.Lock()
	keep := len(g.waiters) > 0
	c.mu.Unlock()
	if !keep {
		g.sub.Release()
		g.sub = nil
	}
}
