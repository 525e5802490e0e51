package integration

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/rlock"
)

// Faults of the notifications: the pub/sub connections killed over and
// over, every message lost. Waiters must still get the lock, bounded by the
// holder's TTL.

// TestFaultPubSubKilled: during a contended run, every connection holding a
// subscription is killed (CLIENT KILL TYPE pubsub) every 20ms. With RESP3
// that is also the connection the commands use, so acquires, releases and
// renewals lose replies too. Every waiter still progresses: no single Lock
// waits longer than a lease plus a margin for reconnecting.
func TestFaultPubSubKilled(t *testing.T) {
	ctx := faultCtx(t)
	_, tp := privateRedis(t)
	admin := redisClient(t, tp) // never subscribes, so it is never killed
	name := lockName(t)
	set := newLockSet(t)
	c1, workers := contenders(t, tp, name, rlock.Options{WatchdogTimeout: faultLease})
	const perWorker = 50
	killed := 0
	rounds := whileRunning(set.start(ctx, workers, perWorker), 20*time.Millisecond, func() {
		n, err := admin.Do(ctx, admin.B().ClientKill().TypePubsub().Build()).AsInt64()
		require.NoError(t, err)
		killed += int(n)
	})

	orphaned := requireNoOrphan(t, admin, c1.Mutex(name).Key(), faultLease)
	r := set.report(t, "pubsub-killed")
	r.extra = fmt.Sprintf("kill_rounds=%d connections_killed=%d orphaned=%d lost_holds=%d", rounds, killed, orphaned, r.stats.LostHolds)
	r.check(t)
	require.Positive(t, killed, "no pub/sub connection was killed")
	require.Equal(t, len(workers)*perWorker, r.stats.Acquisitions)
	require.Zero(t, r.stats.Overlaps)
	require.Less(t, r.stats.MaxWait, faultLease+pubsubWaitMargin, "a waiter waited longer than the TTL bound")
}

// pubsubWaitMargin is what a single wait may take beyond the lease under the
// pub/sub faults: reconnecting, resubscribing, retrying, on a loaded machine.
const pubsubWaitMargin = 3 * time.Second

// TestFaultPubSubDropped: every pub/sub message is lost on the way to the
// lockers (a toxic drops them from the RESP3 stream and passes everything
// else). Unlocks wake nobody, so each waiter sleeps until the TTL it was
// told and tries again: every waiter still completes, more slowly. How much
// more slowly depends on the interleaving: a waiter refused while a release
// reserved the lock for the other client was told only the rest of the
// handoff window, so a run can get by without any wait of a whole lease;
// the test bounds waits from above and reports the run time.
func TestFaultPubSubDropped(t *testing.T) {
	ctx := faultCtx(t)
	const lease = 600 * time.Millisecond
	messagesDropped.Store(0)
	respParseErrors.Store(0)
	x := startProxy(t, standalone.Addr)
	x.add(t, toxic{Name: "drop", Type: dropMessagesType, Stream: "downstream"})
	name := lockName(t)
	set := newLockSet(t)
	_, workers := contenders(t, proxied(x), name, rlock.Options{WatchdogTimeout: lease})
	const perWorker = 3
	start := time.Now()
	set.run(ctx, workers, perWorker)
	took := time.Since(start)

	r := set.report(t, "pubsub-dropped")
	r.extra = fmt.Sprintf("messages_dropped=%d run=%v lease=%v", messagesDropped.Load(), took.Round(time.Millisecond), lease)
	r.check(t)
	require.Zero(t, respParseErrors.Load(), "the toxic could not parse the RESP3 stream")
	require.Positive(t, messagesDropped.Load(), "no message was dropped: the test tested nothing")
	require.Equal(t, len(workers)*perWorker, r.stats.Acquisitions, "every waiter completes")
	require.Zero(t, r.stats.Overlaps)
	require.Less(t, r.stats.MaxWait, time.Duration(len(workers))*lease+pubsubWaitMargin, "a waiter waited longer than the TTL bound allows")
}
