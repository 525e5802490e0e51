package rlock

import (
	"context"
	"errors"
	"fmt"

	"github.com/latchkey/latchkey/internal/luascripts"
)

// Errors returned by this package. Match them with errors.Is: most are
// wrapped with the lock's name and the underlying cause.
var (
	// ErrNotHeld: Unlock by an owner that does not hold the lock; nothing was
	// changed. If it did hold it, it lost it (ErrLockLost) before the Unlock.
	ErrNotHeld = errors.New("latchkey: lock not held by this owner")
	// ErrLockLost is the cause of a lock context's cancellation when the
	// lock is no longer held (found gone, renewals failed until its lease
	// ran out, an explicit lease ran out, or it was taken over): stop
	// writing. Check with errors.Is(context.Cause(ctx), ErrLockLost).
	ErrLockLost = errors.New("latchkey: lock lost")
	// ErrClosed: the Client was closed. Waiters return it promptly; held
	// locks' contexts are cancelled with it as cause.
	ErrClosed = errors.New("latchkey: client closed")
	// ErrInvalidName: the lock name is empty, too long, or has a brace.
	// Returned before any I/O.
	ErrInvalidName = errors.New("latchkey: invalid lock name")
	// ErrInvalidArgument: a nil context or a bad LockOption (an out-of-range
	// duration, WithWait on Lock). Returned before any I/O.
	ErrInvalidArgument = errors.New("latchkey: invalid argument")
	// ErrInvalidOptions: NewClient got a nil rueidis client or bad Options.
	ErrInvalidOptions = errors.New("latchkey: invalid options")
	// ErrWrongType: a key where latchkey keeps a lock's state holds another
	// type: check the name, the kind and Options.Prefix (an application's
	// key under the prefix, or a lock of another kind or protocol). Every
	// call whose script meets such a key returns it at once, wrapping
	// Redis' WRONGTYPE, with nothing to undo and no retry; ForceUnlock
	// refuses with it and deletes nothing; Inspect and List report the lock
	// as damaged (LockInfo.Damaged) instead.
	ErrWrongType = luascripts.ErrWrongType
	// ErrNotReplicated: with Options.SyncReplicas, too few replicas
	// acknowledged a change in time. From an acquire, nothing is held; from
	// a release, the lock was released, but a failover could bring it back
	// until its lease ends. A lock's context lost because its renewals
	// failed has it in its cause when the last one was not acknowledged.
	ErrNotReplicated = errors.New("latchkey: not acknowledged by enough replicas")
	// ErrObserveFailed: Redis refused an election's observer (Watch,
	// Observe) with an error no retry cures, such as an ACL's NOPERM; it
	// wraps Redis' error.
	ErrObserveFailed = errors.New("latchkey: observing the election failed")
)

// ctxErr reports why ctx ended, keeping both ctx.Err() (so errors.Is with
// context.Canceled or DeadlineExceeded works) and the cause, when one was set.
func ctxErr(ctx context.Context) error {
	err := ctx.Err()
	if cause := context.Cause(ctx); cause != nil && cause != err {
		return fmt.Errorf("%w: %w", err, cause)
	}
	return err
}

// ready refuses, before any I/O, a nil context (ErrInvalidArgument), a
// handle's error (an invalid name, say) and an ended context (ctxErr).
func ready(ctx context.Context, handleErr error) error {
	if err := checkCtx(ctx, handleErr); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return ctxErr(ctx)
	}
	return nil
}

// errFoundGone is why a hold is lost when a call finds its lock gone
// (foundGone): the metrics count it as "gone", as the watchdog's ErrGone.
var errFoundGone = errors.New("was found gone")
