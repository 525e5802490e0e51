package locks

import "github.com/redis/go-redis/v9"

// goRedisMinPool is the smallest pool redsync and redislock get.
const goRedisMinPool = 10

// newGoRedis returns the go-redis client redsync and redislock run on. A
// pool smaller than the number of lockers would measure queueing for
// connections instead of the lock, so it has at least opts.Conns.
func newGoRedis(opts Options) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: opts.Addr, PoolSize: max(opts.Conns, goRedisMinPool)})
}

// goRedisBase owns the go-redis client of a library built on go-redis.
type goRedisBase struct{ rdb *redis.Client }

func (b goRedisBase) Close() error { return b.rdb.Close() }
