package luascripts

import (
	"context"
	"strings"

	"github.com/redis/rueidis"
)

// RedissonKeys are the Redis names of one Redisson lock.
type RedissonKeys struct {
	Lock    string // the name as given: Redisson adds no prefix
	Channel string // "redisson_lock__channel:{name}" (LockPubSub's)
	Token   string // "redisson_lock_token:{name}" (RFencedLock's counter)
}

// NewRedissonKeys names name's lock, channel and token counter as Redisson
// does (RedissonObject.prefixName).
func NewRedissonKeys(name string) RedissonKeys {
	return RedissonKeys{Lock: name, Channel: RedissonPrefixed("redisson_lock__channel", name), Token: RedissonPrefixed("redisson_lock_token", name)}
}

// RedissonPrefixed is Redisson's prefixName: the name in braces after
// prefix, unless it has a brace already (then it keeps its own hash tag).
func RedissonPrefixed(prefix, name string) string {
	if strings.Contains(name, "{") {
		return prefix + ":" + name
	}
	return prefix + ":{" + name + "}"
}

// Acquire runs redissonacquire.lua for a new owner: granted
// with the new token, or refused with the holder's PTTL; see Keys.Acquire
// (it reads a's Owner, Lease and Sync).
func (k RedissonKeys) Acquire(ctx context.Context, c rueidis.Client, a AcquireArgs) (AcquireReply, error) {
	return runAcquire(ctx, c, RedissonAcquire, []string{k.Lock, k.Token}, []string{Millis(a.Lease), a.Owner}, a.Sync)
}

// Reenter runs redissonreenter.lua: owner's new hold count, 0
// when it holds none.
func (k RedissonKeys) Reenter(ctx context.Context, c rueidis.Client, owner string) (int64, error) {
	return runReenter(ctx, c, RedissonReenter, []string{k.Lock, k.Token}, owner)
}

// Release runs redissonrelease.lua; its reply reads as
// Keys.Release's (Woken: the subscribers the unlock message reached). It
// ignores HeirAbout (Redisson keeps no records).
func (k RedissonKeys) Release(ctx context.Context, c rueidis.Client, a ReleaseArgs) (ReleaseReply, error) {
	publish := "publish" // what Redisson subscribes for: sharded pub/sub on a Redis 7 Cluster
	if a.Wake.Sharded {
		publish = "spublish"
	}
	// The channel goes in ARGV, not KEYS: Redis checks a script's declared
	// keys against the user's key patterns, and the channel is granted as
	// a channel only (docs/redisson.md's ACL).
	args := []string{k.Channel, a.Owner, itoa(a.Count), publish, flag(a.Retry)}
	if a.Heir != "" {
		args = append(args, a.Heir, Millis(a.HeirLease), flag(a.HeirCheck))
	}
	return runRelease(ctx, c, RedissonRelease, []string{k.Lock, k.Token}, args, a.Sync)
}

// Intro is a Redisson lock's introspection (redissondescribe.lua,
// redissonforceunlock.lua): holders without records, no queue. The only
// key is the lock; the channel is ARGV (as in Release).
func (k RedissonKeys) Intro() Intro {
	return Intro{describe: RedissonDescribe, forceUnlock: RedissonForceUnlock, keys: []string{k.Lock}, base: k.Channel}
}
