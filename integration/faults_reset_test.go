package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/internal/luascripts"
	"github.com/latchkey/latchkey/rlock"
)

// Connection resets that lose a reply: the command ran on the server, the
// client never hears back. The client side goes through an in-process
// toxiproxy; observers and waiters talk to Redis directly.
//
// To lose exactly one reply, a test blackholes the proxy's replies
// ("timeout" toxic, downstream), waits until the command's effect shows on
// the server, and removes the toxic, which closes every connection it
// swallowed data from: the reply is gone and the client sees a reset. The
// sustained case cuts connections as replies arrive (cutOnReplyToxic).

// proxied is a topology that reaches standalone Redis through x.
func proxied(x *netProxy) topology {
	return topology{name: "proxied", addrs: []string{x.Addr}}
}

// oneConnLockClient is a latchkey client whose rueidis client sends every
// command on a single connection (rueidis spreads them over four by default,
// dialled lazily), so that "the connection" a test cuts is the one the
// command under test travels on, and no dial of a fresh one is stuck
// behind the fault.
func oneConnLockClient(t *testing.T, tp topology, opts rlock.Options) *rlock.Client {
	t.Helper()
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: tp.addrs, DisableCache: true, PipelineMultiplex: -1})
	require.NoError(t, err)
	t.Cleanup(rc.Close)
	c, err := rlock.NewClient(rc, opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close()) })
	return c
}

// resetFixture is a proxy to standalone Redis with latchkey's scripts
// loaded, and a client that bypasses it.
func resetFixture(t *testing.T) (*netProxy, rueidis.Client) {
	t.Helper()
	x := startProxy(t, standalone.Addr)
	rc := redisClient(t, topologies()[0])
	loadScripts(t, rc)
	return x, rc
}

// lockLosingReply starts m.Lock with the proxy swallowing replies (a
// blackhole named "lose") and returns once the acquire has run on the
// server; Lock's result arrives on the channel.
func lockLosingReply(t *testing.T, ctx context.Context, x *netProxy, rc rueidis.Client, m *rlock.Mutex) <-chan lockResult {
	t.Helper()
	x.blackhole(t, "lose", "downstream")
	got := make(chan lockResult, 1)
	go func() {
		lctx, err := m.Lock(ctx)
		got <- lockResult{lctx, err}
	}()
	require.Eventually(t, func() bool { return exists(t, rc, m.Key()) }, 10*time.Second, time.Millisecond, "the acquire to run on the server")
	return got
}

// awaitLocked waits for the result of lockLosingReply, which must be a hold.
func awaitLocked(t *testing.T, got <-chan lockResult) context.Context {
	t.Helper()
	select {
	case res := <-got:
		require.NoError(t, res.err)
		return res.ctx
	case <-time.After(20 * time.Second):
		t.Fatal("Lock did not return once its reply was lost")
	}
	return nil
}

// loadScripts puts latchkey's scripts into the server's cache, as any
// earlier use would. Otherwise the first EVALSHA's reply is NOSCRIPT, and a
// test that swallows that reply finds that the script never ran.
func loadScripts(t *testing.T, rc rueidis.Client) {
	t.Helper()
	for _, s := range []*luascripts.Script{luascripts.Acquire, luascripts.Release, luascripts.Renew, luascripts.Describe, luascripts.Reenter, luascripts.Leave} {
		require.NoError(t, rc.Do(context.Background(), rc.B().ScriptLoad().Script(s.Source()).Build()).Error())
	}
}

// requireFreshSoleHold checks that lctx holds m exactly once, in Redis and
// locally, under the grant with token want, and that its Unlock leaves no
// lock behind: a hold whose acquisition was lost must be given back, not
// stacked under (or re-entered by) the new one (undone says which).
func requireFreshSoleHold(t *testing.T, rc rueidis.Client, lctx context.Context, m *rlock.Mutex, want int64, undone string) {
	t.Helper()
	require.Equal(t, []string{"1"}, holdCounts(t, rc, m.Key()), undone)
	require.Equal(t, 1, holdCount(t, lctx, m))
	tok, err := m.Token(lctx)
	require.NoError(t, err)
	require.Equal(t, want, tok, "the hold is not the grant after the lost one")
	require.NoError(t, m.Unlock(lctx))
	require.False(t, exists(t, rc, m.Key()), "a lock outlived its last Unlock: a lost grant was kept")
}

type lockResult struct {
	ctx context.Context
	err error
}

// TestFaultResetAcquire: the reply of an acquire is lost. Lock undoes the
// acquisition it cannot confirm and takes the lock afresh: the caller holds
// it once, not twice, with a grant newer than the lost one.
func TestFaultResetAcquire(t *testing.T) {
	ctx := faultCtx(t)
	x, rc := resetFixture(t)
	m := oneConnLockClient(t, proxied(x), rlock.Options{WatchdogTimeout: faultLease}).Mutex(lockName(t))

	got := lockLosingReply(t, ctx, x, rc, m)
	lostGrant := fenceValue(t, rc, m.Key())
	x.remove(t, "lose")
	lctx := awaitLocked(t, got)
	requireFreshSoleHold(t, rc, lctx, m, lostGrant+1, "the lost grant must be undone, not stacked under the new one")
	logFault(t, "reset-acquire: acquisitions=1 lost_grant_token=%d new_token=%d orphaned=0", lostGrant, lostGrant+1)
}

// TestFaultResetUndo: the reply of an acquire is lost, and Redis cannot be
// reached for a moment after (the proxy is down), so the first try to undo
// the acquisition fails too. Lock still ends up holding the lock once, and
// its Unlock leaves no lock behind: no hold may survive that nobody knows of.
func TestFaultResetUndo(t *testing.T) {
	const undoOutage = 300 * time.Millisecond
	ctx := faultCtx(t)
	x, rc := resetFixture(t)
	name := lockName(t)
	att := newAttempts()
	m := oneConnLockClient(t, proxied(x), rlock.Options{WatchdogTimeout: faultLease, OnAttempt: att.hook}).Mutex(name)

	got := lockLosingReply(t, ctx, x, rc, m)
	x.p.Stop() // the reply is lost, and nothing gets through for now
	x.remove(t, "lose")
	// The outage's length, not a synchronisation: the undo is tried at once,
	// and Lock then waits for its subscription, which cannot be made.
	time.Sleep(undoOutage)
	require.NoError(t, x.p.Start())
	lctx := awaitLocked(t, got)
	require.Equal(t, []string{"1"}, holdCounts(t, rc, m.Key()), "the lost acquisition must not stay stacked under the new one")
	require.NoError(t, m.Unlock(lctx))
	require.False(t, exists(t, rc, m.Key()), "a lock outlived its last Unlock: the lost acquisition was never undone")
	logFault(t, "reset-undo: acquisitions=1 attempts=%d orphaned=0", att.count(name))
}

// TestFaultResetRelease: the reply of a release is lost and Unlock retries
// it. Unlock returns nil, and the retry neither drops a second hold nor
// touches the next holder's lock.
func TestFaultResetRelease(t *testing.T) {
	ctx := faultCtx(t)

	t.Run("reentrant", func(t *testing.T) {
		x, rc := resetFixture(t)
		m := oneConnLockClient(t, proxied(x), rlock.Options{WatchdogTimeout: faultLease}).Mutex(lockName(t))
		lctx := mustLock(t, ctx, m)
		inner := mustLock(t, lctx, m)
		require.Equal(t, []string{"2"}, holdCounts(t, rc, m.Key()))

		x.blackhole(t, "lose", "downstream")
		errc := make(chan error, 1)
		go func() { errc <- m.Unlock(inner) }()
		require.Eventually(t, func() bool { return slicesEqual(holdCounts(t, rc, m.Key()), []string{"1"}) }, 10*time.Second, time.Millisecond, "the release to run on the server")
		x.remove(t, "lose")
		requireUnlocked(t, errc)
		require.Equal(t, []string{"1"}, holdCounts(t, rc, m.Key()), "the retried release dropped a second hold")
		require.Equal(t, 1, holdCount(t, lctx, m))
		require.NoError(t, m.Unlock(lctx))
		require.False(t, exists(t, rc, m.Key()))
		logFault(t, "reset-release-reentrant: acquisitions=2 holds_after_lost_reply=1 unlock_err=nil")
	})

	t.Run("reacquired", func(t *testing.T) {
		x, rc := resetFixture(t)
		name := lockName(t)
		m := oneConnLockClient(t, proxied(x), rlock.Options{WatchdogTimeout: faultLease}).Mutex(name)
		lctx := mustLock(t, ctx, m)
		att := newAttempts()
		w := lockClient(t, topologies()[0], rlock.Options{WatchdogTimeout: faultLease, OnAttempt: att.hook}).Mutex(name)
		acquired, release, wdone := make(chan context.Context, 1), make(chan struct{}), make(chan error, 1)
		go func() {
			wctx, err := w.Lock(ctx)
			if err != nil {
				wdone <- err
				return
			}
			acquired <- wctx
			<-release
			wdone <- w.Unlock(wctx)
		}()
		await(t, att.reached(name, 2), 10*time.Second, "the waiter to block")

		x.blackhole(t, "lose", "downstream")
		errc := make(chan error, 1)
		go func() { errc <- m.Unlock(lctx) }()
		var wctx context.Context
		select {
		case wctx = <-acquired: // the first release ran: the waiter got in
		case err := <-wdone:
			t.Fatalf("waiter: %v", err)
		case <-time.After(10 * time.Second):
			t.Fatal("the waiter did not get the lock released behind the lost reply")
		}
		before := hgetall(t, rc, m.Key())
		x.remove(t, "lose")
		requireUnlocked(t, errc)
		require.Equal(t, before, hgetall(t, rc, m.Key()), "the retried release touched the new holder's lock")
		require.Equal(t, 1, holdCount(t, wctx, w))
		close(release)
		require.NoError(t, <-wdone)
		require.False(t, exists(t, rc, m.Key()))
		logFault(t, "reset-release-reacquired: acquisitions=2 new_holder_untouched=true unlock_err=nil")
	})
}

// TestFaultResetUnlockAfterLoss: a holder told that its lock was lost calls
// Unlock while the network swallows every reply. The hold is known lost, so
// Unlock must not need Redis to say so: it returns ErrNotHeld, wrapping the
// loss, at once, without running a script (which would wait out its
// ReleaseTimeout here), and not success.
func TestFaultResetUnlockAfterLoss(t *testing.T) {
	ctx := faultCtx(t)
	x, rc := resetFixture(t)
	m := oneConnLockClient(t, proxied(x), rlock.Options{WatchdogTimeout: faultLease, ReleaseTimeout: time.Minute}).Mutex(lockName(t))
	lctx := mustLock(t, ctx, m)
	require.NoError(t, rc.Do(ctx, rc.B().Del().Key(m.Key()).Build()).Error())
	await(t, lctx.Done(), 10*faultLease, "the loss signal")
	require.ErrorIs(t, context.Cause(lctx), rlock.ErrLockLost)

	sent := evalshaCalls(t, rc)
	x.blackhole(t, "lose", "downstream")
	errc := make(chan error, 1)
	go func() { errc <- m.Unlock(lctx) }()
	err := recvErr(t, errc, 20*time.Second, "Unlock after the loss signal, with every reply lost")
	require.ErrorIs(t, err, rlock.ErrNotHeld, "Unlock after the loss signal")
	require.ErrorIs(t, err, rlock.ErrLockLost, "Unlock says why it is not held")
	require.Equal(t, sent, evalshaCalls(t, rc), "Unlock of a hold known lost ran a script")
	require.ErrorIs(t, m.Unlock(lctx), rlock.ErrNotHeld, "a second Unlock")
	x.remove(t, "lose")
	logFault(t, "reset-unlock-after-loss: acquisitions=1 unlock_err=ErrNotHeld scripts_run=0")
}

// evalshaCalls is how many EVALSHA calls the server has run.
func evalshaCalls(t *testing.T, rc rueidis.Client) int {
	t.Helper()
	stats, err := rc.Do(context.Background(), rc.B().Info().Section("commandstats").Build()).ToString()
	require.NoError(t, err)
	return commandCalls(stats, "evalsha")
}

// TestFaultResetPeer: a contended run while, in short windows, every
// connection that receives a reply is cut and the reply lost (the
// cut-on-reply toxic, toxiproxy's reset_peer without its goroutine leak),
// losing replies to acquires, renewals, releases and undos alike. Nothing may be
// lost, no Unlock may fail, and no lock may outlive the run by more than
// its lease.
func TestFaultResetPeer(t *testing.T) {
	ctx := faultCtx(t)
	x := startProxy(t, standalone.Addr)
	rc := redisClient(t, topologies()[0])
	name := lockName(t)
	set := newLockSet(t)
	c1, workers := contenders(t, proxied(x), name, rlock.Options{WatchdogTimeout: faultLease})
	const perWorker = 25
	connectionsCut.Store(0)
	windows := whileRunning(set.start(ctx, workers, perWorker), 30*time.Millisecond, func() {
		x.add(t, toxic{Name: "cut", Type: cutOnReplyType, Stream: "downstream"})
		time.Sleep(10 * time.Millisecond) // the fault's length, not a synchronisation
		x.remove(t, "cut")
	})

	key := c1.Mutex(name).Key()
	orphaned := requireNoOrphan(t, rc, key, faultLease)
	r := set.report(t, "reset-peer")
	r.extra = fmt.Sprintf("reset_windows=%d connections_cut=%d orphaned=%d lost_holds=%d", windows, connectionsCut.Load(), orphaned, r.stats.LostHolds)
	r.check(t)
	require.Equal(t, len(workers)*perWorker, r.stats.Acquisitions)
	require.Zero(t, r.stats.Overlaps)
}

// requireNoOrphan checks what is left of a lock once every holder has
// unlocked: nothing, or a key whose lease runs out within lease (an
// acquisition whose undo could not be delivered). It waits for such a key
// to expire and returns 1 for it.
func requireNoOrphan(t *testing.T, rc rueidis.Client, key string, lease time.Duration) int {
	t.Helper()
	pttl, err := rc.Do(context.Background(), rc.B().Pttl().Key(key).Build()).AsInt64()
	require.NoError(t, err)
	if pttl == -2 {
		return 0
	}
	require.Positive(t, pttl, "a lock left without expiry")
	require.LessOrEqual(t, time.Duration(pttl)*time.Millisecond, lease, "an orphan lock must expire within its lease")
	t.Logf("orphan lock %s: %v", key, hgetall(t, rc, key))
	require.Eventually(t, func() bool { return !exists(t, rc, key) }, lease+time.Second, 5*time.Millisecond)
	return 1
}

func requireUnlocked(t *testing.T, errc <-chan error) {
	t.Helper()
	select {
	case err := <-errc:
		require.NoError(t, err, "an Unlock whose reply was lost must report success")
	case <-time.After(20 * time.Second):
		t.Fatal("Unlock did not return after the reset")
	}
}

// holdCounts lists the hold counts in a lock hash, which has one field per
// owner and nothing else.
func holdCounts(t *testing.T, rc rueidis.Client, key string) []string {
	t.Helper()
	var out []string
	for _, v := range lockOwners(t, rc, key) {
		out = append(out, v)
	}
	return out
}

func fenceValue(t *testing.T, rc rueidis.Client, key string) int64 {
	t.Helper()
	n, err := rc.Do(context.Background(), rc.B().Get().Key(key+":fence").Build()).AsInt64()
	require.NoError(t, err)
	return n
}

func slicesEqual(a, b []string) bool { return strings.Join(a, ",") == strings.Join(b, ",") }

// TestFaultResetHandover: an Unlock hands the lock to a waiting goroutine of
// its client, and the release's reply comes too late (replies are delayed
// past ReleaseTimeout). The release did run, so the lock belongs to the
// handover's grant, which nobody was told of; the undo of that grant, sent
// through the same slow network, cannot be confirmed either. Unlock
// reports the failure, and the heir contends from a clean slate under an
// owner id of its own: it can neither re-enter nor keep the unconfirmed
// grant, which expires within its lease. The heir then holds the lock
// once, under the grant after the handover's, and its Unlock leaves no
// lock behind.
func TestFaultResetHandover(t *testing.T) {
	const replyDelay = 1500 * time.Millisecond
	// The heir waits out the unconfirmed grant's lease. It is long enough
	// that the heir's own watchdog renewals, slow until the test lifts the
	// delay, keep its hold.
	const lease = 4 * time.Second
	ctx := faultCtx(t)
	x, rc := resetFixture(t)
	name := lockName(t)
	att := newAttempts()
	c := oneConnLockClient(t, proxied(x), att.options(rlock.Options{WatchdogTimeout: lease, ReleaseTimeout: 300 * time.Millisecond}))
	holder, heir := c.Mutex(name), c.Mutex(name)
	lctx := mustLock(t, ctx, holder)
	oldToken, err := holder.Token(lctx)
	require.NoError(t, err)

	got := make(chan lockResult, 1)
	go func() {
		hctx, err := heir.Lock(ctx)
		got <- lockResult{hctx, err}
	}()
	await(t, att.reached(waitKey(name), 1), 10*time.Second, "the heir to wait")
	attemptsBefore := att.count(name)

	x.add(t, toxic{Name: "slow", Type: "latency", Stream: "downstream", Attributes: map[string]int{"latency": int(replyDelay / time.Millisecond)}})
	require.Error(t, holder.Unlock(lctx), "the release's reply came after ReleaseTimeout")
	require.ErrorIs(t, holder.Unlock(lctx), rlock.ErrNotHeld, "the failed Unlock still ended the hold locally")

	hctx := awaitLocked(t, got)
	x.remove(t, "slow")
	require.Greater(t, att.count(name), attemptsBefore, "the heir was handed nothing: it took the lock with an acquire of its own")
	// The heir's grant comes after the unconfirmed handover's, not that one.
	requireFreshSoleHold(t, rc, hctx, heir, oldToken+2, "the unconfirmed handover must not be kept under the heir's hold")
	logFault(t, "reset-handover: acquisitions=3 old_token=%d heir_token=%d orphaned=0", oldToken, oldToken+2)
}
