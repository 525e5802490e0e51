package rlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/latchkey/latchkey/internal/luascripts"
	"github.com/latchkey/latchkey/watchdog"
)

// Extend pushes out the expiry of the fixed-lease hold that lctx carries
// (a context Lock returned with WithLease, or one derived from it): the
// lock then lasts at least lease from when Extend's call was sent, and
// every level's context has the later deadline. It never shortens a lease.
//
// It returns ErrNotHeld when lctx carries no hold of this lock, when its
// level was unlocked, or when the hold was lost (its lease ran out before
// Extend, or the lock was found gone: then lctx ends with ErrLockLost), and
// ErrInvalidArgument for a hold kept by the watchdog, which needs no
// extending, or a lease out of WithLease's bounds. If the call fails on the
// way (Redis unreachable), the hold keeps the lease it had.
func (m *Mutex) Extend(lctx context.Context, lease time.Duration) error {
	if err := m.checkCtx(lctx); err != nil {
		return err
	}
	if _, err := buildLockOptions([]LockOption{WithLease(lease)}, false); err != nil {
		return err
	}
	lv := m.carried(lctx)
	if lv == nil {
		return fmt.Errorf("%w: %q: the context carries no hold of this lock (pass the context Lock returned)", ErrNotHeld, m.name)
	}
	h := lv.h
	if !h.lease {
		return fmt.Errorf("%w: %q is kept by the watchdog for as long as it is held; Extend applies to holds taken WithLease", ErrInvalidArgument, m.name)
	}
	h.io.Lock()
	defer h.io.Unlock()
	if err := m.c.levelHeld(lv); err != nil {
		return err
	}
	deadline := h.localDeadline()
	if !time.Now().Before(deadline) {
		h.lose(h.expiredCause.Load())
		return fmt.Errorf("%w: %w", ErrNotHeld, h.expiredCause.Load())
	}
	// The call may take until the current deadline; past it the hold is
	// lost whatever the reply says.
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	sent := time.Now()
	held, err := luascripts.RunRenewOne(ctx, m.c.rc, m.keys.Lock, h.owner, lease, m.c.opts.sync(), m.keys.Holder)
	var notSynced *luascripts.NotReplicatedError
	switch {
	case errors.As(err, &notSynced) && held:
		// Extended on the master only: a failover could undo it, so the
		// hold keeps the deadline it had.
		return fmt.Errorf("%w: extend %q: %w (the lease stands as it was)", ErrNotReplicated, m.name, notSynced)
	case err != nil && !errors.As(err, &notSynced):
		// It may have run: then Redis keeps the lock longer than we count
		// on, which is safe.
		return fmt.Errorf("latchkey: extend %q: %w (the lease stands as it was)", m.name, err)
	case !held:
		h.stopKeeper()
		h.lose(fmt.Errorf("%q was found gone at Extend", m.name))
		return fmt.Errorf("%w: %q was lost before Extend", ErrNotHeld, m.name)
	}
	later := sent.Add(lease - watchdog.DriftMargin(lease))
	if !later.After(deadline) {
		return nil
	}
	if !h.expiry.Stop() {
		// The lease's timer fired while the call was out: the hold was
		// declared lost at its deadline, and stays so.
		return fmt.Errorf("%w: %w", ErrNotHeld, h.expiredCause.Load())
	}
	h.expiredCause.Store(&leaseEndError{name: m.name, lease: lease})
	h.deadline.Store(later.UnixNano())
	h.expiry.Reset(time.Until(later))
	return nil
}

// levelHeld returns nil if lv's level is still held, else ErrNotHeld with
// the reason: the level was unlocked, or the hold ended or was lost.
func (c *Client) levelHeld(lv *level) error {
	c.mu.Lock()
	released := lv.released
	c.mu.Unlock()
	if released {
		return fmt.Errorf("%w: %q: this level was already unlocked", ErrNotHeld, lv.h.m.name)
	}
	if err := c.lostOrDone(lv.h); err != nil {
		if errors.Is(err, ErrNotHeld) {
			return err
		}
		return fmt.Errorf("%w: %w", ErrNotHeld, err)
	}
	return nil
}
