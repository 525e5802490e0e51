package rlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/latchkey/latchkey/internal/luascripts"
	"github.com/latchkey/latchkey/watchdog"
)

// share is one owner's hold on an RWMutex side or on Semaphore permits:
// Mutex's hold without the gate. Its owner id is a field in one or more
// hashes (keep), each of which the watchdog renews, or which expire with
// a fixed lease. Each acquire through a context that carries the share
// (a re-entry) adds a level with a context of its own; the release of the
// last level releases the share in Redis.
type share struct {
	c    *Client
	kind string // "read lock", "write lock", "permits": for messages
	// metric is its latchkey.kind attribute; granted, when it was granted
	// (for the hold-time metric).
	metric  lockKind
	granted time.Time
	name    string
	owner   string
	token   int64
	keep    []string      // hashes in which owner is a field, renewed together
	lease   time.Duration // fixed lease; 0: the watchdog
	// base is the context the grant was given (its first level's parent,
	// which every re-entry derives from): what outlives the whole share.
	base context.Context

	// io serialises the owner's calls to Redis, so count always equals
	// the owner's count there.
	io    sync.Mutex
	count int64

	// Guarded by Client.mu.
	levels   []*shareLevel
	done     bool
	lost     error
	entries  []*watchdog.Entry
	expiry   *time.Timer
	deadline time.Time // a fixed lease's local deadline
}

// shareLevel is one acquire's share of a share.
type shareLevel struct {
	s        *share
	cancel   context.CancelCauseFunc
	released bool // guarded by Client.mu
}

// shareKey is the context key under which a context carries a level of
// the share of one primitive's kind (an RWMutex's read side, say).
type shareKey struct {
	c   *Client
	key string
}

// carriedShare returns the level of key's kind that ctx carries, if any.
func (c *Client) carriedShare(ctx context.Context, key string) *shareLevel {
	lv, _ := ctx.Value(shareKey{c, key}).(*shareLevel)
	return lv
}

// newShare registers a fresh grant made by a call sent at sent, and
// returns its first level's context, derived from parent and carrying the
// level under key. The keeper starts with it.
func (c *Client) newShare(parent context.Context, key string, s *share, sent time.Time) (context.Context, error) {
	s.c, s.count, s.base = c, 1, parent
	if c.obs != nil {
		s.granted = time.Now()
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	c.shares[s] = struct{}{}
	if s.lease > 0 {
		s.deadline = sent.Add(s.lease - watchdog.DriftMargin(s.lease))
	}
	c.mu.Unlock()
	ctx, err := s.addLevel(parent, key)
	if err != nil {
		return nil, err
	}
	if s.lease > 0 {
		timer := time.AfterFunc(time.Until(s.deadline), func() { s.lose(-1, s.leaseEnd()) })
		c.mu.Lock()
		s.expiry = timer
		c.mu.Unlock()
		return ctx, nil
	}
	entries := make([]*watchdog.Entry, 0, len(s.keep))
	for i, k := range s.keep {
		entries = append(entries, c.wd.Add(k, s.owner, sent, func(cause error) { s.lose(i, cause) }))
	}
	c.mu.Lock()
	s.entries = entries
	c.mu.Unlock()
	return ctx, nil
}

// addLevel makes a level's context: derived from parent, carrying the
// level under key, ended by its release or by the share's loss, and for a
// fixed lease bounded by its local deadline.
func (s *share) addLevel(parent context.Context, key string) (context.Context, error) {
	c := s.c
	lv := &shareLevel{s: s}
	ctx, cancel := context.WithCancelCause(context.WithValue(parent, shareKey{c, key}, lv))
	lv.cancel = cancel
	if s.lease > 0 {
		// The context's own deadline, so that it reads as one; the lease
		// timer marks the share lost at the same moment.
		dctx, stop := context.WithDeadlineCause(ctx, s.deadline, s.leaseEnd())
		ctx, lv.cancel = dctx, func(cause error) { cancel(cause); stop() }
	}
	c.mu.Lock()
	lost, closed := s.lost, c.closed
	if lost == nil {
		s.levels = append(s.levels, lv)
	}
	c.mu.Unlock()
	switch {
	case lost != nil:
		lv.cancel(lost)
		return nil, lost
	case closed:
		lv.cancel(ErrClosed)
	}
	return ctx, nil
}

// leaseEnd is the cause a fixed lease's contexts end with.
func (s *share) leaseEnd() error {
	return &leaseEndError{name: s.name, what: s.kind, lease: s.lease}
}

// takeLevel marks lv released, reporting false if it already was, whether
// it was the last level, and why the share was lost, if it was. At the
// last level of a share still held it stops the keeper, so that no
// renewal reports a loss for the release that follows.
func (s *share) takeLevel(lv *shareLevel) (ok, last bool, lost error) {
	c := s.c
	c.mu.Lock()
	expired := s.lease > 0 && !time.Now().Before(s.deadline)
	c.mu.Unlock()
	if expired {
		// The lease's local deadline passed: lost, whether or not its
		// timer has run yet.
		s.lose(-1, s.leaseEnd())
	}
	c.mu.Lock()
	if lv.released {
		c.mu.Unlock()
		return false, false, nil
	}
	lv.released = true
	s.levels = slices.DeleteFunc(s.levels, func(x *shareLevel) bool { return x == lv })
	last, lost = len(s.levels) == 0, s.lost
	if last && lost == nil {
		s.done = true
		delete(c.shares, s)
		c.obs.ended(s.metric, s.name, s.granted, nil)
	}
	c.mu.Unlock()
	if last && lost == nil {
		s.stopKeeper(-1)
	}
	return true, last, lost
}

// stopKeeper stops renewing or timing s, except entry skip (the one whose
// loss callback is running: its Stop would wait for itself). Call it
// without Client.mu: Entry.Stop waits for a loss callback in progress,
// which takes Client.mu.
func (s *share) stopKeeper(skip int) {
	s.c.mu.Lock()
	entries, expiry := s.entries, s.expiry
	s.c.mu.Unlock()
	for i, e := range entries {
		if i != skip {
			e.Stop()
		}
	}
	if expiry != nil {
		expiry.Stop()
	}
}

// lose ends s because it is no longer held: every level's context is
// cancelled with cause. It is the loss callback of s's watchdog entry
// from (-1: the lease timer, or a release that found the share gone), and
// so must not block.
func (s *share) lose(from int, cause error) {
	c := s.c
	c.mu.Lock()
	if s.done || s.lost != nil {
		c.mu.Unlock()
		return
	}
	if !errors.Is(cause, ErrLockLost) {
		cause = fmt.Errorf("%w: %w", ErrLockLost, cause)
	}
	s.lost = cause
	c.obs.ended(s.metric, s.name, s.granted, cause)
	delete(c.shares, s)
	levels := s.levels
	s.levels = nil
	c.mu.Unlock()
	s.stopKeeper(from)
	for _, lv := range levels {
		lv.cancel(cause)
	}
}

// lostOrDone returns why s can no longer be re-entered, or nil.
func (s *share) lostOrDone() error {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	switch {
	case s.lost != nil:
		return s.lost
	case s.done:
		return fmt.Errorf("%w: %q: the context carries a %s that was released", ErrNotHeld, s.name, s.kind)
	}
	return nil
}

// endLevels cancels every level's context with cause (Close: the share is
// still held, and its release still works).
func (s *share) endLevels(cause error) {
	s.c.mu.Lock()
	levels := slices.Clone(s.levels)
	s.c.mu.Unlock()
	for _, lv := range levels {
		lv.cancel(cause)
	}
}

// releaseLevel ends lv, the caller's level: at the share's last level it
// releases the share in Redis through release (given the owner's count
// before the release, returning the holds left or -1 for "not held"),
// otherwise it drops one hold. Errors as Mutex.Unlock's.
func (c *Client) releaseLevel(lv *shareLevel, release func(count int64) (int64, error)) error {
	s := lv.s
	s.io.Lock()
	defer s.io.Unlock()
	ok, _, lost := s.takeLevel(lv)
	switch {
	case !ok:
		return fmt.Errorf("%w: %q: this %s level was already released", ErrNotHeld, s.name, s.kind)
	case lost != nil:
		lv.cancel(lost)
		return fmt.Errorf("%w: %w", ErrNotHeld, lost)
	}
	defer lv.cancel(nil)
	left, err := release(s.count)
	var notSynced error
	if errors.Is(err, ErrNotReplicated) {
		notSynced, err = err, nil // it ran
	}
	switch {
	case err != nil:
		// Most likely it ran; if not, the share expires within its lease.
		s.count--
		return err
	case left < 0:
		// Lost unnoticed. lose ends the other levels, if any (at the last
		// level takeLevel marked s done, and lose does nothing); this
		// level's context ends with the loss too, and the error says it,
		// as for a loss known before the release.
		lost := fmt.Errorf("%w: %q: the %s was found gone at its release", ErrLockLost, s.name, s.kind)
		s.lose(-1, lost)
		lv.cancel(lost)
		return fmt.Errorf("%w: %w", ErrNotHeld, lost)
	}
	s.count = left
	return notSynced
}

// runReleaseCall runs a release script through run, retrying a call whose
// reply was lost (with retry set, for the script to recognise its own
// earlier run) until ReleaseTimeout, whatever the caller's context does.
func (c *Client) runReleaseCall(name string, run func(ctx context.Context, retry bool) (int64, error)) (int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.ReleaseTimeout)
	defer cancel()
	backoff, retry := c.opts.SpinBackoffMin, false
	for {
		n, err := run(ctx, retry)
		if err == nil {
			return n, nil
		}
		var notSynced *luascripts.NotReplicatedError
		if errors.As(err, &notSynced) {
			// It ran: n stands. Only a failover now could undo it.
			return n, fmt.Errorf("%w: release %q: released on the master, %w: a failover now could bring the hold back until its lease ends", ErrNotReplicated, name, notSynced)
		}
		if _, isRedis := rueidis.IsRedisErr(err); isRedis || errors.Is(err, rueidis.ErrClosing) || errors.Is(err, luascripts.ErrUnexpectedReply) || !sleep(ctx, nil, backoff) {
			return n, fmt.Errorf("latchkey: release %q: %w (the hold expires within its lease)", name, err)
		}
		retry = true
		backoff = min(backoff*2, c.opts.SpinBackoffMax)
	}
}

// checkCtx checks a call's context and its handle's error (an invalid
// name) before any I/O.
func checkCtx(ctx context.Context, handleErr error) error {
	if ctx == nil {
		return fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	return handleErr
}

// checkCall checks a lock call's context, handle and options before any I/O.
func (c *Client) checkCall(ctx context.Context, handleErr error, opts []LockOption, try bool) (lockOptions, error) {
	if err := checkCtx(ctx, handleErr); err != nil {
		return lockOptions{}, err
	}
	lo, err := buildLockOptions(opts, try)
	switch {
	case err != nil:
		return lo, err
	case c.isClosed():
		return lo, ErrClosed
	case ctx.Err() != nil:
		return lo, ctxErr(ctx)
	}
	return lo, nil
}

// lease is the lease an acquire with lo asks for.
func (c *Client) lease(lo lockOptions) time.Duration {
	if lo.leaseSet {
		return lo.lease
	}
	return c.wd.Options().Timeout
}

// notReplicated is the error of an acquire whose grant the replicas did
// not acknowledge (err, from the script layer), after undo gave it back.
func (c *Client) notReplicated(name string, err, undo error) error {
	if undo != nil {
		return fmt.Errorf("%w: acquire %q: %w; giving the grant back failed too (%v): it expires within its lease", ErrNotReplicated, name, err, undo)
	}
	return fmt.Errorf("%w: acquire %q: %w; the grant was given back", ErrNotReplicated, name, err)
}
