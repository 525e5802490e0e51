package locks

import (
	"context"
	"fmt"
	"os"
	"strconv"

	"github.com/redis/rueidis"

	"github.com/latchkey/latchkey/rlock"
)

// HandoversEnv, when set, is latchkey's rlock.Options.MaxLocalHandovers in
// every run (negative: no handovers). It is for experiments only: no
// results record it, so lockbench refuses to run -suite, whose results are
// the page's, while it is set.
const HandoversEnv = "LOCKBENCH_LATCHKEY_HANDOVERS"

// latchkeyLib is rlock over one rueidis client, with the pub/sub Mutex or
// the polling SpinMutex.
type latchkeyLib struct {
	rc    rueidis.Client
	c     *rlock.Client
	lease rlock.LockOption
	spin  bool
}

func openLatchkey(opts Options, spin bool) (Lib, error) {
	// rlock needs no client-side cache; the cache's tracking would only add
	// invalidation traffic.
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{opts.Addr}, DisableCache: true})
	if err != nil {
		return nil, fmt.Errorf("locks: latchkey: connecting to %s: %w", opts.Addr, err)
	}
	lo := rlock.Options{SpinBackoffMax: opts.Backoff} // 0: rlock's default
	if on := opts.OnAttempt; on != nil {
		// rlock calls it after every run of the acquire script, a try.
		lo.OnAttempt = func(string, bool) { on() }
	}
	// For experiments on the handover bound (HandoversEnv); the worker
	// processes inherit the variable.
	if v := os.Getenv(HandoversEnv); v != "" {
		if lo.MaxLocalHandovers, err = strconv.Atoi(v); err != nil {
			rc.Close()
			return nil, fmt.Errorf("locks: latchkey: %s=%q: %w", HandoversEnv, v, err)
		}
	}
	c, err := rlock.NewClient(rc, lo)
	if err != nil {
		rc.Close()
		return nil, fmt.Errorf("locks: latchkey: %w", err)
	}
	return &latchkeyLib{rc: rc, c: c, lease: rlock.WithLease(opts.Lease), spin: spin}, nil
}

func (l *latchkeyLib) Locker(key string) Locker {
	m := l.c.Mutex(key)
	if l.spin {
		m = l.c.SpinMutex(key)
	}
	return &latchkeyLocker{m: m, lease: l.lease}
}

func (l *latchkeyLib) Close() error {
	err := l.c.Close()
	l.rc.Close()
	return err
}

// latchkeyLocker is one handle; each Lock through it is an owner of its own.
type latchkeyLocker struct {
	m     *rlock.Mutex
	lease rlock.LockOption
}

func (l *latchkeyLocker) Lock(ctx context.Context) (func() error, error) {
	lctx, err := l.m.Lock(ctx, l.lease)
	if err != nil {
		return nil, err
	}
	return func() error { return l.m.Unlock(lctx) }, nil
}
