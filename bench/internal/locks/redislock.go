package locks

import (
	"cmp"
	"context"
	"errors"
	"time"

	"github.com/bsm/redislock"
)

// Redislock's retry policy: redislock.ExponentialBackoff(RedislockBackoffMin,
// RedislockBackoffMax), the cap being Options.Backoff when set. The
// library's own default is not to retry. Its n-th wait is 2 << n ms, that
// is 4, 8, 16 ... ms, clamped to [min, max] (bsm/redislock v0.9.4): the
// 1ms floor never binds, so the waits run from 4ms to the cap, not from
// latchkey-spin's 1ms, and a cap of 4ms or less is every wait. See
// redislockFirstBackoff.
const (
	RedislockBackoffMin = time.Millisecond
	RedislockBackoffMax = 128 * time.Millisecond
)

// redislockFirstBackoff is the first wait of the strategy Lock uses with
// the cap backoff, as the library computes it.
func redislockFirstBackoff(backoff time.Duration) time.Duration {
	return redislock.ExponentialBackoff(RedislockBackoffMin, backoff).NextBackoff()
}

// errNotReleased reports a release that found the lock no longer held.
var errNotReleased = errors.New("locks: release found the lock no longer held (it expired or was taken)")

// redislockLib is bsm/redislock on one go-redis v9 pool.
type redislockLib struct {
	goRedisBase
	c         *redislock.Client
	lease     time.Duration
	backoff   time.Duration // the strategy's cap
	onAttempt func()        // Options.OnAttempt; nil: not counted
}

func openRedislock(opts Options) (Lib, error) {
	rdb := newGoRedis(opts)
	return &redislockLib{goRedisBase: goRedisBase{rdb}, c: redislock.New(rdb), lease: opts.Lease,
		backoff: cmp.Or(opts.Backoff, RedislockBackoffMax), onAttempt: opts.OnAttempt}, nil
}

// countingRetry counts redislock's failed tries: Obtain asks its strategy
// for the next backoff once after each try that found the lock taken.
// The try that succeeds is counted by the caller; a try the context cuts
// short is not counted at all.
type countingRetry struct {
	redislock.RetryStrategy
	onFailed func()
}

func (r countingRetry) NextBackoff() time.Duration {
	r.onFailed()
	return r.RetryStrategy.NextBackoff()
}

func (l *redislockLib) Locker(key string) Locker {
	return &redislockLocker{lib: l, key: key}
}

type redislockLocker struct {
	lib *redislockLib
	key string
}

func (l *redislockLocker) Lock(ctx context.Context) (func() error, error) {
	// The strategy counts its retries, so each acquire needs a fresh one.
	var retry redislock.RetryStrategy = redislock.ExponentialBackoff(RedislockBackoffMin, l.lib.backoff)
	if l.lib.onAttempt != nil {
		retry = countingRetry{RetryStrategy: retry, onFailed: l.lib.onAttempt}
	}
	lk, err := l.lib.c.Obtain(ctx, l.key, l.lib.lease, &redislock.Options{RetryStrategy: retry})
	if err != nil {
		return nil, err
	}
	if l.lib.onAttempt != nil {
		l.lib.onAttempt() // the try that took it
	}
	return func() error {
		// Release with its own context: the acquire's may have ended.
		ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
		defer cancel()
		return lk.Release(ctx)
	}, nil
}

// releaseTimeout bounds a release whose library takes a context.
const releaseTimeout = 5 * time.Second
