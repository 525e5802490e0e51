package integration

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/internal/luascripts"
	"github.com/latchkey/latchkey/internal/redistest"
	"github.com/latchkey/latchkey/rlock"
)

// aclCommands is everything a latchkey client runs, and so the least a Redis
// user needs. docs/operations.md shows the ACL SETUSER line built from it
// (see TestACLReadmeLine), so edit both together.
//
//   - ping: rueidis' health check on idle connections.
//   - evalsha, eval: every lock operation is a Lua script, sent with EVALSHA
//     and again with EVAL when the server answers NOSCRIPT.
//   - pttl … pexpireat: the commands the scripts call. Redis checks the
//     user's permissions inside scripts too.
//   - subscribe … sunsubscribe: waiting for unlock messages (sharded on
//     Cluster, classic otherwise).
//   - cluster|slots: rueidis reads the Cluster topology, Client.List finds
//     the masters with it, and the watchdog groups its renewals by master. (Redis 8 is asked CLUSTER SHARDS instead:
//     add cluster|shards there.)
//   - asking: a call on a slot being migrated gets -ASK, which rueidis (and
//     SyncReplicas' own routing) follows by sending ASKING first; refused, the
//     call goes back and forth between the two nodes until its context ends.
//   - scan: Client.List (latchkey list) walks the keys. ACL key patterns do
//     not filter what SCAN returns, so it shows the names (not the values)
//     of keys outside the prefix: a user that never lists may go without.
//
// HELLO and AUTH need no permission. rueidis' CLIENT SETINFO is refused on
// Redis 7.2+ without client|setinfo, and rueidis ignores that. Client-side
// caching, on by default in rueidis, sends CLIENT TRACKING when connecting:
// set DisableCache (latchkey does not use the cache) or add client|tracking.
var aclCommands = []string{
	"ping",
	"evalsha", "eval",
	"pttl", "hexists", "hincrby", "pexpire", "hget", "hset", "exists", "del",
	"get", "set", "incr", "time", "zadd", "zrem", "zpopmin", "publish", "spublish",
	"hgetall", "hmget", "hdel", "hlen", "zrank", "zrange", "zrangebyscore", "zcount", "zcard", "zscore",
	"zremrangebyscore", "pexpireat",
	"subscribe", "unsubscribe", "ssubscribe", "sunsubscribe",
	"cluster|slots", "asking",
	"scan",
}

// aclSetUser is the ACL SETUSER command for a user that may use latchkey
// with the given key prefix and nothing else.
func aclSetUser(user, password, prefix string) []string {
	cmd := []string{"ACL", "SETUSER", user, "on", ">" + password, "resetkeys", "resetchannels",
		"~" + prefix + ":*", "&" + prefix + ":*", "-@all"}
	for _, c := range aclCommands {
		cmd = append(cmd, "+"+c)
	}
	return cmd
}

// TestACLReadmeLine: docs/operations.md shows exactly the ACL line these
// tests use.
func TestACLReadmeLine(t *testing.T) {
	readme, err := os.ReadFile("../docs/operations.md")
	require.NoError(t, err)
	line := strings.Join(aclSetUser("latchkey", "secret", rlock.DefaultPrefix), " ")
	require.Contains(t, string(readme), "\n"+line+"\n",
		"docs/operations.md's ACL line and aclCommands in integration/acl_test.go have drifted apart")
}

// TestACLCoversScripts: every command a library script calls is granted,
// so that a new call in a script cannot slip past the list.
func TestACLCoversScripts(t *testing.T) {
	called := regexp.MustCompile(`redis\.call\('([a-z]+)'|publish = '([a-z]+)'`)
	for _, sc := range luascripts.All() {
		for _, m := range called.FindAllStringSubmatch(sc.Source(), -1) {
			cmd := m[1] + m[2]
			require.Contains(t, aclCommands, cmd, "script %s calls %s", sc.Name(), cmd)
		}
	}
}

// TestMinimalACL runs every operation as a user that has only aclCommands,
// on keys and channels under the prefix: TryLock, reentrant Lock, IsLocked,
// HoldCount, TTL, Inspect, List, a waiter that gives up (and leaves the queue), Unlock, a
// waiter woken by the unlock message, watchdog renewals, ForceUnlock, and a
// count-down latch. Nothing may be refused, and the server's ACL log
// must stay empty. Then the user must be refused a key, a channel and a
// command outside the grant.
func TestMinimalACL(t *testing.T) { forEachACLTopology(t, testMinimalACL) }

// forEachACLTopology runs f on a standalone server of the test's own (f
// changes its ACL) and on the Cluster.
func forEachACLTopology(t *testing.T, f func(t *testing.T, tp topology)) {
	t.Run("standalone", func(t *testing.T) {
		f(t, topology{name: "standalone", addrs: []string{ownServer(t).Addr}})
	})
	t.Run("cluster", func(t *testing.T) {
		f(t, topologies()[1])
	})
}

func testMinimalACL(t *testing.T, tp topology) {
	ctx := context.Background()
	tp.user, tp.password = "latchkey-acl-test", "acl-test-secret"
	for _, addr := range tp.addrs {
		admin := nodeClient(t, addr)
		cmd := aclSetUser(tp.user, tp.password, rlock.DefaultPrefix)
		require.NoError(t, admin.Do(ctx, admin.B().Arbitrary(cmd...).Build()).Error())
		require.NoError(t, admin.Do(ctx, admin.B().AclLog().Reset().Build()).Error())
		t.Cleanup(func() { admin.Do(context.Background(), admin.B().AclDeluser().Username(tp.user).Build()) })
	}
	// Whatever fails below, say what the server refused: a refusal inside a
	// script reaches the client only as "can't run this command", without
	// the command's name; the ACL log names it.
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("refused to %s: %v\nif a permission is missing, add it to aclCommands in integration/acl_test.go and to docs/operations.md",
				tp.user, aclDenials(t, tp.addrs, tp.user))
		}
	})

	name := lockName(t)
	c := lockClient(t, tp, rlock.Options{WatchdogTimeout: 600 * time.Millisecond}) // renewals every 200ms
	m := c.Mutex(name)
	lctx, ok, err := m.TryLock(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	inner := mustLock(t, lctx, m) // re-enter
	held, err := m.IsLocked(ctx)
	require.NoError(t, err)
	require.True(t, held)
	require.Equal(t, 2, holdCount(t, inner, m))
	ttl, err := m.TTL(ctx)
	require.NoError(t, err)
	require.Positive(t, ttl)
	info, err := c.Inspect(ctx, name)
	require.NoError(t, err)
	require.Len(t, info.Holders, 1)
	require.EqualValues(t, 2, info.Holders[0].Count)
	listed, err := c.List(ctx, name)
	require.NoError(t, err)
	require.Len(t, listed, 1)
	require.Len(t, listed[0].Holders, 1)
	listed[0].Holders[0].LeaseLeft = info.Holders[0].LeaseLeft // read a moment later
	require.Equal(t, info.Holders, listed[0].Holders)

	// A client that waits (queued), then gives up: it leaves the wait
	// queue (the leave script) before it unsubscribes.
	admin := redisClient(t, topology{addrs: tp.addrs}) // the default user
	qatt := newAttempts()
	quitter := lockClient(t, tp, qatt.options(rlock.Options{}))
	qctx, quit := context.WithCancel(ctx)
	gaveUp := make(chan error, 1)
	go func() {
		_, _, err := quitter.Mutex(name).TryLock(qctx, rlock.WithWait(time.Minute))
		gaveUp <- err
	}()
	await(t, qatt.reached(waitKey(name), 1), 10*time.Second, "the quitter to wait")
	requireQueued(t, admin, m.Key(), quitter.ID())
	info, err = c.Inspect(ctx, name) // the queued clients' descriptions too
	require.NoError(t, err)
	require.Len(t, info.Waiters, 1)
	require.Equal(t, quitter.ID(), info.Waiters[0].Client.ID)
	require.NotZero(t, info.Waiters[0].Client.PID)
	quit()
	require.ErrorIs(t, recvErr(t, gaveUp, 10*time.Second, "the quitter to give up"), context.Canceled)
	requireNotQueued(t, admin, m.Key(), quitter.ID())

	// A waiter in another client, woken by the release's message.
	att := newAttempts()
	waiter := lockClient(t, tp, rlock.Options{OnAttempt: att.hook}).Mutex(name)
	acquired := startWaiter(t, ctx, waiter, att)
	renewed := c.WatchdogStats().Renewed
	require.Eventually(t, func() bool { return c.WatchdogStats().Renewed >= renewed+2 }, 10*time.Second, 10*time.Millisecond,
		"no watchdog renewal succeeded")
	require.NoError(t, lctx.Err(), "lost the lock while renewals should succeed")
	require.NoError(t, m.Unlock(inner))
	require.NoError(t, m.Unlock(lctx))
	requireAcquired(t, acquired, 5*time.Second, "the waiter was not woken")

	// ForceUnlock; the watchdog's next renewal tells the holder.
	lctx = mustLock(t, ctx, m)
	forced, err := lockClient(t, tp, rlock.Options{}).ForceUnlock(ctx, name)
	require.NoError(t, err)
	require.True(t, forced)
	requireLost(t, lctx, 10*time.Second, "the holder did not learn of the force-unlock")
	require.ErrorIs(t, m.Unlock(lctx), rlock.ErrNotHeld)

	// A count-down latch: set, read, an Await in another client woken by
	// the zero's broadcast on the latch's channel.
	latch := c.CountDownLatch(name)
	setCount(t, ctx, latch, 1)
	latt := newAttempts()
	awaited := startAwaiters(t, ctx, latt, []*rlock.CountDownLatch{lockClient(t, tp, latt.options(rlock.Options{})).CountDownLatch(name)}, 1, nil)
	n, err := latch.Count(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	require.NoError(t, latch.CountDown(ctx))
	require.NoError(t, collect(t, awaited, 1, 10*time.Second, "the latch's zero")[0].err)

	// An RWMutex: readers, a writer woken by the last read release, and a
	// writer's acquire that counts the live readers.
	rw := c.RWMutex(name)
	r1, err := rw.RLock(ctx)
	require.NoError(t, err)
	r2, err := rw.RLock(r1)
	require.NoError(t, err)
	watt := newAttempts()
	writer := lockClient(t, tp, watt.options(rlock.Options{})).RWMutex(name)
	wrote := make(chan error, 1)
	go func() {
		wctx, err := writer.Lock(ctx)
		if err == nil {
			err = writer.Unlock(wctx)
		}
		wrote <- err
	}()
	await(t, watt.reached(waitKey(name), 1), 10*time.Second, "the writer to wait")
	rinfo, err := c.InspectRWMutex(ctx, name)
	require.NoError(t, err)
	require.Len(t, rinfo.Holders, 1)
	require.Equal(t, rlock.ModeRead, rinfo.Holders[0].Mode)
	require.Len(t, rinfo.Waiters, 1)
	require.Equal(t, rlock.ModeWrite, rinfo.Waiters[0].Mode)
	require.NotZero(t, rinfo.Waiters[0].Client.PID)
	listed, err = c.List(ctx, name)
	require.NoError(t, err)
	require.Len(t, listed, 1)
	require.Equal(t, rlock.KindRWMutex, listed[0].Kind)
	require.NoError(t, rw.RUnlock(r2))
	require.NoError(t, rw.RUnlock(r1))
	require.NoError(t, recvErr(t, wrote, 10*time.Second, "the writer"))

	// A Semaphore: a holder, a waiter woken by its release, Available.
	sem := c.Semaphore(name, 2)
	pctx, err := sem.Acquire(ctx, 2)
	require.NoError(t, err)
	wc, got := queueAcquire(t, tp, name, rlock.Options{}, func(c *rlock.Client) (context.Context, error) {
		return c.Semaphore(name, 2).Acquire(ctx, 1)
	})
	sinfo, err := c.InspectSemaphore(ctx, name)
	require.NoError(t, err)
	require.Len(t, sinfo.Holders, 1)
	require.EqualValues(t, 2, sinfo.Holders[0].Permits)
	require.Len(t, sinfo.Waiters, 1)
	require.Equal(t, wc.ID(), sinfo.Waiters[0].Client.ID)
	require.EqualValues(t, 1, sinfo.Waiters[0].Permits)
	require.NoError(t, sem.Release(pctx))
	wctx := recvAcquired(t, got, 10*time.Second, "the semaphore waiter woken")
	free, err := sem.Available(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(1), free)
	require.NoError(t, wc.Semaphore(name, 2).Release(wctx))
	require.Empty(t, aclDenials(t, tp.addrs, tp.user), "the server refused the latchkey user something")

	// The grant is restrictive: a lock under another prefix, a channel
	// outside it, and a command not granted are all refused.
	outside := lockClient(t, tp, rlock.Options{Prefix: "outside"}).Mutex(name)
	_, err = outside.Lock(ctx)
	requireRefused(t, err, "a lock under another prefix")
	rc := redisClient(t, tp)
	_, err = rc.Do(ctx, rc.B().Exists().Key("outside:{"+name+"}").Build()).AsInt64()
	requireRefused(t, err, "a key outside the prefix")
	publishCmd := rc.B().Publish().Channel("outside:ch").Message("x").Build()
	if tp.cluster {
		publishCmd = rc.B().Spublish().Channel("outside:{" + name + "}").Message("x").Build()
	}
	requireRefused(t, rc.Do(ctx, publishCmd).Error(), "a channel outside the prefix")
	requireRefused(t, rc.Do(ctx, rc.B().Type().Key(m.Key()).Build()).Error(), "a command that was not granted")
	require.NotEmpty(t, aclDenials(t, tp.addrs, tp.user))
}

// nodeClient connects to one node as the default user.
func nodeClient(t *testing.T, addr string) rueidis.Client {
	t.Helper()
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, ForceSingleClient: true, DisableCache: true})
	require.NoError(t, err)
	t.Cleanup(rc.Close)
	return rc
}

// requireRefused fails unless err is a refusal by the ACL.
func requireRefused(t *testing.T, err error, what string) {
	t.Helper()
	require.Error(t, err, "%s was allowed", what)
	// NOPERM directly, "can't run this command" or "no permissions to access"
	// from inside a script.
	refused := strings.Contains(err.Error(), "NOPERM") || strings.Contains(err.Error(), "can't run this command") ||
		strings.Contains(err.Error(), "no permissions")
	require.True(t, refused, "%s: want an ACL refusal, got %v", what, err)
}

// aclDenials reads every node's ACL log for user: one line per refusal,
// naming what was refused.
func aclDenials(t *testing.T, addrs []string, user string) []string {
	t.Helper()
	var out []string
	for _, addr := range addrs {
		rc := nodeClient(t, addr)
		entries, err := rc.Do(context.Background(), rc.B().AclLog().Count(100).Build()).ToArray()
		if err != nil {
			out = append(out, fmt.Sprintf("%s: ACL LOG: %v", addr, err))
			continue
		}
		for _, e := range entries {
			m, err := e.AsMap()
			if err != nil {
				out = append(out, fmt.Sprintf("%s: ACL LOG entry: %v", addr, err))
				continue
			}
			field := func(k string) string {
				v := m[k]
				s, _ := v.ToString()
				return s
			}
			if field("username") != user {
				continue
			}
			out = append(out, fmt.Sprintf("%s refused %s %q (in %s)", addr, field("reason"), field("object"), field("context")))
		}
	}
	return out
}

// TestACLClientTracking: rueidis' default client-side caching needs
// client|tracking, which the minimal grant leaves out, so a latchkey user
// connects with DisableCache (as lockClient does) or is granted it.
func TestACLClientTracking(t *testing.T) {
	ctx := context.Background()
	srv := ownServer(t)
	admin := nodeClient(t, srv.Addr)
	const user, password = "latchkey-acl-test", "acl-test-secret"
	require.NoError(t, admin.Do(ctx, admin.B().Arbitrary(aclSetUser(user, password, rlock.DefaultPrefix)...).Build()).Error())

	opt := rueidis.ClientOption{InitAddress: []string{srv.Addr}, Username: user, Password: password}
	_, err := rueidis.NewClient(opt)
	require.ErrorIs(t, err, rueidis.ErrNoCache)
	require.ErrorContains(t, err, "client|tracking")

	require.NoError(t, admin.Do(ctx, admin.B().Arbitrary("ACL", "SETUSER", user, "+client|tracking").Build()).Error())
	rc, err := rueidis.NewClient(opt)
	require.NoError(t, err)
	defer rc.Close()
	c, err := rlock.NewClient(rc, rlock.Options{})
	require.NoError(t, err)
	defer c.Close()
	m := c.Mutex(lockName(t))
	lctx := mustLock(t, ctx, m)
	require.NoError(t, m.Unlock(lctx))
	require.ErrorIs(t, lctx.Err(), context.Canceled)
}

// TestRegressACLAsking: the minimal grant lets latchkey work on a slot
// being migrated. It lacked asking, which rueidis sends before the command
// an -ASK redirects, so the importing node answered the command -MOVED
// back to the source: a re-entry and the watchdog's renewals of a lock
// whose keys had moved were refused until the migration ended.
func TestRegressACLAsking(t *testing.T) {
	ctx := t.Context()
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	cl, err := redistest.StartCluster(sctx, 3)
	cancel()
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, cl.Close()) })
	tp := topology{name: "cluster-acl", addrs: cl.Addrs, cluster: true, user: "latchkey-acl-test", password: "acl-test-secret"}
	for _, addr := range tp.addrs {
		admin := nodeClient(t, addr)
		require.NoError(t, admin.Do(ctx, admin.B().Arbitrary(aclSetUser(tp.user, tp.password, rlock.DefaultPrefix)...).Build()).Error())
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("refused to %s: %v", tp.user, aclDenials(t, tp.addrs, tp.user))
		}
	})

	c := lockClient(t, tp, rlock.Options{WatchdogTimeout: 600 * time.Millisecond}) // renewals every 200ms
	m := c.Mutex(lockName(t))
	lctx := mustLock(t, ctx, m)
	slot := redistest.SlotOf(m.Key())
	_, to, err := cl.OtherMaster(ctx, slot)
	require.NoError(t, err)
	// The lock's keys move; the slot stays MIGRATING on from, which
	// answers -ASK for them.
	mig, err := cl.BeginMigration(ctx, slot, to)
	require.NoError(t, err)
	_, err = mig.MoveKeys(ctx, 0)
	require.NoError(t, err)

	rctx, cancel := context.WithTimeout(lctx, 5*time.Second)
	defer cancel()
	inner, err := m.Lock(rctx)
	require.NoError(t, err, "a re-entry through -ASK")
	renewed := c.WatchdogStats().Renewed
	awaitCond(t, 5*time.Second, "two renewals through -ASK", func() bool { return c.WatchdogStats().Renewed >= renewed+2 })
	require.NoError(t, lctx.Err(), "lost the lock while its slot migrates")
	require.Empty(t, aclDenials(t, tp.addrs, tp.user), "the server refused the latchkey user something")

	// A release names the lock's channel as a key, which exists on no node,
	// so the importing node answers it TRYAGAIN until the slot is its own:
	// the Unlocks, retried, complete once the migration does.
	unlocked := make(chan error, 1)
	go func() {
		err := m.Unlock(inner)
		if err == nil {
			err = m.Unlock(lctx)
		}
		unlocked <- err
	}()
	time.Sleep(100 * time.Millisecond)
	require.NoError(t, mig.Finish(ctx))
	require.NoError(t, recvErr(t, unlocked, 10*time.Second, "the Unlocks"))
	require.False(t, exists(t, redisClient(t, topology{addrs: tp.addrs, cluster: true}), m.Key()), "the lock was not released")
	require.Empty(t, aclDenials(t, tp.addrs, tp.user), "the server refused the latchkey user something")
}
