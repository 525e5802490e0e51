package rlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Locker returns m as a sync.Locker, for code that takes one (a cache, a
// connection pool, sync.Cond). Its Lock blocks until it holds the lock,
// retrying failures (Redis unreachable, say) with a backoff of up to a
// second; its Unlock releases. Like sync.Mutex, it is not reentrant, and
// any goroutine may Unlock what another locked.
//
// A sync.Locker cannot report errors, so the limits are these:
//   - Lock panics if ctx ends or the client is closed before it holds the
//     lock, and if m's name is invalid. Give it a context that lives as
//     long as the code that uses the Locker.
//   - Unlock panics if the Locker is not locked, as sync.Mutex does.
//   - There is no loss signal: if the lock is lost while held (its lease
//     ran out, Redis lost it), nothing tells the holder, and Unlock ignores
//     the failed release. Where that matters, use the Mutex and the context
//     its Lock returns.
//   - Without WithLease in opts, the watchdog keeps each hold for as long
//     as it lasts.
//   - ctx must not carry a hold of m (a context m's Lock returned): Lock
//     would re-enter that hold instead of excluding.
func Locker(ctx context.Context, m *Mutex, opts ...LockOption) sync.Locker {
	return &locker{ctx: ctx, m: m, opts: opts}
}

// lockerRetryMax bounds the pause between a Locker's failed Lock calls.
const lockerRetryMax = time.Second

type locker struct {
	ctx  context.Context
	m    *Mutex
	opts []LockOption

	mu   sync.Mutex
	held context.Context // the current hold's context; nil when unlocked
}

func (l *locker) Lock() {
	backoff := l.m.c.opts.SpinBackoffMin
	for {
		lctx, err := l.m.Lock(l.ctx, l.opts...)
		if err == nil {
			l.mu.Lock()
			l.held = lctx
			l.mu.Unlock()
			return
		}
		if l.ctx.Err() != nil || errors.Is(err, ErrClosed) || errors.Is(err, ErrInvalidName) || errors.Is(err, ErrInvalidArgument) {
			panic(fmt.Sprintf("latchkey: Locker.Lock of %q cannot succeed: %v", l.m.name, err))
		}
		if !sleep(l.ctx, nil, backoff) {
			panic(fmt.Sprintf("latchkey: Locker.Lock of %q cannot succeed: %v (last error: %v)", l.m.name, context.Cause(l.ctx), err))
		}
		backoff = min(backoff*2, lockerRetryMax)
	}
}

func (l *locker) Unlock() {
	l.mu.Lock()
	lctx := l.held
	l.held = nil
	l.mu.Unlock()
	if lctx == nil {
		panic(fmt.Sprintf("latchkey: unlock of unlocked Locker of %q", l.m.name))
	}
	// A failed release leaves nothing to do: the hold is gone, or expires
	// within its lease (see the doc comment).
	_ = l.m.Unlock(lctx)
}
