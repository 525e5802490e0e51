package rlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/latchkey/latchkey/internal/luascripts"
)

// ErrUpgrade: Lock was called with a context that carries a read hold of
// the same RWMutex (and no write hold). Upgrading a read hold would
// deadlock as soon as two readers tried it; RUnlock first, then Lock.
var ErrUpgrade = errors.New("latchkey: cannot upgrade a read hold to the write lock")

// RWMutex is a handle on a named, distributed reader/writer lock: any
// number of readers, or one writer. Get it from Client.RWMutex. Ownership
// and re-entry are Mutex's, per side. A writer may also take read holds,
// which it keeps after the write's Unlock (a downgrade); Lock with only a
// read hold fails with ErrUpgrade. Writers come first: once a writer
// waits, new readers queue behind it; a write release wakes the readers
// queued before the next writer, the last read release one writer. Each
// reader's hold has its own lease, so a dead reader lapses alone. Write
// holds carry fencing tokens; read holds do not.
type RWMutex struct {
	c           *Client
	name        string
	keys        luascripts.RWKeys
	read, write *side
	err         error
}

// RWMutex returns a handle on the reader/writer lock called name. Names
// are Mutex's (a Mutex of the same name is another lock).
func (c *Client) RWMutex(name string) *RWMutex {
	return c.newRWMutex(name, false)
}

// SpinRWMutex is RWMutex waiting by polling, as SpinMutex does. It
// interoperates with RWMutex but never queues, so waiting writers do not
// hold back new readers that poll. It exists to compare against.
func (c *Client) SpinRWMutex(name string) *RWMutex {
	return c.newRWMutex(name, true)
}

func (c *Client) newRWMutex(name string, spin bool) *RWMutex {
	base, err := lockKeys(c.opts.Prefix, name)
	if err == nil {
		err = c.latchkeyOnly("RWMutex")
	}
	rw := &RWMutex{c: c, name: name, keys: rwKeys(base), err: err}
	rw.read, rw.write = rw.newSide(false, spin, ""), rw.newSide(true, spin, "")
	return rw
}

// newSide builds the read or write side; writer, for a read side, is the
// write owner whose read hold it takes (a downgrade), or "".
func (rw *RWMutex) newSide(write, spin bool, writer string) *side {
	c, keys := rw.c, rw.keys
	sd := c.newSide(rw.name, keys.Readers, keys.Inbox(c.id, write), "read lock", kindRead.spinIf(spin), spin)
	sd.shared = !write
	sd.acquire = func(ctx context.Context, a luascripts.AcquireArgs) (reply, error) {
		r, err := luascripts.RunRWAcquire(ctx, c.rc, keys, a, write, writer)
		return reply{AcquireReply: r}, err
	}
	sd.reenter = func(ctx context.Context, owner string) (int64, error) {
		return luascripts.RunRWReenter(ctx, c.rc, keys, owner)
	}
	sd.release = func(ctx context.Context, a luascripts.ReleaseArgs) (luascripts.ReleaseReply, error) {
		return luascripts.RunRWUnlock(ctx, c.rc, keys, a, write)
	}
	sd.leave = func(ctx context.Context) error { return luascripts.RunRWLeave(ctx, c.rc, keys, c.entry, write, c.wake) }
	// Each renewal moves the owner's own lease in the readers' lease set.
	sd.keep = [][]string{keys.ReadKeep()}
	if write {
		sd.key, sd.what, sd.metric = keys.Write, "write lock", kindWrite.spinIf(spin)
		sd.reenter = func(ctx context.Context, owner string) (int64, error) {
			return luascripts.Keys{Lock: keys.Write}.Reenter(ctx, c.rc, owner)
		}
		sd.keep = [][]string{{keys.Write}}
	}
	return sd
}

// Name is the lock's name.
func (rw *RWMutex) Name() string { return rw.name }

// RLock is Mutex.Lock for a read hold. A ctx that carries the write hold
// takes a read hold at once (writers may read), whose context does not end
// with the write Unlock: keep it to downgrade.
func (rw *RWMutex) RLock(ctx context.Context, opts ...LockOption) (context.Context, error) {
	return rw.c.lockCall(ctx, rw.err, opts, rw.lockSide(false))
}

// TryRLock is Mutex.TryLock for a read hold: it gives up while a writer
// holds or waits.
func (rw *RWMutex) TryRLock(ctx context.Context, opts ...LockOption) (context.Context, bool, error) {
	return rw.c.tryLockCall(ctx, rw.err, opts, rw.lockSide(false))
}

// Lock is Mutex.Lock for the write hold; a ctx that carries only a read
// hold gets ErrUpgrade.
func (rw *RWMutex) Lock(ctx context.Context, opts ...LockOption) (context.Context, error) {
	return rw.c.lockCall(ctx, rw.err, opts, rw.lockSide(true))
}

// TryLock is Mutex.TryLock for the write hold.
func (rw *RWMutex) TryLock(ctx context.Context, opts ...LockOption) (context.Context, bool, error) {
	return rw.c.tryLockCall(ctx, rw.err, opts, rw.lockSide(true))
}

// RUnlock is Mutex.Unlock for a read hold.
func (rw *RWMutex) RUnlock(ctx context.Context) error {
	return rw.c.unlockCarried(ctx, rw.err, rw.read.key, rw.name, rw.read.what)
}

// Unlock is Mutex.Unlock for the write hold; read holds the writer took
// stay.
func (rw *RWMutex) Unlock(ctx context.Context) error {
	return rw.c.unlockCarried(ctx, rw.err, rw.write.key, rw.name, rw.write.what)
}

// Token is Mutex.Token for the write hold; read holds have none.
func (rw *RWMutex) Token(ctx context.Context) (int64, error) {
	return rw.c.tokenCarried(ctx, rw.err, rw.keys.Write, rw.name, "write hold (read holds have none)")
}

// Extend is Mutex.Extend for the write hold.
func (rw *RWMutex) Extend(lctx context.Context, lease time.Duration) error {
	return rw.c.extendCarried(lctx, rw.err, rw.keys.Write, rw.name, "write hold", lease)
}

// RExtend is Mutex.Extend for a read hold.
func (rw *RWMutex) RExtend(lctx context.Context, lease time.Duration) error {
	return rw.c.extendCarried(lctx, rw.err, rw.keys.Readers, rw.name, "read hold", lease)
}

// lockSide is the write or read side's lock: it re-enters a hold that ctx
// carries, downgrades, or contends for a new one.
func (rw *RWMutex) lockSide(write bool) lockFunc {
	return func(ctx context.Context, lo lockOptions, deadline time.Time, noWait bool) (context.Context, error) {
		wl, rl := rw.c.carried(ctx, rw.keys.Write), rw.c.carried(ctx, rw.keys.Readers)
		writing := wl != nil && wl.h.lostOrDone() == nil
		switch {
		case write && wl != nil && (writing || rl == nil || rl.h.lostOrDone() != nil):
			return wl.h.reenter(ctx, wl)
		case write && rl != nil && rl.h.lostOrDone() == nil:
			return nil, fmt.Errorf("%w: %q: RUnlock the read hold first", ErrUpgrade, rw.name)
		case write:
			return rw.write.lock(ctx, lo, deadline, noWait)
		case rl != nil || !writing:
			return rw.read.lock(ctx, lo, deadline, noWait)
		}
		return rw.downgrade(ctx, wl.h, lo)
	}
}

// downgrade takes a read hold for the writer that holds w: granted at once,
// outside the turn, so it never queues behind this client's readers. It
// must outlive the write hold's last Unlock, so it ends with the write
// grant's parent context, not a write level's. A try of unknown outcome is
// undone and retried, as a re-entry is.
func (rw *RWMutex) downgrade(ctx context.Context, w *hold, lo lockOptions) (_ context.Context, err error) {
	c := rw.c
	sd := rw.newSide(false, rw.read.spin, w.owner)
	lo.obs = c.obs.begin(ctx, sd.metric, rw.name)
	defer func() { lo.obs.end(ctx, err) }()
	retry := retryBackoff()
	for {
		// Outside the turn, yet counted and cut by Close as a contender is.
		lctx, t, err := sd.tryAside(ctx, valuesFrom{Context: w.base, values: ctx}, lo)
		switch {
		case t.Acquired:
			return lctx, err
		case err == nil:
			err = fmt.Errorf("%w: %q: the write hold was lost", ErrLockLost, rw.name)
		case transient(ctx, err):
			serr := sleep(ctx, c.closing, retry.Next())
			if serr == nil {
				continue
			}
			err = withLast(serr, err)
		}
		// The write hold's loss may have cancelled ctx: say why.
		return nil, ended(ctx, ctx, err)
	}
}

// valuesFrom is a context whose cancellation and deadline are Context's
// and whose values are values'.
type valuesFrom struct {
	context.Context
	values context.Context
}

func (v valuesFrom) Value(key any) any { return v.values.Value(key) }
