package rlock

import (
	"context"
	"fmt"

	"github.com/latchkey/latchkey/watchdog"
)

// holdKey identifies one owner's hold on one lock in this process.
type holdKey struct{ key, owner string }

// hold is the local mirror of an owner's entry in the lock hash: one level
// per successful Lock, each with the context that Lock returned.
type hold struct {
	levels []*level
	wd     *watchdog.Entry // set while any level was taken without a lease
	token  int64           // the grant's fencing token
}

type level struct {
	cancel context.CancelCauseFunc
	token  int64 // the hold's token when this level was taken
}

// ownerKey is the context key under which a lock context carries its owner
// id, so that any handle of the same client and lock re-enters with it.
type ownerKey struct {
	c   *Client
	key string
}

// grant records the successful acquisition t and builds the context Lock
// returns. The lease (or the watchdog's deadline) runs from t.sent, and the
// context ends a drift margin before the lease does.
func (c *Client) grant(parent context.Context, m *Mutex, owner string, t try, lo lockOptions) (context.Context, error) {
	ctx := context.WithValue(parent, ownerKey{c, m.key}, owner)
	var stopLease context.CancelFunc
	if lo.leaseSet {
		ctx, stopLease = context.WithDeadlineCause(ctx, t.sent.Add(lo.lease-watchdog.DriftMargin(lo.lease)),
			fmt.Errorf("%w: %q: its lease of %v is about to run out (take a longer lease, or omit WithLease to have the watchdog renew it)", ErrLockLost, m.name, lo.lease))
	}
	ctx, cancel := context.WithCancelCause(ctx)
	lv := &level{token: t.Token, cancel: func(cause error) {
		cancel(cause)
		if stopLease != nil {
			stopLease()
		}
	}}

	hk := holdKey{m.key, owner}
	var stale *hold
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		lv.cancel(ErrClosed)
		m.undo(owner, t.Count)
		return nil, ErrClosed
	}
	h := c.holds[hk]
	if h != nil && t.Count <= t.held {
		// Redis counted fewer holds than we had when the acquire was sent:
		// they were lost before the watchdog noticed. Those levels end; this
		// one starts afresh. (Concurrent Locks of one owner only ever make
		// the count larger, so they cannot trip this.)
		stale, h = h, nil
	}
	if h == nil {
		h = &hold{token: t.Token}
		c.holds[hk] = h
	}
	h.levels = append(h.levels, lv)
	if !lo.leaseSet && h.wd == nil {
		h.wd = c.wd.Add(m.key, owner, t.sent, func(cause error) { c.lost(hk, h, cause) })
	}
	c.mu.Unlock()

	if stale != nil {
		if stale.wd != nil {
			stale.wd.Stop()
		}
		for _, l := range stale.levels {
			l.cancel(fmt.Errorf("%w: %q was found re-acquired from scratch", ErrLockLost, m.name))
		}
	}
	return ctx, nil
}

// lost is the watchdog's loss callback: every level of the hold ends with
// ErrLockLost and the hold is forgotten.
func (c *Client) lost(hk holdKey, h *hold, cause error) {
	c.mu.Lock()
	if c.holds[hk] == h {
		delete(c.holds, hk)
	}
	levels := h.levels
	h.levels, h.wd = nil, nil
	c.mu.Unlock()
	err := fmt.Errorf("%w: %w", ErrLockLost, cause)
	for _, lv := range levels {
		lv.cancel(err)
	}
}

// popLevel removes the innermost level of owner's hold. When it was the last
// (last), the hold is forgotten and its watchdog entry (if any) returned for
// the caller to stop outside c.mu: Stop may wait for a loss callback that
// takes c.mu.
func (c *Client) popLevel(hk holdKey) (lv *level, wd *watchdog.Entry, last bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.holds[hk]
	if h == nil || len(h.levels) == 0 {
		return nil, nil, false
	}
	lv = h.levels[len(h.levels)-1]
	h.levels = h.levels[:len(h.levels)-1]
	if len(h.levels) > 0 {
		return lv, nil, false
	}
	delete(c.holds, hk)
	wd, h.wd = h.wd, nil
	return lv, wd, true
}

// dropHold forgets owner's hold after Redis said it holds nothing, ending
// every remaining level with ErrLockLost.
func (c *Client) dropHold(hk holdKey, name string) {
	c.mu.Lock()
	h := c.holds[hk]
	delete(c.holds, hk)
	c.mu.Unlock()
	if h == nil {
		return
	}
	if h.wd != nil {
		h.wd.Stop()
	}
	for _, lv := range h.levels {
		lv.cancel(fmt.Errorf("%w: %q was no longer held at Unlock", ErrLockLost, name))
	}
}

// token is the fencing token of owner's hold on key, 0 when none.
func (c *Client) token(hk holdKey) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if h := c.holds[hk]; h != nil && len(h.levels) > 0 {
		return h.token
	}
	return 0
}

// heldCount is the local hold count of owner on key.
func (c *Client) heldCount(hk holdKey) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if h := c.holds[hk]; h != nil {
		return int64(len(h.levels))
	}
	return 0
}
