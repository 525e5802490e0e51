package integration

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// A test-only stand-in for a Java process that uses Redisson 3.24+/4.x:
// no JVM can run here, so this speaks Redisson's lock protocol from Go, as
// read in Redisson's public source (RedissonLock, RedissonBaseLock,
// RedissonFencedLock, RedissonObject.prefixName, LockPubSub, LockTask). The
// scripts are written anew for this emulator and kept independent of
// latchkey's, so that the tests compare two implementations of one
// protocol rather than one with itself.

// Redisson's scripts, in its KEYS/ARGV layout.
var (
	// RLock's acquire: free or re-entered, else the holder's PTTL.
	// KEYS: lock. ARGV: lease ms, "<uuid>:<thread>". Nil when granted.
	javaAcquire = rueidis.NewLuaScript(`
local held = redis.call('exists', KEYS[1]) == 1
if held and redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
  return redis.call('pttl', KEYS[1])
end
redis.call('hincrby', KEYS[1], ARGV[2], 1)
redis.call('pexpire', KEYS[1], ARGV[1])
return nil`)
	// RFencedLock's acquire: the same rule, and the token counter raised
	// at every grant, re-entries too. KEYS: lock, token counter.
	// Returns {-1, token} granted, {pttl, -1} refused.
	javaFencedAcquire = rueidis.NewLuaScript(`
local held = redis.call('exists', KEYS[1]) == 1
if held and redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
  return {redis.call('pttl', KEYS[1]), -1}
end
local token = redis.call('incr', KEYS[2])
redis.call('hincrby', KEYS[1], ARGV[2], 1)
redis.call('pexpire', KEYS[1], ARGV[1])
return {-1, token}`)
	// RLock's unlock, made idempotent by the unlock latch: the first run
	// leaves its answer at KEYS[3] for a while, and a resent request
	// (same request id) reads it back instead of releasing twice.
	// KEYS: lock, channel, latch. ARGV: message, lease ms, owner, publish
	// command, latch ms. Nil: not held by owner; 0: still held; 1: freed.
	javaUnlock = rueidis.NewLuaScript(`
local earlier = redis.call('get', KEYS[3])
if earlier then
  return tonumber(earlier)
end
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
  return nil
end
if redis.call('hincrby', KEYS[1], ARGV[3], -1) > 0 then
  redis.call('pexpire', KEYS[1], ARGV[2])
  redis.call('set', KEYS[3], 0, 'px', ARGV[5])
  return 0
end
redis.call('del', KEYS[1])
redis.call(ARGV[4], KEYS[2], ARGV[1])
redis.call('set', KEYS[3], 1, 'px', ARGV[5])
return 1`)
	// RLock's forceUnlock. KEYS: lock, channel. ARGV: message, publish
	// command.
	javaForceUnlock = rueidis.NewLuaScript(`
if redis.call('del', KEYS[1]) == 0 then
  return 0
end
redis.call(ARGV[2], KEYS[2], ARGV[1])
return 1`)
	// LockTask's renewal of a batch: each lock whose owner's field is
	// there gets the lease again. KEYS: locks. ARGV: lease ms, then each
	// lock's owner.
	javaRenew = rueidis.NewLuaScript(`
local out = {}
for i = 1, #KEYS do
  if redis.call('hexists', KEYS[i], ARGV[i + 1]) == 1 then
    redis.call('pexpire', KEYS[i], ARGV[1])
    out[i] = 1
  else
    out[i] = 0
  end
end
return out`)
)

// javaUnlockMessage is LockPubSub's UNLOCK_MESSAGE.
const javaUnlockMessage = "0"

// javaPrefixed is RedissonObject.prefixName: the name in braces after
// prefix, unless it has a brace of its own.
func javaPrefixed(prefix, name string) string {
	if strings.Contains(name, "{") {
		return prefix + ":" + name
	}
	return prefix + ":{" + name + "}"
}

func javaChannel(name string) string  { return javaPrefixed("redisson_lock__channel", name) }
func javaTokenKey(name string) string { return javaPrefixed("redisson_lock_token", name) }
func javaLatch(name, req string) string {
	return javaPrefixed("redisson_unlock_latch", name) + ":" + req
}

// javaID is a random UUID, as Redisson's ServiceManager id and request
// ids are.
func javaID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	b[6], b[8] = b[6]&0x0f|0x40, b[8]&0x3f|0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// javaClient is one emulated Redisson instance: a command connection, a
// pub/sub connection shared by its threads' waits (one entry per channel,
// as Redisson's PublishSubscribeService keeps), and a renewal per lock
// held without a lease (its lock watchdog).
type javaClient struct {
	rc, ps   rueidis.Client
	id       string
	sharded  bool          // SPUBLISH/SSUBSCRIBE: a Redis 7 Cluster, Redisson's default there
	watchdog time.Duration // lockWatchdogTimeout
	// waits receives a lock's name each time a thread, refused after it
	// subscribed, starts waiting for the unlock message: tests await it.
	waits chan string

	ctx context.Context // ends at the test's end: renewals stop
	wg  sync.WaitGroup

	mu       sync.Mutex
	entries  map[string]*javaEntry         // by channel
	renewals map[string]context.CancelFunc // by "<lock>\x00<owner>"
}

// javaEntry is RedissonLockEntry: the subscription's confirmation and the
// semaphore that each unlock message releases once.
type javaEntry struct {
	refs    int
	ready   chan struct{}
	permits chan struct{}
}

func newJavaClient(t *testing.T, tp topology, watchdog time.Duration) *javaClient {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	j := &javaClient{id: javaID(), sharded: tp.cluster, watchdog: watchdog, waits: make(chan string, 1000), ctx: ctx,
		entries: make(map[string]*javaEntry), renewals: make(map[string]context.CancelFunc)}
	// Registered first, so it runs after both clients closed: that is what
	// ends the receive goroutines.
	t.Cleanup(func() { cancel(); j.wg.Wait(); close(j.waits) })
	j.rc, j.ps = redisClient(t, tp), redisClient(t, tp)
	return j
}

func (j *javaClient) publishCommand() string {
	if j.sharded {
		return "SPUBLISH"
	}
	return "PUBLISH"
}

// lock is a handle on the RLock (or, fenced, RFencedLock) called name.
func (j *javaClient) lock(name string, fenced bool) *javaLock {
	return &javaLock{j: j, name: name, fenced: fenced}
}

type javaLock struct {
	j      *javaClient
	name   string
	fenced bool
}

// owner is getLockName(threadId): the field a thread's holds count in.
func (l *javaLock) owner(thread int64) string { return l.j.id + ":" + strconv.FormatInt(thread, 10) }

// tryAcquire runs the acquire script once with lease (0: the watchdog's),
// as tryAcquireAsync does, and starts the renewal of a watchdog grant. It
// returns whether it was granted, the holder's PTTL if not, and the
// fenced lock's token if so.
func (l *javaLock) tryAcquire(ctx context.Context, thread int64, lease time.Duration) (bool, int64, int64, error) {
	ms := lease
	if lease == 0 {
		ms = l.j.watchdog
	}
	args := []string{strconv.FormatInt(ms.Milliseconds(), 10), l.owner(thread)}
	var granted bool
	var ttl, token int64
	if l.fenced {
		v, err := javaFencedAcquire.Exec(ctx, l.j.rc, []string{l.name, javaTokenKey(l.name)}, args).AsIntSlice()
		if err != nil {
			return false, 0, 0, err
		}
		granted, ttl, token = v[0] == -1, v[0], v[1]
	} else {
		n, err := javaAcquire.Exec(ctx, l.j.rc, []string{l.name}, args).AsInt64()
		if err != nil && !rueidis.IsRedisNil(err) {
			return false, 0, 0, err
		}
		granted, ttl = err != nil, n
	}
	if granted && lease == 0 {
		l.j.renew(l.name, l.owner(thread))
	}
	return granted, ttl, token, nil
}

// Lock is RedissonLock.lock(leaseTime) for thread (lease 0: the watchdog):
// try; if refused, subscribe to the lock's channel, and once subscribed
// try again, waiting between tries for an unlock message or the holder's
// PTTL, whichever comes first. It returns the fenced lock's token.
func (l *javaLock) Lock(ctx context.Context, thread int64, lease time.Duration) (int64, error) {
	granted, ttl, token, err := l.tryAcquire(ctx, thread, lease)
	if err != nil || granted {
		return token, err
	}
	e, err := l.j.subscribe(ctx, javaChannel(l.name))
	if err != nil {
		return 0, err
	}
	defer l.j.unsubscribe(javaChannel(l.name))
	for {
		granted, ttl, token, err = l.tryAcquire(ctx, thread, lease)
		if err != nil || granted {
			return token, err
		}
		select {
		case l.j.waits <- l.name:
		default:
		}
		if err := e.wait(ctx, ttl); err != nil {
			return 0, err
		}
	}
}

// TryLock is tryLock(): one try, no wait.
func (l *javaLock) TryLock(ctx context.Context, thread int64, lease time.Duration) (bool, error) {
	granted, _, _, err := l.tryAcquire(ctx, thread, lease)
	return granted, err
}

// errIllegalMonitorState is what Redisson throws for an unlock by a
// thread that does not hold the lock.
var errIllegalMonitorState = errors.New("attempt to unlock lock, not locked by current thread")

// Unlock is RedissonBaseLock.unlock for thread: the unlock script under a
// fresh request id, then the latch's deletion. An inner unlock keeps the
// lock with the lease again; the last deletes it and publishes "0".
func (l *javaLock) Unlock(ctx context.Context, thread int64) error {
	req := javaID()
	latch := javaLatch(l.name, req)
	res, err := javaUnlock.Exec(ctx, l.j.rc, []string{l.name, javaChannel(l.name), latch}, []string{
		javaUnlockMessage, strconv.FormatInt(l.j.watchdog.Milliseconds(), 10), l.owner(thread), l.j.publishCommand(), "30000",
	}).AsInt64()
	if rueidis.IsRedisNil(err) {
		return errIllegalMonitorState
	}
	if err != nil {
		return err
	}
	if err := l.j.rc.Do(ctx, l.j.rc.B().Del().Key(latch).Build()).Error(); err != nil {
		return err
	}
	if res == 1 {
		l.j.stopRenewal(l.name, l.owner(thread))
	}
	return nil
}

// ForceUnlock is RLock.forceUnlock: delete the lock whoever holds it and
// publish the unlock message. It reports whether there was a lock.
func (l *javaLock) ForceUnlock(ctx context.Context) (bool, error) {
	n, err := javaForceUnlock.Exec(ctx, l.j.rc, []string{l.name, javaChannel(l.name)}, []string{javaUnlockMessage, l.j.publishCommand()}).AsInt64()
	return n == 1, err
}

// renew starts the watchdog's renewal of owner's hold on name: every
// third of the watchdog timeout, until a renewal finds the field gone or
// the hold is unlocked. Redisson batches renewals (LockTask); one lock per
// call is the same check.
func (j *javaClient) renew(name, owner string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	key := name + "\x00" + owner
	if j.renewals[key] != nil {
		return // a re-entry: one renewal per thread's hold
	}
	ctx, cancel := context.WithCancel(j.ctx)
	j.renewals[key] = cancel
	j.wg.Add(1)
	go func() {
		defer j.wg.Done()
		ticker := time.NewTicker(j.watchdog / 3)
		defer ticker.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
			}
			v, err := javaRenew.Exec(ctx, j.rc, []string{name}, []string{strconv.FormatInt(j.watchdog.Milliseconds(), 10), owner}).AsIntSlice()
			if err == nil && v[0] == 0 {
				j.stopRenewal(name, owner)
				return
			}
		}
	}()
}

func (j *javaClient) stopRenewal(name, owner string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	key := name + "\x00" + owner
	if cancel := j.renewals[key]; cancel != nil {
		cancel()
		delete(j.renewals, key)
	}
}

// subscribe joins channel's entry, subscribing on first use, and returns
// once the server confirmed the subscription. An entry taken up again
// starts with no permits, as Redisson's new RedissonLockEntry does.
func (j *javaClient) subscribe(ctx context.Context, channel string) (*javaEntry, error) {
	j.mu.Lock()
	e := j.entries[channel]
	if e == nil {
		e = &javaEntry{ready: make(chan struct{}), permits: make(chan struct{}, 1000)}
		j.entries[channel] = e
		j.wg.Add(1)
		go j.receive(channel, e)
	}
	if e.refs == 0 {
		for len(e.permits) > 0 {
			<-e.permits
		}
	}
	e.refs++
	j.mu.Unlock()
	select {
	case <-e.ready:
		return e, nil
	case <-ctx.Done():
		j.unsubscribe(channel)
		return nil, ctx.Err()
	}
}

// wait takes one permit, or returns after ttl ms (negative: no bound),
// as the lock loop's latch.tryAcquire(ttl) does.
func (e *javaEntry) wait(ctx context.Context, ttl int64) error {
	var expired <-chan time.Time
	if ttl >= 0 {
		timer := time.NewTimer(time.Duration(ttl) * time.Millisecond)
		defer timer.Stop()
		expired = timer.C
	}
	select {
	case <-e.permits:
	case <-expired:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

func (j *javaClient) unsubscribe(channel string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.entries[channel].refs--
}

// receive keeps channel subscribed for the client's life: each unlock
// message releases one permit (LockPubSub.onMessage).
func (j *javaClient) receive(channel string, e *javaEntry) {
	defer j.wg.Done()
	cmd := j.ps.B().Subscribe().Channel(channel).Build()
	if j.sharded {
		cmd = j.ps.B().Ssubscribe().Channel(channel).Build()
	}
	var once sync.Once
	ctx := rueidis.WithOnSubscriptionHook(j.ctx, func(s rueidis.PubSubSubscription) {
		if s.Kind == "subscribe" || s.Kind == "ssubscribe" {
			once.Do(func() { close(e.ready) })
		}
	})
	_ = j.ps.Receive(ctx, cmd, func(m rueidis.PubSubMessage) {
		if m.Message != javaUnlockMessage {
			return
		}
		select {
		case e.permits <- struct{}{}:
		default:
		}
	})
}
