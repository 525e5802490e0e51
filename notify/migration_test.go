package notify

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/internal/redistest"
)

// A sharded channel's slot migrated to another master while waiters wait.
//
// What the servers and rueidis do (Redis 7.0, rueidis v1.0.79): the old
// master keeps serving SSUBSCRIBE and SPUBLISH for the slot while it is
// MIGRATING, even once its keys have moved; when CLUSTER SETSLOT NODE takes
// the slot away from it, it sends each subscriber a `sunsubscribe` push for
// the channel. rueidis hands that to the subscription hook (Kind
// "sunsubscribe") and ends the Receive call with a nil error, without
// resubscribing. The hub treats that like any subscription that ended under
// live waiters: every waiter wakes (WokenAll), and the next Receive goes to
// the slot's new owner. That takes rueidis a while: its SSUBSCRIBE goes
// where its slot map says, the old master answers -MOVED, and rueidis
// retries (with a growing backoff) until a slot-map refresh, which it
// starts after a random delay of up to 1 s on a small cluster, sends it to
// the new owner. A message published meanwhile reaches nobody, but the new
// subscription's confirmation wakes every waiter again.
//
// These tests start a Cluster of their own: they move slots, which the
// shared one must not see.

// migrationCluster starts a 3-master Cluster for t alone.
func migrationCluster(t *testing.T) *redistest.Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := redistest.StartCluster(ctx, 3)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, cl.Close()) })
	return cl
}

// migrationTarget returns channel's slot, the master serving it and another master.
func migrationTarget(t *testing.T, cl *redistest.Cluster, channel string) (slot int, from, to string) {
	t.Helper()
	slot = redistest.SlotOf(channel)
	from, err := cl.MasterOf(t.Context(), slot)
	require.NoError(t, err)
	for _, addr := range cl.Addrs {
		if addr != from {
			return slot, from, addr
		}
	}
	t.Fatal("a cluster of one master")
	return
}

// requireAllWoken awaits one result per waiter and requires each to be WokenAll.
func requireAllWoken(t *testing.T, results <-chan waitResult, n int, what string) {
	t.Helper()
	for i := 0; i < n; i++ {
		r := await(t, results, what)
		require.NoError(t, r.err)
		require.Equal(t, WokenAll, r.wake, "waiter %d: %s", r.id, what)
	}
}

// requireServedBy requires channel to have one subscriber on to and none on
// from: the hub's subscription follows the slot.
func requireServedBy(t *testing.T, from, to rueidis.Client, channel string) {
	t.Helper()
	requireNumsubEventually(t, to, true, channel, 1)
	n, err := numsubOf(t.Context(), from, true, channel)
	require.NoError(t, err)
	require.Zero(t, n, "%q still subscribed on the slot's old master", channel)
}

// requireWakesOneEach publishes one message per waiter through the cluster
// client and requires each to wake exactly one waiter: messages flow again.
func requireWakesOneEach(t *testing.T, cc rueidis.Client, subs []*Subscription, channel string) {
	t.Helper()
	results := startWaiters(t, subs, longWait)
	for range subs {
		n, err := cc.Do(t.Context(), cc.B().Spublish().Channel(channel).Message("released").Build()).AsInt64()
		require.NoError(t, err)
		require.EqualValues(t, 1, n, "SPUBLISH after the migration reached %d subscribers", n)
		r := await(t, results, "a waiter woken by a message after the migration")
		require.NoError(t, r.err)
		require.Equal(t, WokenOne, r.wake)
	}
}

// resubscribed returns once the hub's subscription to channel is confirmed
// again: a Subscribe waits for the current round's confirmation, so marks
// taken after it are not overtaken by that confirmation's wake-up.
func resubscribed(t *testing.T, h *Hub, channel string) {
	t.Helper()
	s, err := h.Subscribe(t.Context(), channel)
	require.NoError(t, err)
	s.Release()
}

func TestShardedSlotMigration(t *testing.T) {
	cl := migrationCluster(t)
	cc := newClient(t, cl.Addrs...)
	nodes := make(map[string]rueidis.Client)
	for _, addr := range cl.Addrs {
		nodes[addr] = newNodeClient(t, addr)
	}
	const waiters = 3

	// The slot moved at once (MOVED for everyone after it).
	t.Run("moved", func(t *testing.T) {
		h := newHub(t, cc, Options{Mode: Sharded})
		channel := "{moved}:" + uniqueChannel(t)
		slot, from, to := migrationTarget(t, cl, channel)
		subs := subscribeN(t, h, channel, waiters)
		requireServedBy(t, nodes[to], nodes[from], channel) // still on from

		results := startWaiters(t, subs, longWait)
		start := time.Now()
		require.NoError(t, cl.MigrateSlot(t.Context(), slot, to))
		requireAllWoken(t, results, waiters, "the migration to wake every waiter")
		t.Logf("slot %d %s -> %s: every waiter woken %v after the migration began", slot, from, to, time.Since(start).Round(time.Millisecond))
		resubscribed(t, h, channel)
		t.Logf("resubscribed on the new owner %v after the migration began", time.Since(start).Round(time.Millisecond))
		requireServedBy(t, nodes[from], nodes[to], channel)
		requireWakesOneEach(t, cc, subs, channel)
	})

	// While the slot is half-moved, a script that runs on the importing
	// master (the lock's keys are there: -ASK) publishes where nobody
	// listens, so its wake-up is lost; waiters rely on their bound until
	// the migration finishes, which wakes them all.
	t.Run("ask", func(t *testing.T) {
		h := newHub(t, cc, Options{Mode: Sharded})
		channel := "{ask}:" + uniqueChannel(t)
		key := "{ask}:" + uniqueChannel(t) + ":key"
		slot, from, to := migrationTarget(t, cl, channel)
		subs := subscribeN(t, h, channel, waiters)
		require.NoError(t, cc.Do(t.Context(), cc.B().Set().Key(key).Value("1").Build()).Error())

		results := startWaiters(t, subs, longWait)
		m, err := cl.BeginMigration(t.Context(), slot, to)
		require.NoError(t, err)
		moved, err := m.MoveKeys(t.Context(), 0)
		require.NoError(t, err)
		require.Equal(t, 1, moved)
		script := fmt.Sprintf("return redis.call('spublish', %q, 'released')", channel)
		n, err := cc.Do(t.Context(), cc.B().Eval().Script(script).Numkeys(1).Key(key).Build()).AsInt64()
		require.NoError(t, err)
		require.Zero(t, n, "a script run on the importing master reached a subscriber")
		n, err = numsubOf(t.Context(), nodes[from], true, channel)
		require.NoError(t, err)
		require.EqualValues(t, 1, n, "the migrating master keeps the subscription until the slot is reassigned")
		require.Empty(t, results, "a lost message woke a waiter")

		require.NoError(t, m.Finish(t.Context()))
		requireAllWoken(t, results, waiters, "the end of the migration to wake every waiter")
		resubscribed(t, h, channel)
		requireServedBy(t, nodes[from], nodes[to], channel)
		requireWakesOneEach(t, cc, subs, channel)
		require.NoError(t, cc.Do(t.Context(), cc.B().Del().Key(key).Build()).Error())
	})
}
