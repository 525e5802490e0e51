package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/internal/redistest"
	"github.com/latchkey/latchkey/rlock"
)

// TestRegressReleaseRetriesBusy: an Unlock that Redis refuses for a state
// it passes through (BUSY here: another client's long script; LOADING,
// MASTERDOWN and READONLY in a restart or failover) is retried within
// ReleaseTimeout: the refused call did not run. Unlock returned BUSY at
// once, and the lock stayed held for its lease.
func TestRegressReleaseRetriesBusy(t *testing.T) {
	for _, lostFirst := range []bool{false, true} {
		t.Run(map[bool]string{false: "held", true: "lost before the Unlock"}[lostFirst], func(t *testing.T) {
			releaseDuringBusy(t, lostFirst)
		})
	}
}

// releaseDuringBusy Unlocks a lock while Redis runs another client's
// script; with lostFirst the hold is deleted first, and the Unlock must
// say so (ErrNotHeld): the refused call did not run, so the retry is not
// one that may read an owner found gone as its own doing.
func releaseDuringBusy(t *testing.T, lostFirst bool) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tp := busyServer(t, ctx)
	rc := redisClient(t, tp)
	c := lockClient(t, tp, rlock.Options{})
	m := c.Mutex(lockName(t))
	lctx, err := m.Lock(ctx, rlock.WithLease(20*time.Second))
	require.NoError(t, err)
	if lostFirst {
		require.NoError(t, rc.Do(ctx, rc.B().Del().Key(m.Key()).Build()).Error())
	}

	busy := startBusy(t, ctx, tp)
	err = m.Unlock(lctx)
	require.NoError(t, <-busy)
	if lostFirst {
		require.ErrorIs(t, err, rlock.ErrNotHeld, "an Unlock of a hold lost before it, while Redis runs another client's script")
		return
	}
	require.NoError(t, err, "an Unlock while Redis runs another client's script")
	require.False(t, exists(t, rc, m.Key()), "the lock is still held")
}

// startBusy makes the Redis of tp (its own, with busy-reply-threshold set
// low) run a read-only script for a second and a half on a connection of
// its own, and returns once Redis answers BUSY; the channel gets the
// script's error when it ends.
func startBusy(t *testing.T, ctx context.Context, tp topology) <-chan error {
	t.Helper()
	// A read-only script that runs for a second and a half (bounded in
	// iterations too, should TIME not move within a script).
	busy := make(chan error, 1)
	other, probe := redisClient(t, tp), redisClient(t, tp) // no new connection is taken while busy
	go func() {
		script := `local t0 = redis.call('TIME') local s0 = tonumber(t0[1]) * 1000000 + tonumber(t0[2])
for i = 1, 1000000000 do
  local t = redis.call('TIME')
  if tonumber(t[1]) * 1000000 + tonumber(t[2]) - s0 > 1500000 then return i end
end
return 0`
		busy <- other.Do(ctx, other.B().Eval().Script(script).Numkeys(0).Build()).Error()
	}()
	awaitCond(t, 10*time.Second, "Redis to answer BUSY", func() bool {
		err := probe.Do(ctx, probe.B().Ping().Build()).Error()
		re, ok := rueidis.IsRedisErr(err)
		return ok && strings.HasPrefix(re.Error(), "BUSY")
	})
	return busy
}

// busyServer is a Redis of the test's own whose scripts count as busy
// after 50ms.
func busyServer(t *testing.T, ctx context.Context) topology {
	t.Helper()
	srv, err := redistest.StartProcess(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	tp := topology{name: "own", addrs: []string{srv.Addr}}
	rc := redisClient(t, tp)
	require.NoError(t, rc.Do(ctx, rc.B().ConfigSet().ParameterValue().ParameterValue("busy-reply-threshold", "50").Build()).Error())
	return tp
}

// TestRegressLockWaitsOutBusy: a Lock, RLock or Acquire on a free lock
// while Redis runs another client's script (as it answers BUSY, and in a
// failover READONLY, LOADING or CLUSTERDOWN) waits it out within its
// context. It returned the refusal at once, 17ms into a 10s context.
func TestRegressLockWaitsOutBusy(t *testing.T) {
	for _, k := range []struct {
		name string
		lock func(ctx context.Context, c *rlock.Client, name string) error
	}{
		{"Mutex", func(ctx context.Context, c *rlock.Client, name string) error {
			lctx, err := c.Mutex(name).Lock(ctx)
			if err == nil {
				err = c.Mutex(name).Unlock(lctx)
			}
			return err
		}},
		{"RWMutex read", func(ctx context.Context, c *rlock.Client, name string) error {
			lctx, err := c.RWMutex(name).RLock(ctx)
			if err == nil {
				err = c.RWMutex(name).RUnlock(lctx)
			}
			return err
		}},
		{"Semaphore", func(ctx context.Context, c *rlock.Client, name string) error {
			lctx, err := c.Semaphore(name, 2).Acquire(ctx, 1)
			if err == nil {
				err = c.Semaphore(name, 2).Release(lctx)
			}
			return err
		}},
	} {
		t.Run(k.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			tp := busyServer(t, ctx)
			c := lockClient(t, tp, rlock.Options{})
			name := lockName(t)
			require.NoError(t, k.lock(ctx, c, name)) // loads the scripts
			busy := startBusy(t, ctx, tp)
			lctx, lcancel := context.WithTimeout(ctx, 10*time.Second)
			defer lcancel()
			require.NoError(t, k.lock(lctx, c, name), "a lock call while Redis runs another client's script")
			require.NoError(t, <-busy)
		})
	}
}
