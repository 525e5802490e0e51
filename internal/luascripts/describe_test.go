package luascripts_test

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/internal/luascripts"
)

// describedQueue returns what queue keeps of each queued client for
// Inspect, {client id -> description}, for those that gave one.
func describedQueue(t *testing.T, c rueidis.Client, queue string) map[string]string {
	t.Helper()
	entries, err := c.Do(t.Context(), c.B().Zrange().Key(queue).Min("0").Max("-1").Build()).AsStrSlice()
	require.NoError(t, err)
	out := map[string]string{}
	for _, e := range entries {
		if id, desc, _ := strings.Cut(e, "|"); desc != "" {
			out[id] = desc
		}
	}
	return out
}

// describe runs in's describe script and parses its reply.
func describe(t *testing.T, c rueidis.Client, in luascripts.Intro, maxQueue int) luascripts.Described {
	t.Helper()
	s, call := in.Describe(maxQueue)
	v, err := s.Exec(t.Context(), c, call.Keys, call.Args).ToArray()
	require.NoError(t, err)
	d, err := luascripts.ParseDescribe(v)
	require.NoError(t, err)
	return d
}

// holdsOf are d's holds of mode.
func holdsOf(d luascripts.Described, mode string) []luascripts.Held {
	var out []luascripts.Held
	for _, h := range d.Holds {
		if h.Mode == mode {
			out = append(out, h)
		}
	}
	return out
}

// queueOf is d's queue of mode.
func queueOf(t *testing.T, d luascripts.Described, mode string) luascripts.QueueHead {
	t.Helper()
	for _, q := range d.Queues {
		if q.Mode == mode {
			return q
		}
	}
	t.Fatalf("no queue of mode %q in %+v", mode, d)
	return luascripts.QueueHead{}
}

// TestQueueDescriptions: a client that queues with a description has it
// kept in its entry (QueueEntry), so every way off a queue takes it along:
// a grant, leaving, and being dropped by a wake-up nobody listens for, for
// each primitive's queues. Describe gives the id and the description
// apart; a client that gives none has none.
func TestQueueDescriptions(t *testing.T) {
	c := standaloneClient(t)
	ctx := t.Context()
	wake := luascripts.Wake{}
	t.Run("Mutex", func(t *testing.T) {
		k := newKeys(t, c)
		take(t, c, k, "holder")
		c1 := luascripts.QueueEntry("c1", `{"id":"c1"}`)
		r := acquire(t, c, k, luascripts.AcquireArgs{Owner: "w1", Lease: lease, Client: c1, Waiter: true, About: `{"id":"c1"}`})
		require.False(t, r.Acquired)
		acquire(t, c, k, luascripts.AcquireArgs{Owner: "w2", Lease: lease, Client: luascripts.QueueEntry("c2", ""), Waiter: true})
		assert.Equal(t, map[string]string{"c1": `{"id":"c1"}`}, describedQueue(t, c, k.Queue), "c2 gave no description")
		d := queueOf(t, describe(t, c, k.Intro(), 10), "")
		require.Len(t, d.Clients, 2)
		assert.Equal(t, "c1", d.Clients[0].Client)
		assert.Equal(t, `{"id":"c1"}`, d.Clients[0].About)
		assert.Equal(t, "c2", d.Clients[1].Client)
		assert.Empty(t, d.Clients[1].About)
		assert.Zero(t, d.Clients[0].Want, "a Mutex's waiters want no permits")

		// Nobody listens for c1: the release's wake-up drops it, and c2.
		_, err := k.Release(ctx, c, luascripts.ReleaseArgs{Owner: "holder", Count: 1, Wake: wake})
		require.NoError(t, err)
		assert.False(t, exists(t, c, k.Queue), "dropped, with their descriptions")

		// A description may hold '|': the id ends at the first.
		take(t, c, k, "holder2")
		c3, c4 := luascripts.QueueEntry("c3", "1|c3"), luascripts.QueueEntry("c4", "1|c4")
		acquire(t, c, k, luascripts.AcquireArgs{Owner: "w3", Lease: lease, Client: c3, Waiter: true})
		acquire(t, c, k, luascripts.AcquireArgs{Owner: "w4", Lease: lease, Client: c4, Waiter: true})
		_, err = luascripts.RunLeave(ctx, c, k, c3, wake)
		require.NoError(t, err)
		assert.Equal(t, map[string]string{"c4": "1|c4"}, describedQueue(t, c, k.Queue), "leave")
		do(t, c, c.B().Del().Key(k.Lock).Build())
		require.True(t, acquire(t, c, k, luascripts.AcquireArgs{Owner: "w5", Lease: lease, Client: c4, Waiter: true}).Acquired)
		assert.False(t, exists(t, c, k.Queue), "granted, with its description")
	})
	t.Run("RWMutex", func(t *testing.T) {
		k := luascripts.NewRWKeys("latchkey:{" + uniqueTag(t) + "}:rw")
		t.Cleanup(func() { // t.Context() has ended by then
			assert.NoError(t, c.Do(context.Background(), c.B().Del().Key(k.Write, k.Readers, k.ReadLeases, k.ReadRecords, k.QueueR, k.QueueW, k.Fence).Build()).Error())
		})
		rw := func(write bool, owner, client string, queued bool) luascripts.AcquireReply {
			t.Helper()
			r, err := luascripts.RunRWAcquire(ctx, c, k, luascripts.AcquireArgs{
				Owner: owner, Lease: lease, Client: luascripts.QueueEntry(client, `{"id":"`+client+`"}`), Waiter: queued, Wake: wake, About: `{"id":"` + client + `"}`}, write, "")
			require.NoError(t, err)
			return r
		}
		require.True(t, rw(true, "w", "cw", false).Acquired)
		require.False(t, rw(false, "r1", "cr1", true).Acquired)
		require.False(t, rw(true, "w2", "cw2", true).Acquired)
		assert.Equal(t, map[string]string{"cr1": `{"id":"cr1"}`}, describedQueue(t, c, k.QueueR))
		assert.Equal(t, map[string]string{"cw2": `{"id":"cw2"}`}, describedQueue(t, c, k.QueueW))
		d := describe(t, c, k.Intro(), 10)
		writer := holdsOf(d, "write")
		require.Len(t, writer, 1)
		assert.Equal(t, "w", writer[0].Record.Owner)
		assert.Positive(t, writer[0].Record.Token)
		assert.Equal(t, `{"id":"cw"}`, writer[0].Record.About)
		require.Len(t, queueOf(t, d, "read").Clients, 1)
		require.Len(t, queueOf(t, d, "write").Clients, 1)
		assert.Equal(t, "cw2", queueOf(t, d, "write").Clients[0].Client)
		assert.Equal(t, `{"id":"cw2"}`, queueOf(t, d, "write").Clients[0].About)

		// The write release wakes cr1, nobody listens: dropped.
		out, err := luascripts.RunRWUnlock(ctx, c, k, luascripts.ReleaseArgs{Owner: "w", Count: 1, Wake: wake}, true)
		require.NoError(t, err)
		assert.Zero(t, out.Left)
		assert.Zero(t, out.Woken, "nobody listened")
		assert.False(t, exists(t, c, k.QueueR), "a dropped reader, with its description")
		assert.False(t, exists(t, c, k.Write), "the write record outlived the hold")
		require.NoError(t, luascripts.RunRWLeave(ctx, c, k, luascripts.QueueEntry("cw2", `{"id":"cw2"}`), true, wake))
		assert.False(t, exists(t, c, k.QueueW), "a writer that left, with its description")
	})
	t.Run("Semaphore", func(t *testing.T) {
		f := newSem(t, c, []string{standaloneAddr}, false, 1)
		sem := func(owner, client string) luascripts.AcquireReply {
			t.Helper()
			r, err := luascripts.RunSemAcquire(ctx, c, f.k, luascripts.AcquireArgs{
				Owner: owner, Lease: lease, Client: luascripts.QueueEntry(client, `{"id":"`+client+`"}`), Waiter: true, Wake: wake, About: `{"id":"` + client + `"}`}, 1, 1)
			require.NoError(t, err)
			return r
		}
		require.True(t, sem("a", "ca").Acquired)
		require.False(t, sem("b", "cb").Acquired)
		assert.Equal(t, map[string]string{"cb": `{"id":"cb"}`}, describedQueue(t, c, f.k.Queue))
		d := describe(t, c, f.k.Intro(), 10)
		require.Len(t, d.Holds, 1)
		assert.Equal(t, `{"id":"ca"}`, d.Holds[0].Record.About)
		require.Len(t, d.Queues, 1)
		require.Len(t, d.Queues[0].Clients, 1)
		assert.EqualValues(t, 1, d.Queues[0].Clients[0].Want, "wants are kept by entry")
		assert.Equal(t, "cb", d.Queues[0].Clients[0].Client)
		assert.EqualValues(t, 1, d.Size)

		out, err := luascripts.RunSemRelease(ctx, c, f.k, luascripts.ReleaseArgs{Owner: "a", Wake: wake}, 1)
		require.NoError(t, err)
		assert.Zero(t, out.Left)
		assert.Zero(t, out.Woken, "nobody listened")
		assert.False(t, exists(t, c, f.k.Queue), "a dropped client, with its description")
		assert.False(t, exists(t, c, f.k.Wants), "and its wants")
	})
}
