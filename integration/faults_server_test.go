package integration

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"net"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/internal/luascripts"
	"github.com/latchkey/latchkey/internal/redistest"
	"github.com/latchkey/latchkey/rlock"
	"github.com/latchkey/latchkey/rlock/fenced"
)

// Faults of the Redis server: paused, restarted empty. Both run on a private
// redis-server process, so the shared servers never see them.

// privateRedis starts a redis-server process of the test's own.
func privateRedis(t *testing.T) (*redistest.Server, topology) {
	t.Helper()
	srv, err := redistest.StartProcess(context.Background())
	require.NoError(t, err)
	t.Cleanup(func() { srv.Close() })
	return srv, topology{name: "private", addrs: []string{srv.Addr}}
}

// TestFaultRedisPaused: Redis stopped (SIGSTOP) for longer than half the
// lease, then resumed, in the middle of a contended run. The watchdog has
// renewed at most a third of a lease before the pause and gives a lease up
// only a whole lease after its last renewal, so nobody loses the lock:
// never two holders, and every waiter resumes and completes.
func TestFaultRedisPaused(t *testing.T) {
	ctx := faultCtx(t)
	const lease = 1500 * time.Millisecond
	const pause = lease * 55 / 100
	_, tp := privateRedis(t)
	pid, err := redistest.ProcessID(ctx, redisClient(t, tp))
	require.NoError(t, err)
	name := lockName(t)
	set := newLockSet(t)
	_, workers := contenders(t, tp, name, rlock.Options{WatchdogTimeout: lease})
	const perWorker = 6
	finished := set.start(ctx, workers, perWorker)
	await(t, set.afterAcquisitions(len(workers)), 20*time.Second, "the workload to get going")
	require.NoError(t, syscall.Kill(pid, syscall.SIGSTOP))
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGCONT) })
	time.Sleep(pause) // the fault's length, not a synchronisation
	require.NoError(t, syscall.Kill(pid, syscall.SIGCONT))
	await(t, finished, faultRunTimeout, "every worker to complete after the pause")

	r := set.report(t, "redis-sigstop")
	r.extra = fmt.Sprintf("pause=%v lease=%v lost_holds=%d", pause, lease, r.stats.LostHolds)
	r.check(t)
	require.Equal(t, len(workers)*perWorker, r.stats.Acquisitions, "every waiter completes")
	require.Zero(t, r.stats.Overlaps, "two holders at once")
	require.Zero(t, r.stats.LostHolds, "a pause shorter than two thirds of the lease must not cost a lock")
}

// TestFaultRedisRestart: Redis killed and restarted empty on the same port
// (no persistence). Holders learn that they lost their locks; waiters and
// new lockers carry on against the new server, which has to be sent the
// scripts again (NOSCRIPT, then EVAL); and the fencing counter starts again
// from 1, so a fenced resource that remembers a higher token turns every new
// holder away until it is reset (docs/safety.md).
func TestFaultRedisRestart(t *testing.T) {
	ctx := faultCtx(t)
	srv, tp := privateRedis(t)
	name := lockName(t)
	before := newLockSet(t)
	att := newAttempts()
	c1, workers := contenders(t, tp, name, att.options(rlock.Options{WatchdogTimeout: faultLease}))
	before.run(ctx, workers, 3)

	holder := c1.Mutex(name)
	hctx := mustLock(t, ctx, holder)
	oldToken, err := holder.Token(hctx)
	require.NoError(t, err)
	const waiters = 2
	tokens := make(chan int64, waiters)
	base := att.count(waitKey(name))
	for i := 0; i < waiters; i++ {
		m := workers[i+2] // the other client's handles
		go func() {
			lctx, err := m.Lock(ctx)
			if err != nil {
				t.Error(err)
				tokens <- 0
				return
			}
			tok, _ := m.Token(lctx)
			tokens <- tok
			if err := m.Unlock(lctx); err != nil {
				t.Error(err)
			}
		}()
	}
	// Both wait: one contending for the other client, one in its gate.
	await(t, att.reached(waitKey(name), base+waiters), 10*time.Second, "the waiters to block")

	restarted := restartInPlace(t, srv)
	await(t, hctx.Done(), 10*faultLease, "the holder's loss signal after the restart")
	lossSignal := time.Since(restarted)
	require.ErrorIs(t, context.Cause(hctx), rlock.ErrLockLost)
	require.Less(t, lossSignal, faultLease+time.Second, "the loss signal must come by the lease's local deadline (plus slack)")
	require.ErrorIs(t, holder.Unlock(hctx), rlock.ErrNotHeld)

	var newTokens []int64
	for i := 0; i < waiters; i++ {
		select {
		case tok := <-tokens:
			newTokens = append(newTokens, tok)
		case <-time.After(20 * time.Second):
			t.Fatal("a waiter did not get the lock after the restart")
		}
	}
	nextHolder := time.Since(restarted) // an upper bound: both waiters are done
	require.ElementsMatch(t, []int64{1, 2}, newTokens, "fencing tokens start again from 1 on the empty server")
	requireScriptsLoaded(t, redisClient(t, tp), luascripts.Acquire, luascripts.Release, luascripts.Renew)

	// A new locker: the lock works, but the store that saw the old tokens
	// refuses the new, lower ones until it is reset.
	m := c1.Mutex(name)
	lctx := mustLock(t, ctx, m)
	tok, err := m.Token(lctx)
	require.NoError(t, err)
	require.Less(t, tok, oldToken)
	_, err = before.store.Claim(ctx, tok)
	require.ErrorIs(t, err, fenced.ErrStale, "a store that remembers token %d must refuse token %d", oldToken, tok)
	require.NoError(t, m.Unlock(lctx))

	after := newLockSet(t) // the store, reset
	after.run(ctx, workers, 3)
	r := before.report(t, "redis-restart")
	r.merge(after.report(t, "redis-restart"))
	r.stats.Acquisitions += 1 + waiters
	r.lossSignal, r.nextHolder = lossSignal, nextHolder
	r.extra = fmt.Sprintf("token_before=%d tokens_after=%v refused_by_unreset_store=1 loss_cause=%q", oldToken, newTokens, context.Cause(hctx))
	r.check(t)
}

// restartInPlace kills srv and starts an empty redis-server on its port,
// stopped when the test ends, and returns when the new one is up.
func restartInPlace(t *testing.T, srv *redistest.Server) time.Time {
	t.Helper()
	_, p, err := net.SplitHostPort(srv.Addr)
	require.NoError(t, err)
	port, err := strconv.Atoi(p)
	require.NoError(t, err)
	require.NoError(t, srv.Close())
	again, err := redistest.StartProcessOnPort(context.Background(), port)
	require.NoError(t, err)
	t.Cleanup(func() { again.Close() })
	return time.Now()
}

// requireScriptsLoaded asserts that the server knows each script (SCRIPT
// EXISTS) and that it got them through EVAL, the NOSCRIPT fallback: nothing
// else loads scripts into a restarted server.
func requireScriptsLoaded(t *testing.T, rc rueidis.Client, scripts ...*luascripts.Script) {
	t.Helper()
	ctx := context.Background()
	var shas []string
	for _, s := range scripts {
		sum := sha1.Sum([]byte(s.Source()))
		shas = append(shas, hex.EncodeToString(sum[:]))
	}
	known, err := rc.Do(ctx, rc.B().ScriptExists().Sha1(shas...).Build()).AsIntSlice()
	require.NoError(t, err)
	for i, s := range scripts {
		require.Equal(t, int64(1), known[i], "script %s not loaded on the restarted server", s.Name())
	}
	stats, err := rc.Do(ctx, rc.B().Info().Section("commandstats").Build()).ToString()
	require.NoError(t, err)
	require.Positive(t, commandCalls(stats, "eval"), "no EVAL ran: the NOSCRIPT fallback did not")
	require.Positive(t, commandCalls(stats, "evalsha"))
}

// commandCalls reads calls=N of cmdstat_<cmd> from INFO commandstats.
func commandCalls(info, cmd string) int {
	for _, line := range strings.Split(info, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+cmd+":calls="); ok {
			n, _ := strconv.Atoi(strings.SplitN(rest, ",", 2)[0])
			return n
		}
	}
	return 0
}
