package rlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// MultiMutex is a handle on several locks taken and released together, all
// or nothing. Get it from Client.MultiMutex. Ownership is Mutex's. Each
// member is the Mutex of that name, so a MultiMutex excludes and is
// excluded by plain Mutexes of its names.
//
// MultiMutexes over overlapping names cannot deadlock each other, on any
// number of Cluster masters: members are acquired in one order (by name),
// and a MultiMutex never waits for one while it holds another; when one is
// busy, it releases those it took, waits for that one, then takes the rest
// again (a Lock whose context holds some of them already is the caller's
// ordering).
type MultiMutex struct {
	c       *Client
	names   []string // sorted, without duplicates
	members []*Mutex // in names' order
	id      string   // the members' keys, concatenated: the key of a multi hold
	joined  string   // the names, comma-separated: its lock name in metrics and spans
	err     error    // invalid names, reported by every method
}

// MultiMutex returns a handle on the locks called names, held all together
// or not at all. Names are Client.Mutex's; duplicates are one lock. Every
// method reports an invalid name as ErrInvalidName, and no names as
// ErrInvalidArgument, before any I/O.
func (c *Client) MultiMutex(names ...string) *MultiMutex {
	sorted := slices.Compact(slices.Sorted(slices.Values(names)))
	mm := &MultiMutex{c: c, names: sorted}
	if len(sorted) == 0 {
		mm.err = fmt.Errorf("%w: a MultiMutex needs at least one lock name", ErrInvalidArgument)
		return mm
	}
	if mm.err = c.latchkeyOnly("MultiMutex"); mm.err != nil {
		return mm
	}
	var id strings.Builder
	for _, name := range sorted {
		m := c.Mutex(name)
		if m.err != nil {
			mm.err = m.err
			return mm
		}
		mm.members = append(mm.members, m)
		id.WriteString(m.keys.Lock)
	}
	mm.id = id.String()
	mm.joined = strings.Join(sorted, ",")
	return mm
}

// Names returns the names of the locks, sorted and without duplicates: the
// order in which they are acquired.
func (mm *MultiMutex) Names() []string { return slices.Clone(mm.names) }

// Lock blocks until it holds every member, or ctx ends; then it holds none.
// It returns a context that carries the hold of every member: with it, a
// Lock of these names or a Mutex Lock of one member re-enters, and a
// member's Mutex.Token and HoldCount work. It is cancelled by the matching
// Unlock, with a cause matching ErrLockLost when any member is lost, and
// with ErrClosed when the client closes. Options are Mutex.Lock's, for
// every member; with WithLease, each member's lease runs from its own
// acquisition and the context's lease end (LeaseEnd) is the earliest.
func (mm *MultiMutex) Lock(ctx context.Context, opts ...LockOption) (context.Context, error) {
	return mm.c.lockCall(ctx, mm.err, opts, mm.acquire)
}

// TryLock is Lock that gives up, holding no member, when a member stays
// busy: after one round of tries, or after waiting up to WithWait(d) in
// all. It reports false with a nil error then, as Mutex.TryLock does.
func (mm *MultiMutex) TryLock(ctx context.Context, opts ...LockOption) (context.Context, bool, error) {
	return mm.c.tryLockCall(ctx, mm.err, opts, mm.acquire)
}

// acquire takes every member, all or nothing, or fails with errBusy. A zero
// deadline waits until ctx ends (Lock); a passed one still makes one round
// of tries.
func (mm *MultiMutex) acquire(ctx context.Context, lo lockOptions, deadline time.Time, _ bool) (_ context.Context, err error) {
	// The call is recorded as one acquire of the MultiMutex: a member found
	// busy, or taken and given back, is no acquire of its own (recordedBy).
	// A re-entry re-enters every member, and they count it.
	if ctx.Value(multiKey{mm.c, mm.id}) == nil {
		lo.obs = mm.c.obs.begin(ctx, kindMultiMutex, mm.joined)
		defer func() { lo.obs.end(ctx, err) }()
		// A contender until it returns: a member's call that Close cuts
		// short ends the call, and the members it took already are given
		// back (releaseAll) before Close returns, not on a rueidis client
		// closed after it. Close cuts every member's wait, so it is not
		// kept waiting long. A re-entry of the multi-lock takes nothing new.
		if !mm.c.enlist() {
			return nil, ErrClosed
		}
		defer mm.c.contenders.Done()
	}
	var memberOpts []LockOption
	if lo.obs != nil {
		memberOpts = append(memberOpts, recordedBy(lo.obs))
	}
	if lo.leaseSet {
		memberOpts = append(memberOpts, WithLease(lo.lease))
	}
	memberOpts = slices.Clip(memberOpts) // each append below makes its own
	held := make([]context.Context, len(mm.members))
	releaseAll := func() {
		for i := len(held) - 1; i >= 0; i-- {
			if held[i] != nil {
				_ = mm.members[i].Unlock(held[i]) // a failure expires within its lease
				held[i] = nil
			}
		}
	}
	next := 0         // the member to wait for: the first, then whichever was busy
	var lastErr error // the last round's transient failure, if it ended it
	for round := 0; ; round++ {
		var lctx context.Context
		var ok bool
		var err error
		wait := max(time.Until(deadline), 0)
		switch {
		case deadline.IsZero():
			lctx, err = mm.members[next].Lock(ctx, memberOpts...)
		case wait == 0 && round > 0:
			// The wait is over, and a round was tried: a failure is no "busy".
			return nil, busyOr(lastErr)
		default:
			if lctx, ok, err = mm.members[next].TryLock(ctx, append(memberOpts, WithWait(wait))...); err == nil && !ok {
				err = errBusy
			}
		}
		if err != nil {
			return nil, err
		}
		held[next] = lctx
		busy := -1 // the others, in order, without waiting
		lastErr = nil
		for i, m := range mm.members {
			if held[i] != nil {
				continue
			}
			lctx, ok, err := m.TryLock(ctx, memberOpts...)
			if err != nil && !transient(ctx, err) {
				releaseAll()
				return nil, err
			}
			// A transient failure (undone) counts as busy: the wait retries.
			if !ok {
				busy, lastErr = i, err
				break
			}
			held[i] = lctx
		}
		if busy < 0 {
			return mm.newHold(ctx, held), nil
		}
		releaseAll() // never wait while holding
		next = busy
	}
}

// recordedBy makes a member's call part of the MultiMutex call that obs
// follows (nil: metrics and traces are off).
func recordedBy(obs *acquireObs) LockOption {
	return func(o *lockOptions) { o.obs = obs }
}

// Unlock releases one level of every member of the hold that ctx carries,
// with Mutex.Unlock, even when some fail, and returns the failures joined
// (ErrNotHeld wrapping ErrLockLost for a lost member). It returns
// ErrNotHeld, changing nothing, when ctx carries no hold of these locks or
// it was unlocked already. It ignores ctx's cancellation.
func (mm *MultiMutex) Unlock(ctx context.Context) error {
	if err := checkCtx(ctx, mm.err); err != nil {
		return err
	}
	mh, _ := ctx.Value(multiKey{mm.c, mm.id}).(*multiHold)
	if mh == nil {
		return fmt.Errorf("%w: %s: the context carries no hold of these locks (pass the context Lock returned)", ErrNotHeld, mm.label())
	}
	if mh.released.Swap(true) {
		return fmt.Errorf("%w: %s: this hold was already unlocked", ErrNotHeld, mm.label())
	}
	// The members' contexts end as they are unlocked: that is not a loss.
	for _, stop := range mh.stops {
		stop()
	}
	var errs []error
	for i := len(mh.members) - 1; i >= 0; i-- {
		errs = append(errs, mm.members[i].Unlock(mh.members[i]))
	}
	mh.cancel(nil)
	return errors.Join(errs...)
}

// Token returns the fencing token of the member called name in the hold ctx
// carries, as Mutex.Token does, or ErrInvalidName for a name not a member.
func (mm *MultiMutex) Token(ctx context.Context, name string) (int64, error) {
	if err := checkCtx(ctx, mm.err); err != nil {
		return 0, err
	}
	i, found := slices.BinarySearch(mm.names, name)
	if !found {
		return 0, fmt.Errorf("%w: %q is not one of %s", ErrInvalidName, name, mm.label())
	}
	return mm.members[i].Token(ctx)
}

// label names the MultiMutex in errors.
func (mm *MultiMutex) label() string {
	const most = 4
	if len(mm.names) > most {
		return fmt.Sprintf("multi-lock %q and %d more", mm.names[:most], len(mm.names)-most)
	}
	return fmt.Sprintf("multi-lock %q", mm.names)
}

// multiHold is one Lock's hold of every member, and the context Lock
// returns. It also carries each member's level, so a nested Lock of one
// member re-enters; its lease end is the earliest member's (Extend may move
// them).
type multiHold struct {
	context.Context
	mm       *MultiMutex
	members  []context.Context // each member's lock context, in names' order
	cancel   context.CancelCauseFunc
	stops    []func() bool // the watches on the member contexts
	released atomic.Bool
}

// multiKey is the context key of a multiHold.
type multiKey struct {
	c  *Client
	id string
}

// newHold makes Lock's context from the member contexts held: ended by
// Unlock, or by the first member's context to end, with its cause.
func (mm *MultiMutex) newHold(parent context.Context, held []context.Context) context.Context {
	ctx, cancel := context.WithCancelCause(parent)
	mh := &multiHold{Context: ctx, mm: mm, members: held, cancel: cancel}
	for i, lctx := range held {
		// Watch what the member's lock context wraps, not the context
		// itself: AfterFunc registers with the watched context, and the
		// member's hold would keep its lock context reachable, so a dropped
		// multi-lock would never be found leaked (lockCtx).
		watched := lctx
		if lc, ok := lctx.(*lockCtx); ok {
			watched = lc.Context
		}
		mh.stops = append(mh.stops, context.AfterFunc(watched, func() {
			cause := context.Cause(watched)
			if errors.Is(cause, ErrLockLost) {
				cause = fmt.Errorf("%w (member %q of a multi-lock)", cause, mm.names[i])
			}
			cancel(cause)
		}))
	}
	return mh
}

func (mh *multiHold) Value(key any) any {
	switch k := key.(type) {
	case multiKey:
		if k == (multiKey{mh.mm.c, mh.mm.id}) {
			return mh
		}
	case leaseEndKey:
		// The earliest member's: the first to end ends the multi context.
		end := mh.Context.Value(key)
		for _, lctx := range mh.members {
			if d, ok := LeaseEnd(lctx); ok {
				end = earlier(d, end)
			}
		}
		return end
	case levelKey:
		if k.c == mh.mm.c {
			for i, m := range mh.mm.members {
				if m.keys.Lock == k.key {
					return mh.members[i].Value(key)
				}
			}
		}
	}
	return mh.Context.Value(key)
}
