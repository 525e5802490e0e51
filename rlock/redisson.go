package rlock

import (
	"context"
	"fmt"
	"strings"

	"github.com/redis/rueidis"

	"github.com/latchkey/latchkey/internal/luascripts"
)

// Protocol selects the format a Client's locks take in Redis: latchkey's
// own, or Redisson's, so that Java services using Redisson's RLock (or
// RFencedLock) share the same locks (docs/redisson.md).
type Protocol int

const (
	// ProtocolLatchkey, the default, keeps locks under Options.Prefix with
	// latchkey's scripts: wait queues, holder records, every primitive.
	ProtocolLatchkey Protocol = iota
	// ProtocolRedisson speaks the lock protocol of Redisson 3.24+ and 4.x:
	// Mutex and SpinMutex keep the hash at the name as given (braces
	// allowed, no prefix; on a Redis Cluster a name whose channel would
	// hash to another slot, such as "a}b", is ErrInvalidName),
	// {"<client id>:<n>" -> hold count}; a release
	// that frees it publishes on "redisson_lock__channel:{name}", where Go
	// and Java waiters alike wait. Tokens are RFencedLock's counter
	// "redisson_lock_token:{name}"; Token returns a hold's grant's value.
	// There is no wait queue in Redis: Java clients barge in, and only a
	// Client's own goroutines take turns. RWMutex, Semaphore,
	// CountDownLatch, MultiMutex, Election and List report ErrInvalidOptions.
	ProtocolRedisson
)

// newRedissonMutex is newMutex for ProtocolRedisson: Redisson's scripts as
// the side, its channel shared by every waiter of the name, and no queue.
func (c *Client) newRedissonMutex(name string, spin bool) *Mutex {
	keys := luascripts.NewRedissonKeys(name)
	sd := c.newSide(name, name, keys.Channel, "lock", kindMutex.spinIf(spin), spin)
	sd.bindExclusive(keys)
	sd.leave = func(context.Context) error { return nil } // waiters only listen on the channel
	sd.keep = [][]string{{name}}
	return &Mutex{c: c, name: name, keys: luascripts.Keys{Lock: name}, sd: sd, err: c.redissonName(name)}
}

// redissonName checks a lock name for ProtocolRedisson: 1 to MaxNameLen
// bytes, and, on a Redis Cluster, since Redisson derives its channel's and
// token's names from it, a name that keeps them in its slot. Off a Cluster
// slots do not matter: Redisson uses such names there, and so may latchkey.
func (c *Client) redissonName(name string) error {
	keys := luascripts.NewRedissonKeys(name)
	switch err := validateName(name, true); {
	case err != nil:
		return err
	case c.rc.Mode() == rueidis.ClientModeCluster && hashTag(name) != hashTag(keys.Channel): // "a}b", "a{b", "a{}b"
		return fmt.Errorf("%w: %q: Redisson's channel %q would hash to another Redis Cluster slot (a brace without its pair, or an empty {})", ErrInvalidName, name, keys.Channel)
	}
	return nil
}

// hashTag is the part of key that Redis Cluster hashes: what the first
// '{' and the next '}' enclose, when that is not empty, else all of key.
func hashTag(key string) string {
	open := strings.IndexByte(key, '{')
	if open < 0 {
		return key
	}
	end := strings.IndexByte(key[open+1:], '}')
	if end <= 0 {
		return key
	}
	return key[open+1 : open+1+end]
}

// latchkeyOnly refuses a primitive that has no Redisson counterpart here
// (kind names it) when the Client speaks ProtocolRedisson.
func (c *Client) latchkeyOnly(kind string) error {
	if c.opts.Protocol != ProtocolRedisson {
		return nil
	}
	return fmt.Errorf("%w: %s is not available with ProtocolRedisson, which shares only Mutex and SpinMutex with Redisson (see docs/redisson.md)", ErrInvalidOptions, kind)
}

// introOf is the introspection of kind's lock called name.
func (c *Client) introOf(kind Kind, name string) (luascripts.Intro, error) {
	if c.opts.Protocol == ProtocolRedisson {
		if kind != KindMutex {
			return luascripts.Intro{}, c.latchkeyOnly(string(kind))
		}
		return luascripts.NewRedissonKeys(name).Intro(), c.redissonName(name)
	}
	keys, err := lockKeys(c.opts.Prefix, name)
	return intro(kind, keys), err
}
