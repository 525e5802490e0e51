package integration

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/internal/luascripts"
	"github.com/latchkey/latchkey/internal/redistest"
	"github.com/latchkey/latchkey/rlock"
)

// TestRegressOOMNoEviction: over maxmemory under noeviction (the policy
// latchkey's docs recommend), what only counts down or drops still runs:
// an inner Unlock of a Mutex, of an RWMutex's writer and reader, a
// CountDown, a Semaphore's Available that drops a lapsed holder, and (which
// wrote first already) renewals, leaves and ForceUnlock; and re-entries (of
// each format), which grow nothing but a counter. Redis 7 refuses a script's
// first deny-oom write (HINCRBY) over maxmemory unless the script wrote
// already: the inner Unlock failed, so the hold was never ended and its
// watchdog kept the lock after every Unlock returned; the CountDown
// failed, so Await waited for ever.
func TestRegressOOMNoEviction(t *testing.T) {
	ctx := context.Background()
	srv := ownServer(t)
	tp := topology{name: "standalone", addrs: []string{srv.Addr}}
	admin := nodeClient(t, srv.Addr)
	maxmemory := func(v string) {
		t.Helper()
		require.NoError(t, admin.Do(ctx, admin.B().ConfigSet().ParameterValue().ParameterValue("maxmemory", v).Build()).Error())
	}
	policy, err := admin.Do(ctx, admin.B().ConfigGet().Parameter("maxmemory-policy").Build()).AsStrMap()
	require.NoError(t, err)
	require.Equal(t, "noeviction", policy["maxmemory-policy"])
	c := lockClient(t, tp, rlock.Options{})
	rc := redisClient(t, tp)
	name := lockName(t)

	m := c.Mutex(name)
	outer := mustLock(t, ctx, m)
	inner := mustLock(t, outer, m)
	rw := c.RWMutex(name)
	wOuter, err := rw.Lock(ctx)
	require.NoError(t, err)
	wInner, err := rw.Lock(wOuter)
	require.NoError(t, err)
	rw2 := c.RWMutex(name + "-r")
	rOuter, err := rw2.RLock(ctx)
	require.NoError(t, err)
	rInner, err := rw2.RLock(rOuter)
	require.NoError(t, err)
	redisson := lockClient(t, tp, redissonOptions(rlock.Options{})).Mutex(name + "-redisson")
	jOuter := mustLock(t, ctx, redisson)
	latch := c.CountDownLatch(name)
	ok, err := latch.TrySetCount(ctx, 2)
	require.NoError(t, err)
	require.True(t, ok)
	sem := c.Semaphore(name, 2)
	keys := semKeysOf(name)
	// Owner ids of latchkey's form, or ForceUnlock takes the hash for
	// another's: a client id (a UUID), ':' and a number.
	live, deadOwner, waiter := uuid.NewString()+":1", uuid.NewString()+":1", uuid.NewString()+":1"
	// A live holder keeps the keys while the other's lease runs out.
	for _, h := range []struct {
		owner string
		lease time.Duration
	}{{live, time.Minute}, {deadOwner, 20 * time.Millisecond}} {
		r, err := luascripts.RunSemAcquire(ctx, rc, keys, luascripts.AcquireArgs{Owner: h.owner, Lease: h.lease, Client: "c"}, 1, 2)
		require.NoError(t, err)
		require.True(t, r.Acquired)
	}
	r, err := luascripts.RunSemAcquire(ctx, rc, keys, luascripts.AcquireArgs{Owner: waiter, Lease: time.Minute, Client: "w", Waiter: true}, 2, 2)
	require.NoError(t, err)
	require.False(t, r.Acquired, "queued")
	forced := lockClient(t, tp, rlock.Options{WatchdogTimeout: 3 * time.Second}).Mutex(name + "-forced")
	fctx := mustLock(t, ctx, forced)
	dead, err := rc.Do(ctx, rc.B().Zscore().Key(keys.Leases).Member(deadOwner).Build()).AsInt64()
	require.NoError(t, err)
	awaitCond(t, 5*time.Second, "the dead holder's lease to run out", func() bool {
		now, err := redistest.ServerMillis(ctx, rc)
		require.NoError(t, err)
		return now > dead
	})

	maxmemory("1")
	t.Cleanup(func() { maxmemory("0") })
	// Over maxmemory: a write that grows the data is refused.
	require.ErrorContains(t, rc.Do(ctx, rc.B().Set().Key(name+"-probe").Value("x").Build()).Error(), "OOM")

	again, err := m.Lock(outer)
	require.NoError(t, err, "a re-entry")
	require.NoError(t, m.Unlock(again), "the re-entry's Unlock")
	require.NoError(t, m.Unlock(inner), "an inner Unlock")
	require.NoError(t, m.Unlock(outer), "the outer Unlock")
	require.False(t, exists(t, rc, m.Key()), "the Mutex outlived its Unlocks")

	wAgain, err := rw.Lock(wOuter)
	require.NoError(t, err, "a writer's re-entry")
	require.NoError(t, rw.Unlock(wAgain))
	require.NoError(t, rw.Unlock(wInner), "an inner writer's Unlock")
	require.NoError(t, rw.Unlock(wOuter))
	rAgain, err := rw2.RLock(rOuter)
	require.NoError(t, err, "a reader's re-entry")
	require.NoError(t, rw2.RUnlock(rAgain))
	require.NoError(t, rw2.RUnlock(rInner), "an inner reader's RUnlock")
	require.NoError(t, rw2.RUnlock(rOuter))

	jInner, err := redisson.Lock(jOuter)
	require.NoError(t, err, "a Redisson-format re-entry")
	require.NoError(t, redisson.Unlock(jInner), "an inner Redisson-format Unlock")
	require.NoError(t, redisson.Unlock(jOuter))
	require.False(t, exists(t, rc, redisson.Key()), "the Redisson-format lock outlived its Unlocks")

	require.NoError(t, latch.CountDown(ctx), "a CountDown")
	require.NoError(t, latch.CountDown(ctx), "the CountDown to zero")
	actx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	require.NoError(t, latch.Await(actx))

	held, err := luascripts.RunRenewHold(ctx, rc, [][]string{keys.Keep()}, live, time.Minute, luascripts.Sync{})
	require.NoError(t, err, "a renewal of a lease set's owner")
	require.True(t, held)
	free, err := sem.Available(ctx)
	require.NoError(t, err, "Available, dropping a lapsed holder")
	require.EqualValues(t, 1, free)
	left, err := luascripts.RunSemLeave(ctx, rc, keys, "w", 2, luascripts.Wake{})
	require.NoError(t, err, "a leave")
	require.True(t, left)
	ok, err = c.ForceUnlockSemaphore(ctx, name)
	require.NoError(t, err, "a Semaphore's ForceUnlock")
	require.True(t, ok)
	ok, err = c.ForceUnlock(ctx, name+"-forced")
	require.NoError(t, err, "a Mutex's ForceUnlock")
	require.True(t, ok)
	requireLost(t, fctx, 10*time.Second, "the forced hold's loss")

	maxmemory("0")
	requireNoLeftovers(t, tp, name, name+"-r", name+"-forced")
}
