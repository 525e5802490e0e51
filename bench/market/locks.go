package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/redis/rueidis"

	"github.com/latchkey/latchkey/rlock"
)

// guard is how a lock variant makes one listing or purchase exclusive.
type guard interface {
	// acquire takes the lock called name on behalf of w, waiting up to the
	// acquire timeout. failed is how many tries failed before it returned.
	acquire(ctx context.Context, w *worker, name string) (h held, failed int64, err error)
}

// held is one acquired lock: do the work under ctx, then release.
type held struct {
	ctx     context.Context
	release func() error
}

// setnxPrefix starts the seed's lock keys: "lock:<name>".
const setnxPrefix = "lock:"

// releaseIfMine deletes the lock only if it still holds our identifier: the
// compare-and-delete that the seed's releaseLock does with WATCH, GET,
// MULTI, DEL, EXEC, in one round trip.
const releaseIfMine = `if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) end return 0`

// setnxGuard is the seed's basic lock: SET NX of a random UUID, retried
// after a short sleep until the acquire timeout, no expiry. It runs on the
// worker's own connection, as each of the book's processes had one.
type setnxGuard struct {
	timeout, sleep time.Duration
}

func (g setnxGuard) acquire(ctx context.Context, w *worker, name string) (held, int64, error) {
	key := setnxPrefix + name
	id := uuid.NewString()
	end := time.Now().Add(g.timeout)
	var failed int64
	for {
		err := w.conn.Do(ctx, w.conn.B().Set().Key(key).Value(id).Nx().Build()).Error()
		switch {
		case err == nil:
			return held{ctx: ctx, release: func() error { return g.release(ctx, w, key, id) }}, failed, nil
		case !rueidis.IsRedisNil(err):
			return held{}, failed, fmt.Errorf("SET %s NX: %w", key, err)
		}
		failed++
		if !time.Now().Before(end) {
			return held{}, failed, fmt.Errorf("%w: %s stayed busy for %v; the seed's lock never expires, so a crashed holder keeps it: FLUSHALL and run again", errLockTimeout, key, g.timeout)
		}
		if err := sleepCtx(ctx, g.sleep); err != nil {
			return held{}, failed, err
		}
	}
}

func (g setnxGuard) release(ctx context.Context, w *worker, key, id string) error {
	n, err := w.conn.Do(ctx, w.conn.B().Eval().Script(releaseIfMine).Numkeys(1).Key(key).Arg(id).Build()).AsInt64()
	switch {
	case err != nil:
		return fmt.Errorf("releasing %s: %w", key, err)
	case n != 1:
		return fmt.Errorf("%w: %s no longer held our id; something deleted or took it", errLockNotHeld, key)
	}
	return nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// latchkeyGuard takes latchkey locks: one shared rlock.Client per run,
// waiting on pub/sub, a fixed lease so no watchdog is involved. Its failed
// tries are counted by rlock.Options.OnAttempt (see newLatchkey), so
// acquire reports none.
type latchkeyGuard struct {
	locks       *rlock.Client
	wait, lease time.Duration
}

func (g latchkeyGuard) acquire(ctx context.Context, _ *worker, name string) (held, int64, error) {
	m := g.locks.Mutex(name)
	// TryLock with WithWait bounds only the wait, like the seed's acquire
	// timeout; a deadline on Lock's ctx would bound the hold as well.
	lctx, ok, err := m.TryLock(ctx, rlock.WithWait(g.wait), rlock.WithLease(g.lease))
	switch {
	case err != nil:
		return held{}, 0, fmt.Errorf("latchkey lock %q: %w", name, err)
	case !ok:
		return held{}, 0, fmt.Errorf("%w: latchkey lock %q stayed busy for %v", errLockTimeout, name, g.wait)
	}
	release := func() error {
		err := m.Unlock(lctx)
		if errors.Is(err, rlock.ErrNotHeld) {
			return fmt.Errorf("%w: %w; the lease (%v) may be too short for a purchase", errLockNotHeld, err, g.lease)
		}
		return err
	}
	return held{ctx: lctx, release: release}, 0, nil
}
