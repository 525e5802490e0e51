package locks

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/redis/rueidis"
)

// GrantProto is a measuring prototype, not a library: the smallest lock
// whose release grants the lock to the first client queued and tells it in
// the message, so that a contended acquisition costs two script calls (the
// next waiter's refused try, which queues it, and the release) and no
// woken try. It has no re-entry, fencing, holder record, watchdog, lapse
// handling or undo of a grant to a client that gave up: its figures bound
// from below what a direct grant could cost latchkey (docs/bench/notes.md,
// "Direct grant"). Not in All: name it in -libs to run it.
const GrantProto = "grant-proto"

var (
	grantAcquire = rueidis.NewLuaScript(`-- KEYS lock, queue; ARGV client, lease ms
if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return 1
end
if redis.call('get', KEYS[1]) == ARGV[1] then
  return 2 -- granted by a release whose message is late or lost
end
local t = redis.call('time')
redis.call('zadd', KEYS[2], 'NX', t[1] * 1000000 + t[2], ARGV[1])
return 0`)
	grantRelease = rueidis.NewLuaScript(`-- KEYS lock, queue; ARGV client, lease ms, channel prefix
if redis.call('get', KEYS[1]) ~= ARGV[1] then
  return -1
end
while true do
  local head = redis.call('zpopmin', KEYS[2])[1]
  if head == nil then
    redis.call('del', KEYS[1])
    return 0
  end
  redis.call('set', KEYS[1], head, 'PX', ARGV[2])
  if redis.call('publish', ARGV[3] .. head, KEYS[1]) > 0 then
    return 1
  end
end`)
)

// grantLib is one process's prototype client: one rueidis client, one
// subscription to the client's own channel, and one goroutine per process
// contending in Redis (a local mutex in front of each key).
type grantLib struct {
	rc     rueidis.Client
	sub    rueidis.DedicatedClient
	unsub  func()
	id     string
	lease  string
	prefix string

	mu   sync.Mutex
	keys map[string]*grantKey // by lock key
}

// grantKey is one lock's state in one process.
type grantKey struct {
	gate  sync.Mutex    // one goroutine per process contends in Redis
	woken chan struct{} // a grant's message, carrying the lock key
	// late counts grants taken by a try before their message came (under
	// gate): that many messages are ignored, lest a late one pass for the
	// next grant. A lost one only delays a later grant to the next try.
	late int
}

func openGrantProto(opts Options) (Lib, error) {
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{opts.Addr}, DisableCache: true})
	if err != nil {
		return nil, fmt.Errorf("locks: grant-proto: connecting to %s: %w", opts.Addr, err)
	}
	g := &grantLib{rc: rc, id: uuid.NewString(), lease: strconv.FormatInt(opts.Lease.Milliseconds(), 10),
		prefix: "gp:ch:", keys: map[string]*grantKey{}}
	g.sub, g.unsub = rc.Dedicate()
	g.sub.SetPubSubHooks(rueidis.PubSubHooks{OnMessage: func(m rueidis.PubSubMessage) {
		// One message per grant; the single contender of this process waits.
		g.mu.Lock()
		k := g.keys[m.Message]
		g.mu.Unlock()
		if k != nil {
			select {
			case k.woken <- struct{}{}:
			default:
			}
		}
	}})
	if err := g.sub.Do(context.Background(), g.sub.B().Subscribe().Channel(g.prefix+g.id).Build()).Error(); err != nil {
		g.Close()
		return nil, err
	}
	return g, nil
}

func (g *grantLib) Locker(key string) Locker {
	lock := "gp:{" + key + "}"
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.keys[lock] == nil {
		g.keys[lock] = &grantKey{woken: make(chan struct{}, 1)}
	}
	return &grantLocker{g: g, keys: []string{lock, lock + ":q"}, k: g.keys[lock]}
}

func (g *grantLib) Close() error {
	g.unsub()
	g.rc.Close()
	return nil
}

type grantLocker struct {
	g    *grantLib
	keys []string
	k    *grantKey
}

// errGrantLost reports a release that found the lock not held by this
// client.
var errGrantLost = errors.New("locks: grant-proto: released a lock this client did not hold")

func (l *grantLocker) Lock(ctx context.Context) (func() error, error) {
	k := l.k
	k.gate.Lock()
	for {
		got, err := grantAcquire.Exec(ctx, l.g.rc, l.keys, []string{l.g.id, l.g.lease}).AsInt64()
		if err != nil {
			k.gate.Unlock()
			return nil, err
		}
		if got == 2 {
			k.late++
		}
		if got > 0 {
			return l.unlock, nil
		}
		select {
		case <-k.woken:
			if k.late > 0 {
				k.late-- // an earlier grant's
				continue
			}
			// The message is the grant: held, without another call.
			return l.unlock, nil
		case <-time.After(time.Second): // a lost message: the try finds the grant
		case <-ctx.Done():
			k.gate.Unlock()
			return nil, ctx.Err()
		}
	}
}

func (l *grantLocker) unlock() error {
	defer l.k.gate.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	r, err := grantRelease.Exec(ctx, l.g.rc, l.keys, []string{l.g.id, l.g.lease, l.g.prefix}).AsInt64()
	if err == nil && r < 0 {
		err = errGrantLost
	}
	return err
}
