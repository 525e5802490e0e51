package rlock

import (
	"context"
	"time"
)

// Local handover. When a hold ends and other goroutines of the same Client
// wait for the lock, the release script can pass the lock straight to one
// of them (the heir): a new grant with a new token, made in the same round
// trip as the release, with no message and no acquire. The heir is woken
// in-process. Handovers within one client are bounded (Options.
// MaxLocalHandovers in a row while other clients are queued), after which
// the release yields to the oldest queued client as usual: batches of local
// turns, not starvation.

// heir is one pub/sub waiter that can take a handed-over lock. Its state
// moves under Client.mu: trying (its acquire may be in flight: it must not
// be handed the lock, or its own acquire would re-enter) → waiting →
// promised (an Unlock chose it and runs the release) → told (res is set and
// signal fired) → back to trying, or gone.
type heir struct {
	ctx    context.Context
	m      *Mutex
	owner  string
	lo     lockOptions
	state  heirState
	res    handover
	signal chan struct{} // capacity 1: fired once per promise
}

type heirState int

const (
	heirTrying heirState = iota
	heirWaiting
	heirPromised
	heirTold
)

// handover is the outcome of a promise: whether the heir holds the lock now,
// with which token, and when the release that made it so was first sent
// (the heir's lease runs from there). unknown is a release whose reply never
// came: the heir may hold the lock without knowing, and must undo that.
type handover struct {
	handed  bool
	unknown bool
	token   int64
	sent    time.Time
}

// heirLine is the queue of heirs for one lock key, oldest first, and how
// many handovers in a row the client has made on it.
type heirLine struct {
	heirs  []*heir
	streak int
}

// addHeir registers a pub/sub waiter as a possible heir, in state trying.
func (c *Client) addHeir(ctx context.Context, m *Mutex, owner string, lo lockOptions) *heir {
	h := &heir{ctx: ctx, m: m, owner: owner, lo: lo, signal: make(chan struct{}, 1)}
	c.mu.Lock()
	defer c.mu.Unlock()
	line := c.heirs[m.key]
	if line == nil {
		line = &heirLine{}
		c.heirs[m.key] = line
	}
	line.heirs = append(line.heirs, h)
	return h
}

// promiseHeir picks the oldest waiting heir of key whose context is still
// live and promises it the lock; yield says whether the release must yield
// to other queued clients instead (the streak reached the limit).
func (c *Client) promiseHeir(key string) (h *heir, yield bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	line := c.heirs[key]
	if line == nil || c.closed || c.opts.MaxLocalHandovers < 0 {
		return nil, false
	}
	for _, cand := range line.heirs {
		if cand.state == heirWaiting && cand.ctx.Err() == nil {
			cand.state = heirPromised
			return cand, line.streak >= c.opts.MaxLocalHandovers
		}
	}
	return nil, false
}

// tell delivers a promise's outcome to its heir and counts the streak.
func (c *Client) tell(h *heir, res handover) {
	c.mu.Lock()
	h.res, h.state = res, heirTold
	if line := c.heirs[h.m.key]; line != nil {
		if res.handed {
			line.streak++
		} else {
			line.streak = 0
		}
	}
	c.mu.Unlock()
	h.signal <- struct{}{}
}

// resetStreak notes a release that went to another client (or nobody).
func (c *Client) resetStreak(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if line := c.heirs[key]; line != nil {
		line.streak = 0
	}
}

// beginTry moves h to trying before it sends an acquire. It reports false,
// and changes nothing, if h was promised the lock meanwhile: then h must
// take the outcome (takeOutcome) instead of trying.
func (c *Client) beginTry(h *heir) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if h.state == heirPromised || h.state == heirTold {
		return false
	}
	h.state = heirTrying
	return true
}

// beginWait moves h to waiting: it may be promised the lock from now on.
func (c *Client) beginWait(h *heir) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if h.state == heirTrying {
		h.state = heirWaiting
	}
}

// takeOutcome waits for the outcome of a promise made to h (bounded by the
// promising Unlock's ReleaseTimeout) and makes h try again next.
func (c *Client) takeOutcome(h *heir) handover {
	<-h.signal
	c.mu.Lock()
	defer c.mu.Unlock()
	res := h.res
	h.res, h.state = handover{}, heirTrying
	return res
}

// removeHeir unregisters h. If h was promised the lock, it first takes the
// outcome, which it returns: a caller that is leaving and was handed the
// lock must release it.
func (c *Client) removeHeir(h *heir) handover {
	c.mu.Lock()
	promised := h.state == heirPromised || h.state == heirTold
	c.mu.Unlock()
	var res handover
	if promised {
		res = c.takeOutcome(h)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if line := c.heirs[h.m.key]; line != nil {
		for i, x := range line.heirs {
			if x == h {
				line.heirs = append(line.heirs[:i], line.heirs[i+1:]...)
				break
			}
		}
		if len(line.heirs) == 0 {
			delete(c.heirs, h.m.key)
		}
	}
	return res
}
