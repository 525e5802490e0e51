package integration

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/rlock"
)

// aclSetUserRedisson is the ACL SETUSER command for a user of
// ProtocolRedisson whose locks are named "<names>:…": the lock names' keys,
// RFencedLock's token counters and Redisson's unlock channels (as channels
// only), with aclCommands. docs/redisson.md shows it (see
// TestRedissonACLDocLine). javaKeys are further key patterns, for the Java
// side's user: Redisson's own scripts declare its channel and unlock latch
// as keys.
func aclSetUserRedisson(user, password, names string, javaKeys ...string) []string {
	cmd := []string{"ACL", "SETUSER", user, "on", ">" + password, "resetkeys", "resetchannels",
		"~" + names + ":*", "~redisson_lock_token:*"}
	for _, k := range javaKeys {
		cmd = append(cmd, "~"+k)
	}
	cmd = append(cmd, "&redisson_lock__channel:*", "-@all")
	for _, c := range aclCommands {
		cmd = append(cmd, "+"+c)
	}
	return cmd
}

// TestRedissonACLDocLine: docs/redisson.md shows exactly the ACL line
// TestRedissonMinimalACL grants.
func TestRedissonACLDocLine(t *testing.T) {
	doc, err := os.ReadFile("../docs/redisson.md")
	require.NoError(t, err)
	line := strings.Join(aclSetUserRedisson("latchkey", "secret", "orders"), " ")
	require.Contains(t, string(doc), "\n"+line+"\n",
		"docs/redisson.md's ACL line and aclSetUserRedisson in integration/redisson_acl_test.go have drifted apart")
}

// TestRedissonMinimalACL: a ProtocolRedisson user granted only what
// docs/redisson.md lists can do everything with a Mutex: Lock, re-enter,
// IsLocked, HoldCount, TTL, Inspect, watchdog renewals, Unlock waking a Go
// waiter and a Java one (the emulated Java client as a user with the
// Java side's extra key patterns), and ForceUnlock. The scripts used to
// declare Redisson's channel as a key, which Redis checks against the
// user's key patterns, so Inspect, Unlock and ForceUnlock were refused
// (NOPERM) and a lock stayed held for its lease.
func TestRedissonMinimalACL(t *testing.T) { forEachACLTopology(t, testRedissonMinimalACL) }

func testRedissonMinimalACL(t *testing.T, tp topology) {
	ctx := context.Background()
	const names = "orders"
	goTp, javaTp := tp, tp
	goTp.user, goTp.password = "latchkey-redisson-acl-test", "acl-test-secret"
	javaTp.user, javaTp.password = "redisson-java-acl-test", "acl-test-secret"
	for _, addr := range tp.addrs {
		admin := nodeClient(t, addr)
		for _, cmd := range [][]string{
			aclSetUserRedisson(goTp.user, goTp.password, names),
			aclSetUserRedisson(javaTp.user, javaTp.password, names, "redisson_lock__channel:*", "redisson_unlock_latch:*"),
		} {
			require.NoError(t, admin.Do(ctx, admin.B().Arbitrary(cmd...).Build()).Error())
		}
		require.NoError(t, admin.Do(ctx, admin.B().AclLog().Reset().Build()).Error())
		t.Cleanup(func() {
			admin.Do(context.Background(), admin.B().AclDeluser().Username(goTp.user, javaTp.user).Build())
		})
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("refused: %v %v", aclDenials(t, tp.addrs, goTp.user), aclDenials(t, tp.addrs, javaTp.user))
		}
	})
	name := names + ":" + lockName(t)
	admin := redisClient(t, tp) // the default user
	t.Cleanup(func() {
		_ = admin.Do(context.Background(), admin.B().Del().Key(name).Build()).Error()
		_ = admin.Do(context.Background(), admin.B().Del().Key(javaTokenKey(name)).Build()).Error()
	})

	c := lockClient(t, goTp, redissonOptions(rlock.Options{WatchdogTimeout: 600 * time.Millisecond})) // renewals every 200ms
	m := c.Mutex(name)
	lctx := mustLock(t, ctx, m)
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

	// A Go waiter in another client, woken by the unlock message.
	att := newAttempts()
	waiter := lockClient(t, goTp, redissonOptions(att.options(rlock.Options{}))).Mutex(name)
	acquired := startWaiter(t, ctx, waiter, att)
	renewed := c.WatchdogStats().Renewed
	awaitCond(t, 10*time.Second, "two watchdog renewals", func() bool { return c.WatchdogStats().Renewed >= renewed+2 })
	require.NoError(t, lctx.Err(), "lost the lock while renewals should succeed")
	require.NoError(t, m.Unlock(inner))
	require.NoError(t, m.Unlock(lctx))
	requireAcquired(t, acquired, redissonWoken, "the Go waiter was not woken")

	// A Java waiter (an RFencedLock) woken by Go's unlock, then a Go waiter
	// woken by Java's.
	java := newJavaClient(t, javaTp, 30*time.Second)
	l := java.lock(name, true)
	lctx = mustLock(t, ctx, m, rlock.WithLease(redissonLease))
	javaDone := make(chan error, 1)
	go func() {
		_, err := l.Lock(ctx, 1, redissonLease)
		javaDone <- err
	}()
	await(t, javaWaiting(java, name), 10*time.Second, "the Java waiter to wait")
	require.NoError(t, m.Unlock(lctx))
	requireAcquired(t, javaDone, redissonWoken, "the Java waiter was not woken by the Go unlock")
	att2 := newAttempts()
	waiter2 := lockClient(t, goTp, redissonOptions(att2.options(rlock.Options{}))).Mutex(name)
	acquired = startWaiter(t, ctx, waiter2, att2)
	require.NoError(t, l.Unlock(ctx, 1))
	requireAcquired(t, acquired, redissonWoken, "the Go waiter was not woken by the Java unlock")

	// ForceUnlock from another client; the watchdog's next renewal tells
	// the holder.
	lctx = mustLock(t, ctx, m)
	forced, err := lockClient(t, goTp, redissonOptions(rlock.Options{})).ForceUnlock(ctx, name)
	require.NoError(t, err)
	require.True(t, forced)
	requireLost(t, lctx, 10*time.Second, "the holder did not learn of the force-unlock")
	require.ErrorIs(t, m.Unlock(lctx), rlock.ErrNotHeld)
	require.Empty(t, aclDenials(t, tp.addrs, goTp.user), "the server refused the latchkey user something")
	require.Empty(t, aclDenials(t, tp.addrs, javaTp.user), "the server refused the Java user something")

	// The grant is restrictive: a lock named outside it is refused.
	_, err = c.Mutex(lockName(t)).Lock(ctx)
	requireRefused(t, err, "a lock named outside the grant")
}
