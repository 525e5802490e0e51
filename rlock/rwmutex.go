package rlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/rueidis"

	"github.com/latchkey/latchkey/internal/luascripts"
)

// ErrUpgrade: Lock was called with a context that carries a read hold of
// the same RWMutex (and no write hold). Upgrading a read hold would
// deadlock as soon as two readers tried it; RUnlock first, then Lock.
var ErrUpgrade = errors.New("latchkey: cannot upgrade a read hold to the write lock")

// RWMutex is a handle on a named, distributed reader/writer lock: any
// number of readers, or one writer. Get it from Client.RWMutex. As with
// Mutex, the handle is not an owner: every RLock and Lock is a new owner,
// and a call re-enters only through the context an earlier one returned.
//
//   - A reader re-enters its read hold (RLock with its context); a writer
//     re-enters its write hold, and may also take read holds, which it
//     keeps after Unlock of the write: that is a downgrade.
//   - Lock with a context that carries only a read hold fails at once with
//     ErrUpgrade instead of deadlocking.
//   - Writers come first: once a writer waits, new readers queue behind it,
//     so a stream of readers cannot starve writers. A write release wakes
//     every reader queued before the next writer (one message per client,
//     whose readers then follow one another); the last read release wakes
//     one writer.
//   - Each reader's hold has its own lease (watchdog-renewed without
//     WithLease), so a dead reader's hold lapses without the others'.
//
// Writers' holds carry fencing tokens (Token); read holds do not.
type RWMutex struct {
	c    *Client
	name string
	keys luascripts.RWKeys
	spin bool
	err  error
}

// RWMutex returns a handle on the reader/writer lock called name. Names
// follow Mutex's rules; an RWMutex and a Mutex of the same name are
// different locks (their keys share the name's Cluster slot).
func (c *Client) RWMutex(name string) *RWMutex {
	return c.newRWMutex(name, false)
}

// SpinRWMutex returns a handle on the reader/writer lock called name that
// waits by polling with backoff, as SpinMutex does, instead of pub/sub.
// It shares RWMutex's scripts and interoperates with it, but it never
// queues, so it gets none of the ordering: waiting writers do not hold
// back new readers that poll. It exists to compare against.
func (c *Client) SpinRWMutex(name string) *RWMutex {
	return c.newRWMutex(name, true)
}

func (c *Client) newRWMutex(name string, spin bool) *RWMutex {
	keys, err := lockKeys(c.opts.Prefix, name)
	return &RWMutex{c: c, name: name, keys: rwKeys(keys), spin: spin, err: err}
}

// Name is the lock's name.
func (rw *RWMutex) Name() string { return rw.name }

// RLock blocks until it holds a read hold or ctx ends, and returns its
// context: derived from ctx, ended by the matching RUnlock, or with cause
// ErrLockLost when the hold is lost. A ctx that carries a read hold of
// this lock re-enters it at once. A ctx that carries its write hold takes
// a read hold at once (writers may read), whose context does not end with
// the write Unlock: keep it to downgrade. Options as Mutex.Lock.
func (rw *RWMutex) RLock(ctx context.Context, opts ...LockOption) (context.Context, error) {
	lo, err := rw.check(ctx, opts, false)
	if err != nil {
		return nil, err
	}
	return rw.lock(ctx, false, lo, time.Time{}, false)
}

// TryRLock is RLock that gives up when a writer holds or waits: at once,
// or after waiting up to WithWait(d). It reports false with a nil error
// when it gave up.
func (rw *RWMutex) TryRLock(ctx context.Context, opts ...LockOption) (context.Context, bool, error) {
	return rw.tryLock(ctx, false, opts)
}

// Lock blocks until it holds the write lock or ctx ends; see Mutex.Lock
// for its context, leases and retries. A ctx that carries the write hold
// re-enters it; one that carries only a read hold gets ErrUpgrade.
func (rw *RWMutex) Lock(ctx context.Context, opts ...LockOption) (context.Context, error) {
	lo, err := rw.check(ctx, opts, false)
	if err != nil {
		return nil, err
	}
	return rw.lock(ctx, true, lo, time.Time{}, false)
}

// TryLock is Lock that gives up when the lock is busy: at once, or after
// waiting up to WithWait(d). It reports false with a nil error when it
// gave up.
func (rw *RWMutex) TryLock(ctx context.Context, opts ...LockOption) (context.Context, bool, error) {
	return rw.tryLock(ctx, true, opts)
}

func (rw *RWMutex) tryLock(ctx context.Context, write bool, opts []LockOption) (context.Context, bool, error) {
	lo, err := rw.check(ctx, opts, true)
	if err != nil {
		return nil, false, err
	}
	return tried(rw.lock(ctx, write, lo, time.Now().Add(lo.wait), lo.wait == 0))
}

// RUnlock releases the read hold that ctx carries (its innermost level);
// the read hold itself ends at its last level. Errors as Mutex.Unlock.
func (rw *RWMutex) RUnlock(ctx context.Context) error {
	return rw.unlock(ctx, false)
}

// Unlock releases the write hold that ctx carries (its innermost level).
// Read holds the writer took stay. Errors as Mutex.Unlock.
func (rw *RWMutex) Unlock(ctx context.Context) error {
	return rw.unlock(ctx, true)
}

// Token returns the fencing token of the write hold that ctx carries, even
// when it was lost, or ErrNotHeld: see Mutex.Token. Read holds have none.
func (rw *RWMutex) Token(ctx context.Context) (int64, error) {
	if err := rw.checkCtx(ctx); err != nil {
		return 0, err
	}
	lv := rw.c.carriedShare(ctx, rw.side(true))
	if lv == nil {
		return 0, fmt.Errorf("%w: %q: the context carries no write hold (read holds have no fencing token)", ErrNotHeld, rw.name)
	}
	if err := lv.s.lostOrDone(); err != nil && !errors.Is(err, ErrLockLost) {
		return 0, err
	}
	return lv.s.token, nil
}

// side is the key under which contexts carry the read or write side.
func (rw *RWMutex) side(write bool) string {
	if write {
		return rw.keys.Write
	}
	return rw.keys.Readers
}

// room is the key of the client's room for the read or write side: the
// spin variant has rooms of its own, as it never queues.
func (rw *RWMutex) room(write bool) string {
	if rw.spin {
		return rw.side(write) + ":spin"
	}
	return rw.side(write)
}

// metricKind is the side's latchkey.kind attribute.
func (rw *RWMutex) metricKind(write bool) lockKind {
	if write {
		return kindWrite.spinIf(rw.spin)
	}
	return kindRead.spinIf(rw.spin)
}

func (rw *RWMutex) kind(write bool) string {
	if write {
		return "write lock"
	}
	return "read lock"
}

// lock re-enters a hold that ctx carries, or contends for a new one.
func (rw *RWMutex) lock(ctx context.Context, write bool, lo lockOptions, deadline time.Time, noWait bool) (_ context.Context, err error) {
	c := rw.c
	wl := c.carriedShare(ctx, rw.keys.Write)
	rl := c.carriedShare(ctx, rw.keys.Readers)
	writing := wl != nil && wl.s.lostOrDone() == nil
	parent, writer := ctx, ""
	switch {
	case write && wl != nil && (writing || rl == nil || rl.s.lostOrDone() != nil):
		return rw.reenter(ctx, wl, true)
	case write && rl != nil && rl.s.lostOrDone() == nil:
		return nil, fmt.Errorf("%w: %q: RUnlock the read hold first", ErrUpgrade, rw.name)
	case !write && rl != nil:
		return rw.reenter(ctx, rl, false)
	case !write && writing:
		// A writer's read hold must outlive the write hold's last Unlock
		// (that is the downgrade): it ends with what the write grant was
		// given, not with any write level's context (a re-entry's parent
		// is an outer level's).
		parent, writer = valuesFrom{Context: wl.s.base, values: ctx}, wl.s.owner
	}
	obs := c.obs.begin(ctx, rw.metricKind(write), rw.name)
	defer func() { obs.end(ctx, err) }()
	owner, sent := "", time.Time{}
	var token int64
	ct := contest{
		room:   rw.room(write),
		inbox:  rw.keys.Inbox(c.id, write),
		spin:   rw.spin,
		shared: !write,
		try: func(ctx context.Context, queued bool) (bool, time.Duration, error) {
			owner, sent = c.newOwner(), time.Now()
			r, err := luascripts.RunRWAcquire(ctx, c.rc, rw.keys, write, luascripts.RWAcquireArgs{
				Owner: owner, Lease: c.lease(lo), Client: c.id, Queued: queued, Writer: writer, Wake: c.wake, Sync: c.opts.sync(), About: c.about,
			})
			if hook := c.opts.OnAttempt; hook != nil {
				hook(rw.name, r.Granted && err == nil)
			}
			if err != nil && r.Granted {
				return false, 0, c.notReplicated(rw.name, err, rw.undo(owner, write))
			}
			if err != nil {
				return false, 0, rw.failed(owner, write, err)
			}
			token = r.Token
			return r.Granted, r.PTTL, nil
		},
		leave: func() {
			lctx, cancel := context.WithTimeout(context.Background(), min(c.opts.ReleaseTimeout, leaveTimeout))
			defer cancel()
			_ = luascripts.RunRWLeave(lctx, c.rc, rw.keys, c.id, write, c.wake)
		},
		onWait: func() {
			obs.waiting()
			if hook := c.opts.OnWait; hook != nil {
				hook(rw.name)
			}
		},
	}
	if writer != "" {
		// Granted without waiting, so outside the room: a writer's read
		// must not queue behind this client's other readers.
		ok, _, err := ct.try(ctx, false)
		if err == nil && !ok {
			err = fmt.Errorf("%w: %q: the write hold was lost", ErrLockLost, rw.name)
		}
		if err != nil {
			// The write hold's context may have ended under the call (its
			// loss cancels it): say why, not how the call broke off.
			return nil, ended(ctx, ctx, err)
		}
	} else if err := c.contend(ctx, ct, deadline, noWait); err != nil {
		return nil, err
	}
	s := &share{kind: rw.kind(write), metric: rw.metricKind(write), name: rw.name, owner: owner, token: token, lease: lo.lease, keep: []string{rw.keys.Write}}
	if !write {
		s.keep = []string{rw.keys.Readers, rw.keys.Reader(owner)}
	}
	lctx, err := c.newShare(parent, rw.side(write), s, sent)
	if err != nil {
		_, _ = rw.release(s.owner, write, 1) // closed: the grant is not wanted
	}
	return lctx, err
}

// failed handles an acquire call's error: a call that may have run is
// undone and reported as of unknown outcome, which the wait retries.
func (rw *RWMutex) failed(owner string, write bool, err error) error {
	if _, isRedis := rueidis.IsRedisErr(err); isRedis || errors.Is(err, luascripts.ErrUnexpectedReply) {
		return fmt.Errorf("latchkey: %s %q: %w", rw.kind(write), rw.name, err)
	}
	return rw.c.unknownOutcome(rw.name, err, rw.undo(owner, write))
}

// undo takes back a grant that a call of unknown outcome may have made.
func (rw *RWMutex) undo(owner string, write bool) error {
	_, err := rw.unlockCall(luascripts.RWUnlockArgs{Owner: owner, Write: write, Count: 1, Retry: true})
	return err
}

// release drops one of owner's holds, whose count is count.
func (rw *RWMutex) release(owner string, write bool, count int64) (int64, error) {
	return rw.unlockCall(luascripts.RWUnlockArgs{Owner: owner, Write: write, Count: count, Sync: rw.c.opts.sync()})
}

// unlockCall runs RWUnlock with a, and again, marked a retry, after a
// call of unknown outcome. The wake-ups it sends are counted.
func (rw *RWMutex) unlockCall(a luascripts.RWUnlockArgs) (int64, error) {
	a.Wake = rw.c.wake
	return rw.c.runReleaseCall(rw.name, func(ctx context.Context, retry bool) (int64, error) {
		a.Retry = a.Retry || retry
		left, woken, err := luascripts.RunRWUnlock(ctx, rw.c.rc, rw.keys, a)
		rw.c.obs.woke(rw.metricKind(a.Write), rw.name, woken)
		return left, err
	})
}

// reenter takes one more hold for the owner of lv. A call whose outcome
// is unknown (its connection failed) is undone and retried until ctx ends,
// as Mutex's re-entry is.
func (rw *RWMutex) reenter(ctx context.Context, lv *shareLevel, write bool) (context.Context, error) {
	s, c := lv.s, rw.c
	s.io.Lock()
	defer s.io.Unlock()
	if err := s.lostOrDone(); err != nil {
		return nil, err
	}
	backoff := c.opts.SpinBackoffMin
	for {
		var n int64
		var err error
		if write {
			n, err = luascripts.RunReenter(ctx, c.rc, luascripts.Keys{Lock: rw.keys.Write}, s.owner)
		} else {
			n, err = luascripts.RunRWReenter(ctx, c.rc, rw.keys, s.owner)
		}
		switch {
		case err == nil && n == 0:
			s.lose(-1, fmt.Errorf("%q: the %s was found gone at a re-entry", rw.name, rw.kind(write)))
			return nil, s.lostOrDone()
		case err == nil:
			s.count = n
			c.obs.reentered(s.metric, rw.name)
			return s.addLevel(ctx, rw.side(write))
		}
		if _, isRedis := rueidis.IsRedisErr(err); isRedis || errors.Is(err, luascripts.ErrUnexpectedReply) {
			return nil, fmt.Errorf("latchkey: re-enter the %s %q: %w", rw.kind(write), rw.name, err)
		}
		// The re-entry may have counted: take it back if so (the release
		// script, told it may be a retry, changes nothing otherwise).
		_, undoErr := rw.unlockCall(luascripts.RWUnlockArgs{Owner: s.owner, Write: write, Count: s.count + 1, Retry: true})
		err = c.unknownOutcome(rw.name, err, undoErr)
		if !transient(ctx, err) || undoErr != nil {
			return nil, ended(ctx, ctx, err)
		}
		if !sleep(ctx, c.closing, backoff) {
			return nil, ended(ctx, ctx, withLast(ctxErr(ctx), err))
		}
		backoff = min(backoff*2, c.opts.SpinBackoffMax)
	}
}

func (rw *RWMutex) unlock(ctx context.Context, write bool) error {
	if err := rw.checkCtx(ctx); err != nil {
		return err
	}
	lv := rw.c.carriedShare(ctx, rw.side(write))
	if lv == nil {
		return fmt.Errorf("%w: %q: the context carries no %s of it (pass the context the lock call returned)", ErrNotHeld, rw.name, rw.kind(write))
	}
	return rw.c.releaseLevel(lv, func(count int64) (int64, error) { return rw.release(lv.s.owner, write, count) })
}

func (rw *RWMutex) checkCtx(ctx context.Context) error { return checkCtx(ctx, rw.err) }

func (rw *RWMutex) check(ctx context.Context, opts []LockOption, try bool) (lockOptions, error) {
	return rw.c.checkCall(ctx, rw.err, opts, try)
}

// valuesFrom is a context whose cancellation and deadline are Context's
// and whose values are values'.
type valuesFrom struct {
	context.Context
	values context.Context
}

func (v valuesFrom) Value(key any) any { return v.values.Value(key) }
