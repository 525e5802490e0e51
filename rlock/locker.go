package rlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/latchkey/latchkey/internal/luascripts"
)

// Lockable is what Locker adapts: a lock whose Lock returns the context
// that its Unlock takes. *Mutex, *RWMutex (its write side) and
// *MultiMutex are Lockable.
type Lockable interface {
	Lock(ctx context.Context, opts ...LockOption) (context.Context, error)
	Unlock(ctx context.Context) error
}

// Locker returns l as a sync.Locker, for code that takes one (sync.Cond, a
// pool). Its Lock blocks until it holds the lock, retrying failures with a
// backoff of up to a second. Like sync.Mutex it is not reentrant, and any
// goroutine may Unlock what another locked. A sync.Locker cannot report
// errors, so:
//   - Lock panics, with an error wrapping the cause, if ctx is nil or ends,
//     the client is closed, or the handle can never be locked (an invalid
//     name, a kind its client's Protocol refuses, a write lock asked with
//     a read hold in ctx): give it a context that lives as long as the
//     Locker's users.
//   - Unlock panics if the Locker is not locked, as sync.Mutex does.
//   - A lock lost while held goes unnoticed, and Unlock ignores a failed
//     release: where that matters, use the lock and its Lock's context.
//   - Without WithLease in opts, the watchdog keeps each hold.
//   - ctx must not carry a hold of the lock: Lock would re-enter it.
func Locker(ctx context.Context, l Lockable, opts ...LockOption) sync.Locker {
	return &locker{ctx: ctx, l: l, opts: opts}
}

// RLocker returns the read side of rw as a sync.Locker, as
// sync.RWMutex.RLocker does, with Locker's retries and limits. Goroutines
// sharing it read at once: each Lock is a reader of its own, and an Unlock
// releases one of the read holds its Locks took.
func RLocker(ctx context.Context, rw *RWMutex, opts ...LockOption) sync.Locker {
	return &locker{ctx: ctx, l: readSide{rw}, opts: opts}
}

// readSide is rw's read side as a Lockable.
type readSide struct{ rw *RWMutex }

func (r readSide) Lock(ctx context.Context, opts ...LockOption) (context.Context, error) {
	return r.rw.RLock(ctx, opts...)
}
func (r readSide) Unlock(ctx context.Context) error { return r.rw.RUnlock(ctx) }
func (r readSide) Name() string                     { return r.rw.Name() }

type locker struct {
	ctx  context.Context
	l    Lockable
	opts []LockOption

	mu   sync.Mutex
	held []context.Context // the holds' contexts: one at most, but for RLocker
}

// name is the lock's name for panics, when it has one.
func (l *locker) name() string {
	if n, ok := l.l.(interface{ Name() string }); ok {
		return n.Name()
	}
	return fmt.Sprint(l.l)
}

func (l *locker) Lock() {
	backoff := luascripts.Backoff{Min: time.Millisecond, Max: time.Second} // as Locker's doc says
	for {
		lctx, err := l.l.Lock(l.ctx, l.opts...)
		if err == nil {
			l.mu.Lock()
			l.held = append(l.held, lctx)
			l.mu.Unlock()
			return
		}
		// l.ctx is checked after the error: Lock refuses a nil one. The
		// panics are errors, for errors.Is after a recover.
		if hopeless(err) || l.ctx.Err() != nil {
			panic(fmt.Errorf("latchkey: Locker.Lock of %q cannot succeed: %w", l.name(), err))
		}
		if !backoff.Sleep(l.ctx) {
			panic(fmt.Errorf("latchkey: Locker.Lock of %q cannot succeed: %w (last error: %w)", l.name(), context.Cause(l.ctx), err))
		}
	}
}

// hopeless reports an error that no retry can cure: the call, the handle
// or the client is wrong, or closed.
func hopeless(err error) bool {
	for _, e := range []error{ErrInvalidArgument, ErrInvalidName, ErrInvalidOptions, ErrUpgrade, ErrClosed} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

func (l *locker) Unlock() {
	l.mu.Lock()
	var lctx context.Context
	if n := len(l.held); n > 0 {
		lctx, l.held = l.held[n-1], l.held[:n-1]
	}
	l.mu.Unlock()
	if lctx == nil {
		panic(fmt.Sprintf("latchkey: unlock of unlocked Locker of %q", l.name()))
	}
	_ = l.l.Unlock(lctx) // on failure the hold is gone, or expires within its lease
}
