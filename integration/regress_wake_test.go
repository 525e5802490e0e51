package integration

import (
	"context"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/internal/luascripts"
	"github.com/latchkey/latchkey/internal/redistest"
	"github.com/latchkey/latchkey/rlock"
)

// frozenClient is the client id of a waiter whose process is stuck but
// still subscribed: a PUBLISH to it counts a receiver, and it never comes.
const frozenClient = "frozen-client"

// TestRegressWokenWaiterCannotKeepTheLock: a woken RWMutex or Semaphore
// waiter whose process is frozen but still subscribed loses its place when
// its wake window ends, so a free lock serves the others (issue 20: the
// family's waiters kept their place until they came, and every refused
// newcomer's prod reached the frozen one again, so the lock stayed free
// and unused for ever; the Mutex's reservation bounded it by the window).
func TestRegressWokenWaiterCannotKeepTheLock(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		wake := luascripts.Wake{Sharded: tp.cluster, Window: rlock.DefaultHandoffWindow}
		cases := []struct {
			name string
			// queue queues the frozen client for the lock name, whose
			// channel it listens on, while a holds it; take takes it
			// for b, waiting at most wait.
			inbox func(name string) string
			queue func(t *testing.T, rc rueidis.Client, name string)
			hold  func(t *testing.T, a *rlock.Client, name string) func() error
			take  func(b *rlock.Client, name string, wait time.Duration) (bool, error)
		}{{
			name:  "RWMutex",
			inbox: func(name string) string { return rwKeysOf(name).Inbox(frozenClient, true) },
			queue: func(t *testing.T, rc rueidis.Client, name string) {
				r, err := luascripts.RunRWAcquire(context.Background(), rc, rwKeysOf(name), luascripts.AcquireArgs{
					Owner: frozenClient + ":1", Lease: time.Minute, Client: frozenClient, Waiter: true, Wake: wake}, true, "")
				require.NoError(t, err)
				require.False(t, r.Acquired)
			},
			hold: func(t *testing.T, a *rlock.Client, name string) func() error {
				rw := a.RWMutex(name)
				wctx, err := rw.Lock(context.Background())
				require.NoError(t, err)
				return func() error { return rw.Unlock(wctx) }
			},
			take: func(b *rlock.Client, name string, wait time.Duration) (bool, error) {
				rctx, ok, err := b.RWMutex(name).TryRLock(context.Background(), rlock.WithWait(wait))
				if ok {
					err = b.RWMutex(name).RUnlock(rctx)
				}
				return ok, err
			},
		}, {
			name:  "Semaphore",
			inbox: func(name string) string { return semKeysOf(name).Inbox(frozenClient) },
			queue: func(t *testing.T, rc rueidis.Client, name string) {
				r, err := luascripts.RunSemAcquire(context.Background(), rc, semKeysOf(name), luascripts.AcquireArgs{
					Owner: frozenClient + ":1", Lease: time.Minute, Client: frozenClient, Waiter: true, Wake: wake}, 1, 1)
				require.NoError(t, err)
				require.False(t, r.Acquired)
			},
			hold: func(t *testing.T, a *rlock.Client, name string) func() error {
				s := a.Semaphore(name, 1)
				pctx, err := s.Acquire(context.Background(), 1)
				require.NoError(t, err)
				return func() error { return s.Release(pctx) }
			},
			take: func(b *rlock.Client, name string, wait time.Duration) (bool, error) {
				s := b.Semaphore(name, 1)
				pctx, ok, err := s.TryAcquire(context.Background(), 1, rlock.WithWait(wait))
				if ok {
					err = s.Release(pctx)
				}
				return ok, err
			},
		}}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				name := lockName(t)
				a, b := lockClient(t, tp, rlock.Options{}), lockClient(t, tp, rlock.Options{})
				rc := redisClient(t, tp)
				frozen := subscribeRaw(t, tp, tc.inbox(name))
				release := tc.hold(t, a, name)
				tc.queue(t, rc, name)
				require.NoError(t, release())
				select {
				case <-frozen.msgs: // woken; it will never come
				case <-time.After(10 * time.Second):
					t.Fatal("the release did not wake the frozen client")
				}
				start := time.Now()
				ok, err := tc.take(b, name, 5*time.Second)
				require.NoError(t, err)
				require.True(t, ok, "the frozen client kept the free lock from the others")
				require.Less(t, time.Since(start), 2*time.Second, "longer than a wake window and a try")
				requireNoLeftovers(t, tp, name)
			})
		}
	})
}

func rwKeysOf(name string) luascripts.RWKeys {
	return luascripts.NewRWKeys(rlock.DefaultPrefix + ":{" + name + "}:rw")
}

func semKeysOf(name string) luascripts.SemKeys {
	return luascripts.NewSemKeys(rlock.DefaultPrefix + ":{" + name + "}:sem")
}

// queueWoken queues client in the wait queue at key as woken, with a
// window of window from now: its score is minus the window's end, server
// ms (queue.lua).
func queueWoken(t *testing.T, rc rueidis.Client, key, client string, window time.Duration) {
	t.Helper()
	now, err := redistest.ServerMillis(context.Background(), rc)
	require.NoError(t, err)
	end := float64(now + window.Milliseconds())
	require.NoError(t, rc.Do(context.Background(), rc.B().Zadd().Key(key).ScoreMember().ScoreMember(-end, client).Build()).Error())
}
