package locks

import (
	"context"
	"math"

	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
)

// redsyncLib is redsync v4 on one go-redis v9 pool: a single-node Redlock,
// SET NX to acquire and a script to release, retrying after its default
// random 50–250ms delay or the fixed delay Options.Backoff.
type redsyncLib struct {
	goRedisBase
	rs   *redsync.Redsync
	opts []redsync.Option // the lease, and the retry delay when set
}

func openRedsync(opts Options) (Lib, error) {
	rdb := newGoRedis(opts)
	if opts.OnAttempt != nil {
		rdb.AddHook(setCounter{onSet: opts.OnAttempt})
	}
	// redsync gives up after WithTries attempts (32 by default, a few
	// seconds); the benchmark bounds every acquire by its context instead.
	ro := []redsync.Option{redsync.WithExpiry(opts.Lease), redsync.WithTries(math.MaxInt32)}
	if opts.Backoff > 0 {
		ro = append(ro, redsync.WithRetryDelay(opts.Backoff))
	}
	return &redsyncLib{goRedisBase: goRedisBase{rdb}, rs: redsync.New(goredis.NewPool(rdb)), opts: ro}, nil
}

func (l *redsyncLib) Locker(key string) Locker {
	return &redsyncLocker{m: l.rs.NewMutex(key, l.opts...)}
}

type redsyncLocker struct{ m *redsync.Mutex }

func (l *redsyncLocker) Lock(ctx context.Context) (func() error, error) {
	if err := l.m.LockContext(ctx); err != nil {
		return nil, err
	}
	return func() error {
		// A release that finds the lock gone returns an error; one that
		// deleted nothing without an error is a lost lock too.
		ok, err := l.m.Unlock()
		if err == nil && !ok {
			err = errNotReleased
		}
		return err
	}, nil
}
