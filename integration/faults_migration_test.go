package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/internal/redistest"
	"github.com/latchkey/latchkey/rlock"
)

// Faults of the Cluster's topology: the slot of a held, contended lock
// migrated to another master.
//
// What Redis 7.0 and rueidis v1.0.79 do (see notify/migration_test.go and
// internal/luascripts/tryagain.go): while the slot is MIGRATING the old
// master keeps the sharded subscriptions and serves SPUBLISH; a command on
// keys it no longer has gets -ASK, and the new master runs it (a script
// that publishes there reaches nobody, so its wake-up is lost), unless it
// is a script with a declared key that does not exist there: TRYAGAIN,
// which latchkey retries until the migration ends. A single-key renewal
// is served. When the slot is reassigned the old master sends each
// subscriber a sunsubscribe push; rueidis ends the Receive, the hub wakes
// every waiter and subscribes again, which rueidis sends to the new master
// once it has refreshed its slot map (a random delay of up to 1 s, plus
// its retry backoff): until then a release wakes nobody, but the new
// subscription's confirmation wakes every waiter. Commands follow -MOVED
// and -ASK inside rueidis.

// migrationPerWorker is how many critical sections each of the four
// lock-set workers runs after the holder's release.
const migrationPerWorker = 2

// askWindow is how long the "ask" variant leaves the slots half-moved
// with the releases pending.
const askWindow = 300 * time.Millisecond

// migrationRenewals is how many renewals the holder's watchdog must make
// after the slot moved (or, with ASK, after its keys moved) before it
// releases: the lease is kept through the new master.
const migrationRenewals = 2

// slotMover moves the slots of the locks under test: at once, or in two
// steps with the lock's traffic in between.
type slotMover struct {
	cl    *redistest.Cluster
	ask   bool // keys moved, slot not yet reassigned: -ASK redirects
	moves []*redistest.Migration
}

// begin moves the slot of each key to another master (keys only, with ask).
// It returns how many keys it moved with ask (0 otherwise, where
// MigrateSlot does not count them).
func (s *slotMover) begin(t *testing.T, keys ...string) int {
	t.Helper()
	ctx := t.Context()
	moved := 0
	for _, key := range keys {
		slot := redistest.SlotOf(key)
		_, to, err := s.cl.OtherMaster(ctx, slot)
		require.NoError(t, err)
		if !s.ask {
			require.NoError(t, s.cl.MigrateSlot(ctx, slot, to))
			continue
		}
		m, err := s.cl.BeginMigration(ctx, slot, to)
		require.NoError(t, err)
		n, err := m.MoveKeys(ctx, 0)
		require.NoError(t, err)
		moved += n
		s.moves = append(s.moves, m)
	}
	return moved
}

// finish reassigns the half-moved slots.
func (s *slotMover) finish(t *testing.T) {
	t.Helper()
	for _, m := range s.moves {
		require.NoError(t, m.Finish(t.Context()))
	}
	s.moves = nil
}

// TestFaultSlotMigration: a holder holds lock L with a 1 s watchdog lease
// (and a 1-permit Semaphore S), four workers on two other clients wait for
// L and one for S; then the slots of L and S move to other masters.
//
// "moved": CLUSTER SETSLOT NODE at once. The holder's watchdog keeps both
// (renewals follow -MOVED); its fenced write after the move is accepted;
// once the waiters' subscriptions are on the new masters (timed: the
// resubscribed figure), its releases wake a waiter by message, so every
// handover takes milliseconds, not the TTL bound.
//
// "ask": the keys move but the slots stay MIGRATING/IMPORTING. Renewals
// run on the importing masters through -ASK; L's release is refused with
// TRYAGAIN (and retried) until the test finishes the migration askWindow
// later; S's release runs on the importing master and its wake-up is
// lost, so the waiter on S gets in by its TTL bound. After the migration
// every waiter makes progress within a lease and a renewal period.
//
// In both: nobody gets in while the holder holds, every waiter completes,
// tokens keep rising (the fenced store rejects nothing and loses nothing),
// and no key but the fencing counters, and no channel, is left on any node.
func TestFaultSlotMigration(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	cl, err := redistest.StartCluster(ctx, 3)
	cancel()
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, cl.Close()) })
	tp := topology{name: "cluster-migration", addrs: cl.Addrs, cluster: true}
	for _, ask := range []bool{false, true} {
		name := map[bool]string{false: "moved", true: "ask"}[ask]
		t.Run(name, func(t *testing.T) { slotMigrationFault(t, tp, &slotMover{cl: cl, ask: ask}) })
	}
}

func slotMigrationFault(t *testing.T, tp topology, mover *slotMover) {
	ctx := faultCtx(t)
	opts := rlock.Options{WatchdogTimeout: faultLease}
	renewal := faultLease / 3 // the default WatchdogInterval
	name := lockName(t)
	semName := name + "-sem"
	set := newLockSet(t)

	holder := lockClient(t, tp, opts)
	h := holder.Mutex(name)
	hctx := mustLock(t, ctx, h)
	token0, err := h.Token(hctx)
	require.NoError(t, err)
	set.add(ctx, token0, "holder.0")
	sem := holder.Semaphore(semName, 1)
	pctx, err := sem.Acquire(ctx, 1)
	require.NoError(t, err)

	// Two clients, two handles on L each; the second also waits for S.
	att1, att2 := newAttempts(), newAttempts()
	c1, c2 := lockClient(t, tp, att1.options(opts)), lockClient(t, tp, att2.options(opts))
	workers := []*rlock.Mutex{c1.Mutex(name), c1.Mutex(name), c2.Mutex(name), c2.Mutex(name)}
	finished := set.start(ctx, workers, migrationPerWorker)
	semAt := make(chan time.Time, 1)
	go func() {
		s := c2.Semaphore(semName, 1)
		sctx, err := s.Acquire(ctx, 1)
		at := time.Now()
		if err == nil {
			err = s.Release(sctx)
		}
		assert.NoError(t, err, "the waiter on S")
		semAt <- at
	}()
	// Each handle waits: one in Redis and one in its client's gate per client.
	for i, att := range []*attempts{att1, att2} {
		await(t, att.reached(waitKey(name), 2), 10*time.Second, fmt.Sprintf("client %d's waiters on L", i+1))
	}
	await(t, att2.reached(waitKey(semName), 1), 10*time.Second, "the waiter on S")
	admins := nodeClients(t, tp.addrs)
	require.Equal(t, 3, countChannels(t, admins, name), "the waiters' subscriptions: L's inbox of each client and S's")

	// Acquisitions from now on, timed, to bound every handover.
	total := len(workers) * migrationPerWorker
	acquiredAt := make(chan time.Time, total)
	go func() {
		for i := 1; i <= total; i++ {
			select {
			case <-set.afterAcquisitions(i):
				acquiredAt <- time.Now()
			case <-ctx.Done():
				return
			}
		}
	}()

	migrated := time.Now()
	keysMoved := mover.begin(t, h.Key(), c2.Mutex(semName).Key())
	migrationTook := time.Since(migrated)
	resubscribed := time.Duration(-1)
	if mover.ask {
		require.Positive(t, keysMoved, "no key moved: the renewals would not be redirected")
	} else {
		// The old masters ended the subscriptions; each hub makes its
		// own again on the new master once rueidis has refreshed its
		// slot map (a random delay of up to 1 s on a small cluster).
		awaitCond(t, 5*time.Second, "the waiters' subscriptions on the new masters", func() bool {
			return countChannels(t, admins, name) == 3
		})
		resubscribed = time.Since(migrated)
	}
	renewed := holder.WatchdogStats().Renewed
	awaitCond(t, migrationRenewals*faultLease, "the holder's renewals on the new master", func() bool {
		return holder.WatchdogStats().Renewed >= renewed+2*migrationRenewals // L and S each
	})
	require.NoError(t, hctx.Err(), "the holder lost L through the migration")
	require.NoError(t, pctx.Err(), "the holder lost S through the migration")
	set.add(ctx, token0, "holder.1") // still the newest token: accepted
	require.Zero(t, set.snapshot().Acquisitions, "a waiter got L while the holder held it")
	require.Empty(t, semAt, "the waiter on S got it while the holder held it")

	// The releases. With ASK, L's cannot run until the migration ends
	// (TRYAGAIN: see internal/luascripts/tryagain.go); S's runs on the
	// importing master and its wake-up is lost. The fault ends askWindow
	// later, with Finish; progress is bounded from the end of the fault.
	unlocked, semReleased := make(chan error, 1), make(chan error, 1)
	releasesSent := time.Now()
	go func() { unlocked <- h.Unlock(hctx) }()
	go func() { semReleased <- sem.Release(pctx) }()
	if mover.ask {
		time.Sleep(askWindow) // how long the fault lasts
		require.Empty(t, unlocked, "L's release ran while the slot was half-moved")
		mover.finish(t)
	}
	released := time.Now()
	bound := faultLease + renewal
	for _, ch := range []chan error{unlocked, semReleased} {
		select {
		case err := <-ch:
			require.NoError(t, err, "the holder's release after the migration")
		case <-time.After(bound):
			t.Fatal("a release did not return within a lease and a renewal period of the migration")
		}
	}
	var semNext time.Duration
	select {
	case at := <-semAt:
		semNext = at.Sub(releasesSent) // with ASK, S's release ran in the half-moved slot
		require.Less(t, semNext, bound+time.Duration(b2i(mover.ask))*askWindow, "the waiter on S")
	case <-time.After(bound):
		t.Fatalf("the waiter on S not served within a lease and a renewal period of the release")
	}
	// Handovers of L, each bounded from the acquisition before (the release first).
	prev, gaps := released, make([]time.Duration, 0, total)
	for i := 0; i < total; i++ {
		select {
		case at := <-acquiredAt:
			gaps = append(gaps, at.Sub(prev))
			prev = at
		case <-time.After(bound):
			t.Fatalf("acquisition %d of %d not within a lease and a renewal period of the one before", i+1, total)
		}
	}
	<-finished

	r := set.report(t, "slot-migration-"+map[bool]string{false: "moved", true: "ask"}[mover.ask])
	r.nextHolder = gaps[0]
	r.extra = fmt.Sprintf("migration=%v keys_moved=%d resubscribed=%s renewals_after=%d sem_next_holder=%v max_handover=%v",
		migrationTook.Round(time.Millisecond), keysMoved, fmtDuration(resubscribed), holder.WatchdogStats().Renewed-renewed,
		semNext.Round(time.Millisecond), maxOf(gaps[1:]).Round(time.Millisecond))
	r.check(t)
	require.Equal(t, total, r.stats.Acquisitions, "every waiter completes")
	require.Zero(t, r.stats.Overlaps)
	require.Zero(t, r.stats.LostHolds, "a holder lost L")
	require.Zero(t, r.stats.StaleRejected, "no holder lost L, so no write may be stale")
	if !mover.ask {
		// Released once the subscriptions had followed the slots: the
		// releases wake the waiters, the TTL bound is not needed.
		require.Less(t, gaps[0], faultLease/2, "the release after the migration woke nobody")
		require.Less(t, semNext, faultLease/2, "the release of S after the migration woke nobody")
	}
	_, token, err := set.store.Read(ctx)
	require.NoError(t, err)
	require.GreaterOrEqual(t, token, token0+int64(total), "the fencing token went on rising on the new master")
	requireNoLeftovers(t, tp, name, semName)
}

// countChannels counts the sharded channels of the locks named name* on
// every node.
func countChannels(t *testing.T, admins []rueidis.Client, name string) int {
	t.Helper()
	n := 0
	for _, c := range admins {
		chs, err := c.Do(t.Context(), c.B().PubsubShardchannels().Pattern("latchkey:{"+name+"*").Build()).AsStrSlice()
		require.NoError(t, err)
		n += len(chs)
	}
	return n
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func maxOf(ds []time.Duration) time.Duration {
	var m time.Duration
	for _, d := range ds {
		m = max(m, d)
	}
	return m
}
