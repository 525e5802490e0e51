package luascripts_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/internal/luascripts"
)

// semFixture is one semaphore's keys on one client, with helpers that run
// its scripts and fail the test on an error.
type semFixture struct {
	t     *testing.T
	c     rueidis.Client
	addrs []string
	k     luascripts.SemKeys
	size  int64
	wake  luascripts.Wake
}

func newSem(t *testing.T, c rueidis.Client, addrs []string, sharded bool, size int64) semFixture {
	t.Helper()
	f := semFixture{t: t, c: c, addrs: addrs, k: luascripts.NewSemKeys("latchkey:{" + uniqueTag(t) + "}:sem"),
		size: size, wake: luascripts.Wake{Sharded: sharded}}
	t.Cleanup(func() {
		assert.NoError(t, c.Do(context.Background(), c.B().Del().Key(f.keys()...).Build()).Error())
	})
	return f
}

// keys are every key the semaphore may have.
func (f semFixture) keys() []string {
	return []string{f.k.Holders, f.k.Leases, f.k.Records, f.k.Queue, f.k.Wants}
}

func (f semFixture) acquire(owner, client string, n int64, queued bool) luascripts.AcquireReply {
	return f.acquireLease(owner, client, n, queued, lease)
}

func (f semFixture) acquireLease(owner, client string, n int64, queued bool, l time.Duration) luascripts.AcquireReply {
	f.t.Helper()
	r, err := luascripts.RunSemAcquire(f.t.Context(), f.c, f.k, luascripts.AcquireArgs{
		Owner: owner, Lease: l, Client: client, Waiter: queued, Wake: f.wake}, n, f.size)
	require.NoError(f.t, err)
	return r
}

func (f semFixture) release(owner string, retry bool) int64 {
	f.t.Helper()
	out, err := luascripts.RunSemRelease(f.t.Context(), f.c, f.k, luascripts.ReleaseArgs{Owner: owner, Wake: f.wake, Retry: retry}, f.size)
	require.NoError(f.t, err)
	return out.Left
}

func (f semFixture) leave(client string) bool {
	f.t.Helper()
	ok, err := luascripts.RunSemLeave(f.t.Context(), f.c, f.k, client, f.size, f.wake)
	require.NoError(f.t, err)
	return ok
}

func (f semFixture) available() int64 {
	f.t.Helper()
	free, recorded, err := luascripts.RunSemAvailable(f.t.Context(), f.c, f.k, f.size)
	require.NoError(f.t, err)
	require.Zero(f.t, recorded)
	return free
}

func (f semFixture) listen(client string) listener {
	f.t.Helper()
	inbox := f.k.Inbox(client)
	return listener{c: f.c, sharded: f.wake.Sharded, inbox: inbox, msgs: subscribe(f.t, f.addrs, f.wake.Sharded, inbox)}
}

// gone asserts that nothing of the semaphore is left in Redis.
func (f semFixture) gone() {
	f.t.Helper()
	n, err := f.c.Do(f.t.Context(), f.c.B().Exists().Key(f.keys()...).Build()).AsInt64()
	require.NoError(f.t, err)
	assert.Zero(f.t, n, "keys of the semaphore left")
}

func (f semFixture) queue() []string {
	f.t.Helper()
	v, err := f.c.Do(f.t.Context(), f.c.B().Zrange().Key(f.k.Queue).Min("0").Max("-1").Build()).AsStrSlice()
	require.NoError(f.t, err)
	return v
}

func refused(r luascripts.AcquireReply) bool { return !r.Acquired && r.Size == 0 }

func TestSemAcquireRelease(t *testing.T) {
	f := newSem(t, standaloneClient(t), []string{standaloneAddr}, false, 3)
	require.True(t, f.acquire("A", "a", 2, false).Acquired)
	require.True(t, f.acquire("B", "b", 1, false).Acquired)
	assert.Equal(t, map[string]string{"A": "2", "B": "1", "#size": "3", "#held": "3"}, hgetall(t, f.c, f.k.Holders))
	recs := hgetall(t, f.c, f.k.Records)
	assert.Regexp(t, `^A\|0\|[0-9]+\|$`, recs["A"], "the grant's record: owner, no token, time, no description")
	assert.Len(t, recs, 2)
	assert.InDelta(t, serverMillis(t, f.c)+lease.Milliseconds(), leaseEnd(t, f.c, f.k.Leases, "A"), 1000, "the holder's lease")
	// One expiry for the holders' three keys: the longest lease's end.
	longest := leaseEnd(t, f.c, f.k.Leases, "B")
	for _, k := range []string{f.k.Holders, f.k.Leases, f.k.Records} {
		assert.Equal(t, longest, expireAt(t, f.c, k), "%s expires with the longest lease", k)
	}
	assert.Zero(t, f.available())

	r := f.acquire("C", "c", 1, false)
	require.True(t, refused(r))
	between(t, r.PTTL, lease-time.Second, lease, "refused: the holders' least PTTL")
	assert.False(t, exists(t, f.c, f.k.Queue), "a plain try does not queue")

	assert.Zero(t, f.release("A", false))
	assert.Equal(t, int64(2), f.available())
	assert.Equal(t, int64(-1), f.release("A", false), "a second release holds nothing")
	assert.Zero(t, f.release("A", true), "a retry takes the owner's absence for its own earlier run")
	assert.Zero(t, f.release("B", false))
	f.gone()
}

func TestSemSizeMismatch(t *testing.T) {
	f := newSem(t, standaloneClient(t), []string{standaloneAddr}, false, 3)
	other := f
	other.size = 5
	require.True(t, f.acquire("A", "a", 1, false).Acquired)
	assert.Equal(t, luascripts.AcquireReply{Size: 3}, other.acquire("X", "x", 1, true))
	_, recorded, err := luascripts.RunSemAvailable(t.Context(), f.c, f.k, 5)
	require.NoError(t, err)
	assert.Equal(t, int64(3), recorded)
	assert.False(t, exists(t, f.c, f.k.Queue), "a mismatched request must not queue")
	assert.Zero(t, f.release("A", false))
	f.gone()
	require.True(t, other.acquire("X", "x", 5, false).Acquired, "once unused, a name takes a new size")
	assert.Zero(t, other.release("X", false))
	f.gone()
}

// A waiter for many permits is not overtaken by small requests, and
// "#size" outlives the holders while it waits.
func TestSemFairness(t *testing.T) {
	f := newSem(t, standaloneClient(t), []string{standaloneAddr}, false, 3)
	require.True(t, f.acquire("A", "a", 1, false).Acquired)
	big := f.listen("big")
	require.True(t, refused(f.acquire("B1", "big", 3, true)))
	assert.Equal(t, "3", hgetall(t, f.c, f.k.Wants)["big"])
	// One expiry (ms since the epoch), not two PTTLs read a moment apart,
	// but for the clock ticks between the script's commands.
	assert.InDelta(t, expireAt(t, f.c, f.k.Queue), expireAt(t, f.c, f.k.Wants), 100)

	// Two permits are free, but the queued client wants all three.
	require.True(t, refused(f.acquire("S", "small", 1, false)), "a small request overtook a large waiting one")
	big.expect(t, "unlock") // the refused newcomer prodded the queue: is big still there?
	require.True(t, refused(f.acquire("B2", "big", 3, true)))

	assert.Zero(t, f.release("A", false))
	big.woken(t)
	assert.False(t, exists(t, f.c, f.k.Holders), "the holders hash outlived its holders")
	assert.Equal(t, "3", hgetall(t, f.c, f.k.Wants)["#size"], "the size outlives the holders while clients wait")
	require.True(t, f.acquire("B3", "big", 3, true).Acquired)
	assert.False(t, exists(t, f.c, f.k.Queue), "granted, the client is dequeued")
	assert.False(t, exists(t, f.c, f.k.Wants))
	assert.Zero(t, f.release("B3", false))
	big.quiet(t)
	f.gone()
}

// A release wakes every client its permits can serve, oldest first, and
// stops at the first live one that does not fit; the woken ones are granted
// in any order.
func TestSemWakeMany(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			c, addrs := standaloneClient(t), []string{standaloneAddr}
			if m.sharded {
				c, addrs = clusterClient(t), clusterAddrs
			}
			f := newSem(t, c, addrs, m.sharded, 4)
			require.True(t, f.acquire("H", "h", 4, false).Acquired)
			var ls []listener
			for i, n := range []int64{1, 2, 1, 1} {
				client := fmt.Sprintf("w%d", i)
				if i != 1 {
					ls = append(ls, f.listen(client))
				} else {
					ls = append(ls, listener{}) // w1 is dead: nobody listens
				}
				require.True(t, refused(f.acquire("x", client, n, true)))
			}
			late := f.listen("w4")
			require.True(t, refused(f.acquire("x", "w4", 2, true)))
			assert.Zero(t, f.release("H", false))
			// w0, w2, w3 fit (w1, dead, is dropped); w4 does not, and is
			// told only to learn that it listens.
			ls[0].woken(t)
			ls[2].woken(t)
			ls[3].woken(t)
			late.woken(t)
			assert.NotContains(t, f.queue(), "w1")
			for _, i := range []int{3, 0, 2} {
				require.True(t, f.acquire(fmt.Sprintf("O%d", i), fmt.Sprintf("w%d", i), 1, true).Acquired, "w%d", i)
			}
			require.True(t, refused(f.acquire("x", "w4", 2, true)))
			assert.True(t, f.leave("w4"))
			late.quiet(t)
			for _, i := range []int{0, 2, 3} {
				assert.Zero(t, f.release(fmt.Sprintf("O%d", i), false))
			}
			f.gone()
		})
	}
}

// A holder whose lease ran out is dead: its permits are free, acquires and
// Available drop it (its field, lease and record), a renewal finds it
// gone, and a live holder renews alone.
func TestSemDeadHolder(t *testing.T) {
	f := newSem(t, standaloneClient(t), []string{standaloneAddr}, false, 2)
	require.True(t, f.acquire("A", "a", 1, false).Acquired)
	require.True(t, f.acquireLease("D", "d", 1, false, time.Millisecond).Acquired)
	time.Sleep(20 * time.Millisecond) // D's lease runs out
	held, err := luascripts.RunRenewHold(t.Context(), f.c, [][]string{f.k.Keep()}, "D", lease, luascripts.Sync{})
	require.NoError(t, err)
	assert.False(t, held, "a dead holder renewed")
	held, err = luascripts.RunRenewHold(t.Context(), f.c, [][]string{f.k.Keep()}, "A", 2*lease, luascripts.Sync{})
	require.NoError(t, err)
	assert.True(t, held)
	assert.Greater(t, pttl(t, f.c, f.k.Leases), lease, "the renewal raised the holders' expiry")
	assert.Equal(t, int64(1), f.available())
	assert.NotContains(t, hgetall(t, f.c, f.k.Holders), "D")
	assert.NotContains(t, hgetall(t, f.c, f.k.Records), "D")
	assert.Equal(t, []string{"A"}, zmembers(t, f.c, f.k.Leases))
	assert.Equal(t, int64(-1), f.release("D", false), "a dead holder's release holds nothing")
	require.True(t, f.acquire("B", "b", 1, false).Acquired)
	assert.Zero(t, f.release("A", false))
	assert.Zero(t, f.release("B", false))
	f.gone()
}

// A dead client at the head of the queue does not block those behind it:
// a newcomer refused only because of it prods the queue, which drops it.
func TestSemDeadQueueHead(t *testing.T) {
	f := newSem(t, standaloneClient(t), []string{standaloneAddr}, false, 3)
	require.True(t, f.acquire("A", "a", 1, false).Acquired)
	require.True(t, refused(f.acquire("x", "dead", 3, true)))
	require.True(t, f.acquire("S", "small", 1, false).Acquired, "the dead head kept a newcomer out")
	assert.False(t, exists(t, f.c, f.k.Queue))
	assert.Zero(t, f.release("S", false))
	assert.Zero(t, f.release("A", false))
	f.gone()
}

// A leave wakes whom it unblocks; a queue of leavers leaves nothing behind.
func TestSemLeave(t *testing.T) {
	f := newSem(t, standaloneClient(t), []string{standaloneAddr}, false, 3)
	require.True(t, f.acquire("A", "a", 2, false).Acquired)
	big, small := f.listen("big"), f.listen("small")
	require.True(t, refused(f.acquire("x", "big", 3, true)))
	require.True(t, refused(f.acquire("x", "small", 1, true)))
	big.woken(t) // small's prod: it learnt that big still listens
	small.quiet(t)
	assert.True(t, f.leave("big"))
	small.woken(t)
	assert.False(t, f.leave("big"), "not queued any more")
	assert.True(t, f.leave("small"))
	assert.Zero(t, f.release("A", false))
	f.gone()

	// Queued with nobody holding: "#size" lives in the wants, with the queue.
	require.True(t, f.acquire("A", "a", 3, false).Acquired)
	require.True(t, refused(f.acquire("x", "small", 1, true)))
	small.quiet(t)
	assert.Zero(t, f.release("A", false))
	small.woken(t)
	assert.False(t, exists(t, f.c, f.k.Holders), "the holders hash outlived its holders")
	assert.Equal(t, "3", hgetall(t, f.c, f.k.Wants)["#size"])
	// One expiry (ms since the epoch), not two PTTLs read a moment apart,
	// but for the clock ticks between the script's commands.
	assert.InDelta(t, expireAt(t, f.c, f.k.Queue), expireAt(t, f.c, f.k.Wants), 100)
	assert.True(t, f.leave("small"))
	f.gone()
}

// A queued client whose next contender wants fewer permits than its entry
// did wakes those behind it that now fit, when it is granted.
func TestSemSmallerWant(t *testing.T) {
	f := newSem(t, standaloneClient(t), []string{standaloneAddr}, false, 3)
	require.True(t, f.acquire("A", "a", 1, false).Acquired)
	c, d := f.listen("c"), f.listen("d")
	require.True(t, refused(f.acquire("x", "c", 3, true)))
	require.True(t, refused(f.acquire("x", "d", 1, true)))
	c.woken(t) // d's prod: is c still there?
	d.quiet(t)
	require.True(t, f.acquire("C", "c", 1, true).Acquired)
	d.woken(t)
	require.True(t, f.acquire("D", "d", 1, true).Acquired)
	for _, o := range []string{"A", "C", "D"} {
		assert.Zero(t, f.release(o, false))
	}
	c.quiet(t)
	f.gone()
}

// TestSemWakeThousands: a release that admits thousands of queued clients
// gives each its window. wake wrote the windows with one ZADD XX over all
// of them, and Lua's unpack fails past about 8,000 values: the script
// stopped after the release and the messages, with no window written, and
// the caller got an error for a release that happened.
func TestSemWakeThousands(t *testing.T) {
	const n = 4200 // 8,400 values for one ZADD
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			c, addrs := standaloneClient(t), []string{standaloneAddr}
			if m.sharded {
				c, addrs = clusterClient(t), clusterAddrs
			}
			f := newSem(t, c, addrs, m.sharded, n)
			f.wake.Window = time.Minute
			require.True(t, f.acquire("H", "h", n, false).Acquired)
			inboxes := make([]string, n)
			for i := range inboxes {
				client := fmt.Sprintf("w%d", i)
				inboxes[i] = f.k.Inbox(client)
				require.True(t, refused(f.acquire("x", client, 1, true)))
			}
			subscribe(t, addrs, m.sharded, inboxes...)
			out, err := luascripts.RunSemRelease(t.Context(), c, f.k, luascripts.ReleaseArgs{Owner: "H", Wake: f.wake}, f.size)
			require.NoError(t, err)
			assert.EqualValues(t, n, out.Woken)
			woken, err := c.Do(t.Context(), c.B().Zcount().Key(f.k.Queue).Min("-inf").Max("(0").Build()).AsInt64()
			require.NoError(t, err)
			assert.EqualValues(t, n, woken, "clients with a window")
		})
	}
}

// TestSemWokenCountsMessages: a release reports the messages that reached
// a client, which the wake-up metric counts. A client still in the window
// an earlier release gave it is not told again, but wake counted it as
// woken, so a second release in that window reported (and the metric
// counted) a message never sent.
func TestSemWokenCountsMessages(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			c, addrs := standaloneClient(t), []string{standaloneAddr}
			if m.sharded {
				c, addrs = clusterClient(t), clusterAddrs
			}
			f := newSem(t, c, addrs, m.sharded, 2)
			f.wake.Window = time.Minute
			require.True(t, f.acquire("H1", "h", 1, false).Acquired)
			require.True(t, f.acquire("H2", "h", 1, false).Acquired)
			w := f.listen("w")
			require.True(t, refused(f.acquire("x", "w", 1, true)))
			release := func(owner string) int64 {
				out, err := luascripts.RunSemRelease(t.Context(), c, f.k, luascripts.ReleaseArgs{Owner: owner, Wake: f.wake}, f.size)
				require.NoError(t, err)
				return out.Woken
			}
			assert.EqualValues(t, 1, release("H1"), "w told")
			w.woken(t)
			assert.EqualValues(t, 0, release("H2"), "w, in its window, is not told again")
			w.quiet(t)
		})
	}
}

// TestSemGrantAfterLapse: a queued client granted once its walk dropped the
// woken clients whose window lapsed walks on past itself, waking those
// behind it that the permits left serve (D slept until the old holder's
// lease end); a client granted in its own window tells nobody.
func TestSemGrantAfterLapse(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			f := semFor(t, m.sharded, 2)
			f.wake.Window = 20 * time.Millisecond
			require.True(t, f.acquire("H", "h", 2, false).Acquired)
			var ls []listener
			for _, client := range []string{"fa", "fb", "c", "d"} {
				ls = append(ls, f.listen(client))
				require.True(t, refused(f.acquire("x", client, 1, true)))
			}
			fa, fb, c, d := ls[0], ls[1], ls[2], ls[3]
			fa.quiet(t) // refused for H's permits, the newcomers prodded nobody
			assert.Zero(t, f.release("H", false))
			fa.woken(t)
			fb.woken(t)
			c.woken(t) // the probe: it watches fa's and fb's windows
			d.quiet(t)
			_, end := wokenEnd(t, f.c, f.k.Queue, "fb")
			require.Eventually(t, func() bool { return serverMillis(t, f.c) > end }, waitFor, time.Millisecond)

			f.wake.Window = time.Minute // d's, which must not lapse
			require.True(t, f.acquire("C", "c", 1, true).Acquired)
			fa.woken(t) // told its window lapsed
			fb.woken(t)
			d.woken(t) // the permit C left
			woken, _ := wokenEnd(t, f.c, f.k.Queue, "d")
			assert.True(t, woken, "d got a window")

			// Granted in its window, D tells nobody: e, woken too, and g,
			// told at C's release that it does not fit, know already.
			e, g := f.listen("e"), f.listen("g")
			require.True(t, refused(f.acquire("x", "e", 1, true)))
			require.True(t, refused(f.acquire("x", "g", 1, true)))
			e.woken(t) // g's prod: e does not fit beside d
			assert.Zero(t, f.release("C", false))
			e.woken(t)
			g.woken(t) // the probe
			require.True(t, f.acquire("D", "d", 1, true).Acquired)
			e.quiet(t)
			g.quiet(t)
			require.True(t, f.acquire("E", "e", 1, true).Acquired)
			for _, o := range []string{"D", "E"} {
				assert.Zero(t, f.release(o, false))
			}
			g.woken(t)
			assert.True(t, f.leave("g"))
			ls = append(ls, e, g)
			for _, l := range ls {
				l.quiet(t)
			}
			f.gone()
		})
	}
}
