package locks

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// goRedisMinPool is the smallest pool redsync and redislock get.
const goRedisMinPool = 10

// newGoRedis returns the go-redis client redsync and redislock run on. A
// pool smaller than the number of lockers would measure queueing for
// connections instead of the lock, so it has at least opts.Conns.
func newGoRedis(opts Options) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: opts.Addr, PoolSize: max(opts.Conns, goRedisMinPool)})
}

// setCounter is a go-redis hook that calls onSet for every SET or SETNX the
// client sends. redsync tries to take a lock with one SET NX per try and
// runs its other steps as scripts, so on its client these are its tries;
// counting them on the wire leaves redsync's own retry policy untouched.
type setCounter struct{ onSet func() }

func (h setCounter) count(cmd redis.Cmder) {
	if name := cmd.Name(); name == "set" || name == "setnx" {
		h.onSet()
	}
}

func (h setCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h setCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.count(cmd)
		return next(ctx, cmd)
	}
}

func (h setCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			h.count(cmd)
		}
		return next(ctx, cmds)
	}
}

// goRedisBase owns the go-redis client of a library built on go-redis.
type goRedisBase struct{ rdb *redis.Client }

func (b goRedisBase) Close() error { return b.rdb.Close() }
