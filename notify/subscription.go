package notify

import (
	"context"
	"time"
)

// channel is the shared state of one subscribed channel. Its fields are
// guarded by the hub's mutex, except permit, which is a channel.
type channel struct {
	name string
	refs int
	cur  *round // the round newcomers wait for
	stop func() // cancels the running round; nil between rounds

	// linger, set while refs is 0 and the round runs on for a newcomer to
	// reuse, ends that round when it fires. lingerSeq tells its callback
	// whether it is still the current linger: Stop cannot recall a
	// callback that has already started.
	linger    *time.Timer
	lingerSeq uint64

	// epoch counts (re)subscriptions, lost subscriptions and WakeAllPayload
	// messages; bcast is closed and replaced at each increment so that every
	// waiter wakes at once.
	epoch uint64
	bcast chan struct{}
	// permit holds at most one pending wake-up. A message that finds it full
	// is dropped: the pending wake-up already guarantees that one waiter will
	// look at the lock after this release, which is all a release needs.
	permit chan struct{}
}

// round is one Receive call. ready closes at the round's first confirmation
// (err nil) or when it failed before one (err set), whichever comes first:
// rueidis may still deliver a confirmation after the round was given up.
type round struct {
	ready    chan struct{}
	finished bool
	err      error
}

func newRound() *round { return &round{ready: make(chan struct{})} }

// finish closes ready once; later calls do nothing. Callers hold the hub's mutex.
func (r *round) finish(err error) {
	if r.finished {
		return
	}
	r.finished = true
	r.err = err
	close(r.ready)
}

func newChannel(name string) *channel {
	return &channel{name: name, cur: newRound(), bcast: make(chan struct{}), permit: make(chan struct{}, 1)}
}

func (ch *channel) bumpLocked() {
	ch.epoch++
	close(ch.bcast)
	ch.bcast = make(chan struct{})
}

// Mark records the channel's subscription epoch. Take it before checking the
// condition you wait for and pass it to Wait: if the subscription was lost or
// renewed in between, Wait returns at once.
type Mark uint64

// Wake says why Wait returned without error.
type Wake int

const (
	// WokenOne: a message arrived and this waiter took it. Act on it, or call
	// PassOn if you give up without acting, so that no wake-up is lost.
	WokenOne Wake = iota + 1
	// WokenAll: the subscription was (re)made or lost, or a WakeAllPayload
	// message arrived; every waiter wakes.
	WokenAll
	// TimedOut: the bound passed to Wait elapsed.
	TimedOut
)

// String names the reason, for logs and test failures.
func (w Wake) String() string {
	switch w {
	case WokenOne:
		return "woken-one"
	case WokenAll:
		return "woken-all"
	case TimedOut:
		return "timed-out"
	}
	return "unknown"
}

// Subscription is one waiter's share of a channel subscription. It is not
// meant to be shared between goroutines.
type Subscription struct {
	hub      *Hub
	ch       *channel
	released bool
}

// Channel returns the subscribed channel's name.
func (s *Subscription) Channel() string { return s.ch.name }

// Mark returns the current epoch; see Mark.
func (s *Subscription) Mark() Mark {
	s.hub.mu.Lock()
	defer s.hub.mu.Unlock()
	return Mark(s.ch.epoch)
}

// Wait blocks until a message wakes this waiter, the subscription changes
// after mark, max elapses, ctx ends (its cause is returned) or the hub closes
// (ErrClosed). max bounds every wait, so a lost message costs at most max.
// A max of zero or less only takes a pending wake-up, without blocking.
func (s *Subscription) Wait(ctx context.Context, mark Mark, max time.Duration) (Wake, error) {
	h, ch := s.hub, s.ch
	h.mu.Lock()
	if ch.epoch != uint64(mark) {
		h.mu.Unlock()
		return WokenAll, nil
	}
	bcast := ch.bcast
	h.mu.Unlock()

	if max <= 0 {
		select {
		case <-ch.permit:
			return WokenOne, nil
		default:
			return TimedOut, nil
		}
	}
	timer := time.NewTimer(max)
	defer timer.Stop()
	select {
	case <-ch.permit:
		return WokenOne, nil
	case <-bcast:
		return WokenAll, nil
	case <-timer.C:
		return TimedOut, nil
	case <-ctx.Done():
		return 0, context.Cause(ctx)
	case <-h.done:
		return 0, ErrClosed
	}
}

// PassOn hands a wake-up to another waiter. Call it after Wait returned
// WokenOne if you are leaving without acting on it (your context ended, say),
// so that the waiter who should have been woken is. With no waiter left on
// the channel it does nothing, as a message would.
func (s *Subscription) PassOn() {
	h := s.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	// Under the mutex, like a message: a wake-up passed while the channel
	// lingers would wait for whoever subscribes next, who is not owed it.
	if s.ch.refs == 0 {
		return
	}
	select {
	case s.ch.permit <- struct{}{}:
	default:
	}
}

// Release leaves the subscription. When the last waiter leaves a channel, a
// wake-up still pending is dropped and the subscription lingers (see
// Options.Linger) before it is unsubscribed. Release is idempotent.
func (s *Subscription) Release() {
	h := s.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	if s.released {
		return
	}
	s.released = true
	s.ch.refs--
	if s.ch.refs == 0 {
		h.releaseLastLocked(s.ch)
	}
}
