package luascripts_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/internal/luascripts"
)

// rwFixture is one RWMutex's keys on one client, with helpers that run its
// scripts and fail the test on an error.
type rwFixture struct {
	t    *testing.T
	c    rueidis.Client
	k    luascripts.RWKeys
	wake luascripts.Wake
}

func newRW(t *testing.T, c rueidis.Client) rwFixture {
	t.Helper()
	f := rwFixture{t: t, c: c, k: luascripts.NewRWKeys("latchkey:{" + uniqueTag(t) + "}:rw")}
	t.Cleanup(func() { // t.Context() has ended by then
		keys := append(f.keys(), f.k.Fence)
		assert.NoError(t, c.Do(context.Background(), c.B().Del().Key(keys...).Build()).Error())
	})
	return f
}

// keys are every key of the RWMutex but its fencing counter.
func (f rwFixture) keys() []string {
	return []string{f.k.Write, f.k.Readers, f.k.ReadLeases, f.k.ReadRecords, f.k.QueueR, f.k.QueueW}
}

// readKeep is what a read hold keeps alive (rlock's side.keep).
func (f rwFixture) readKeep() [][]string {
	return [][]string{f.k.ReadKeep()}
}

// gone asserts that nothing of the RWMutex but its fencing counter is left.
func (f rwFixture) gone() {
	f.t.Helper()
	n, err := f.c.Do(f.t.Context(), f.c.B().Exists().Key(f.keys()...).Build()).AsInt64()
	require.NoError(f.t, err)
	assert.Zero(f.t, n, "keys of the RWMutex left")
}

func (f rwFixture) acquire(write bool, owner, client string, queued bool, l time.Duration) luascripts.AcquireReply {
	f.t.Helper()
	r, err := luascripts.RunRWAcquire(f.t.Context(), f.c, f.k, luascripts.AcquireArgs{
		Owner: owner, Lease: l, Client: client, Waiter: queued, Wake: f.wake, About: `{"id":"` + client + `"}`}, write, "")
	require.NoError(f.t, err)
	return r
}

func (f rwFixture) read(owner, client string, queued bool) luascripts.AcquireReply {
	return f.acquire(false, owner, client, queued, lease)
}

func (f rwFixture) write(owner, client string, queued bool) luascripts.AcquireReply {
	return f.acquire(true, owner, client, queued, lease)
}

// unlock drops one hold of owner's whose count is n; it returns the holds
// left and the clients woken.
func (f rwFixture) unlock(owner string, write bool, n int64, retry bool) (int64, int64) {
	f.t.Helper()
	out, err := luascripts.RunRWUnlock(f.t.Context(), f.c, f.k, luascripts.ReleaseArgs{Owner: owner, Count: n, Wake: f.wake, Retry: retry}, write)
	require.NoError(f.t, err)
	return out.Left, out.Woken
}

func (f rwFixture) reenter(owner string) int64 {
	f.t.Helper()
	n, err := luascripts.RunRWReenter(f.t.Context(), f.c, f.k, owner)
	require.NoError(f.t, err)
	return n
}

func (f rwFixture) leave(client string, write bool) {
	f.t.Helper()
	require.NoError(f.t, luascripts.RunRWLeave(f.t.Context(), f.c, f.k, client, write, f.wake))
}

func (f rwFixture) describe() luascripts.Described {
	f.t.Helper()
	return describe(f.t, f.c, f.k.Intro(), 10)
}

func (f rwFixture) listen(client string, write bool) listener {
	f.t.Helper()
	inbox := f.k.Inbox(client, write)
	return listener{c: f.c, inbox: inbox, msgs: subscribe(f.t, []string{standaloneAddr}, false, inbox)}
}

// TestRWReadersAndWriters: readers share, a writer waits for the last of
// them and is woken by its release, readers queued behind a writer are
// woken by its release, re-entries count, and every script leaves nothing
// behind.
func TestRWReadersAndWriters(t *testing.T) {
	f := newRW(t, standaloneClient(t))
	require.True(t, f.read("R1", "c1", false).Acquired)
	require.True(t, f.read("R2", "c2", false).Acquired)
	assert.Equal(t, map[string]string{"R1": "1", "R2": "1"}, hgetall(t, f.c, f.k.Readers))
	recs := hgetall(t, f.c, f.k.ReadRecords)
	assert.Len(t, recs, 2)
	assert.Regexp(t, `^R1\|0\|[0-9]+\|\{"id":"c1"\}$`, recs["R1"], "the grant's record: owner, no token, time, description")
	now := serverMillis(t, f.c)
	for _, o := range []string{"R1", "R2"} {
		end := leaseEnd(t, f.c, f.k.ReadLeases, o)
		assert.InDelta(t, now+lease.Milliseconds(), end, 1000, "%s's lease ends a lease from now", o)
	}
	between(t, pttl(t, f.c, f.k.Readers), lease-time.Second, lease, "the readers' longest lease")
	// One expiry for the side's three keys: the longest lease's end.
	longest := leaseEnd(t, f.c, f.k.ReadLeases, "R2")
	for _, k := range []string{f.k.Readers, f.k.ReadLeases, f.k.ReadRecords} {
		assert.Equal(t, longest, expireAt(t, f.c, k), "%s expires with the longest lease", k)
	}
	assert.Equal(t, int64(2), f.reenter("R1"))

	d := f.describe()
	require.Len(t, holdsOf(d, "read"), 2)
	for _, h := range d.Holds {
		assert.Equal(t, h.Owner, h.Record.Owner)
		assert.Greater(t, h.PTTL, lease-time.Second, "%s's lease left", h.Owner)
	}

	cw := f.listen("cw", true)
	r := f.write("W", "cw", true)
	require.False(t, r.Acquired)
	between(t, r.PTTL, lease-time.Second, lease, "refused: the least reader's lease")
	r = f.read("R3", "c3", false)
	require.False(t, r.Acquired, "a new reader overtook a queued writer")

	left, woken := f.unlock("R1", false, 2, false)
	assert.Equal(t, []int64{1, 0}, []int64{left, woken})
	left, woken = f.unlock("R1", false, 1, false)
	assert.Equal(t, []int64{0, 0}, []int64{left, woken}, "R2 still reads: nobody woken")
	assert.NotContains(t, hgetall(t, f.c, f.k.Readers), "R1")
	assert.NotContains(t, hgetall(t, f.c, f.k.ReadRecords), "R1", "the record outlived the hold")
	assert.Equal(t, []string{"R2"}, zmembers(t, f.c, f.k.ReadLeases), "the lease outlived the hold")
	cw.quiet(t)
	left, woken = f.unlock("R2", false, 1, false)
	assert.Equal(t, []int64{0, 1}, []int64{left, woken}, "the last reader wakes the writer")
	cw.woken(t)
	assert.False(t, exists(t, f.c, f.k.Readers))

	r = f.write("W", "cw", true)
	require.True(t, r.Acquired)
	assert.Positive(t, r.Token)
	// The writer reads too (a downgrade), whoever waits.
	r2 := f.acquire(false, "WR", "cw", false, lease)
	require.False(t, r2.Acquired, "without naming its write owner")
	r2, err := luascripts.RunRWAcquire(t.Context(), f.c, f.k, luascripts.AcquireArgs{Owner: "WR", Lease: lease, Client: "cw", Wake: f.wake}, false, "W")
	require.NoError(t, err)
	require.True(t, r2.Acquired)

	c4, c5 := f.listen("c4", false), f.listen("c5", false)
	require.False(t, f.read("R4", "c4", true).Acquired)
	require.False(t, f.read("R5", "c5", true).Acquired)
	cw2 := f.listen("cw2", true)
	require.False(t, f.write("W2", "cw2", true).Acquired)
	d = f.describe()
	writer := holdsOf(d, "write")
	require.Len(t, writer, 1)
	assert.Equal(t, r.Token, writer[0].Record.Token)
	require.Len(t, holdsOf(d, "read"), 1)
	assert.Len(t, queueOf(t, d, "read").Clients, 2)
	assert.Len(t, queueOf(t, d, "write").Clients, 1)

	left, woken = f.unlock("W", true, 1, false)
	assert.Equal(t, []int64{0, 2}, []int64{left, woken}, "the write release wakes both queued readers")
	c4.woken(t)
	c5.woken(t)
	cw2.quiet(t)
	// A retry takes the owner's absence for its own earlier run, whose
	// wake-ups went out already (as a Mutex's release retry does).
	left, woken = f.unlock("W", true, 1, true)
	assert.Equal(t, []int64{0, 0}, []int64{left, woken}, "a retry wakes nobody twice")
	c4.quiet(t)
	left, _ = f.unlock("W", true, 1, false)
	assert.Equal(t, int64(-1), left)

	require.True(t, f.read("R4", "c4", true).Acquired)
	f.leave("c5", false)
	left, woken = f.unlock("WR", false, 1, false)
	assert.Equal(t, []int64{0, 0}, []int64{left, woken}, "R4 still reads")
	left, woken = f.unlock("R4", false, 1, false)
	assert.Equal(t, []int64{0, 1}, []int64{left, woken})
	cw2.woken(t)
	left, _ = f.unlock("R4", false, 1, true)
	assert.Zero(t, left, "a retried read release")
	f.leave("cw2", true)
	f.gone()
}

// TestRWDeadReader: a reader whose lease ran out is dead: it cannot re-enter
// or release, a writer's acquire drops it (with its record), and it no
// longer holds a writer back while a live reader does.
func TestRWDeadReader(t *testing.T) {
	f := newRW(t, standaloneClient(t))
	require.True(t, f.read("L", "cl", false).Acquired)
	require.True(t, f.acquire(false, "D", "cd", false, time.Millisecond).Acquired)
	time.Sleep(20 * time.Millisecond) // D's lease runs out
	assert.Zero(t, f.reenter("D"), "a dead reader re-entered")
	left, _ := f.unlock("D", false, 1, false)
	assert.Equal(t, int64(-1), left, "a dead reader released")

	r := f.write("W", "cw", false)
	require.False(t, r.Acquired, "a writer got in beside a live reader")
	between(t, r.PTTL, lease-time.Second, lease, "refused: the live reader's lease, not the dead one's")
	assert.Equal(t, map[string]string{"L": "1"}, hgetall(t, f.c, f.k.Readers), "the writer's acquire dropped the dead reader")
	assert.NotContains(t, hgetall(t, f.c, f.k.ReadRecords), "D", "with its record")
	assert.Equal(t, []string{"L"}, zmembers(t, f.c, f.k.ReadLeases), "and its lease")
	readers := holdsOf(f.describe(), "read")
	require.Len(t, readers, 1)
	assert.Equal(t, "L", readers[0].Owner)

	// Renewals keep a live reader and find a dead one gone.
	held, err := luascripts.RunRenewHold(t.Context(), f.c, f.readKeep(), "L", 2*lease, luascripts.Sync{})
	require.NoError(t, err)
	assert.True(t, held)
	assert.Greater(t, pttl(t, f.c, f.k.Readers), lease, "the renewal raised the readers' expiry")
	held, err = luascripts.RunRenewHold(t.Context(), f.c, f.readKeep(), "D", 2*lease, luascripts.Sync{})
	require.NoError(t, err)
	assert.False(t, held, "a dead reader renewed")

	left, woken := f.unlock("L", false, 1, false)
	assert.Equal(t, []int64{0, 0}, []int64{left, woken})
	require.True(t, f.write("W", "cw", false).Acquired)
	held, err = luascripts.RunRenewHold(t.Context(), f.c, [][]string{{f.k.Write}}, "W", lease, luascripts.Sync{})
	require.NoError(t, err)
	assert.True(t, held)
	left, _ = f.unlock("W", true, 1, false)
	assert.Zero(t, left)
	f.gone()
}

// leaseEnd is owner's score in a lease set: the end of its lease, server ms.
func leaseEnd(t *testing.T, c rueidis.Client, leases, owner string) int64 {
	t.Helper()
	f, err := do(t, c, c.B().Zscore().Key(leases).Member(owner).Build()).AsFloat64()
	require.NoError(t, err)
	return int64(f)
}

// zmembers are the members of a sorted set, lowest score first.
func zmembers(t *testing.T, c rueidis.Client, key string) []string {
	t.Helper()
	v, err := do(t, c, c.B().Zrange().Key(key).Min("0").Max("-1").Build()).AsStrSlice()
	require.NoError(t, err)
	return v
}

// TestRegressRWWakeStopsOnlyInTheCallersQueue: a client has one queue entry
// string, in both queues when it waits to read and to write. A refused try
// walks both queues, stopping at the caller; before the fix it stopped at the
// client's entry in the other queue too. A writer's try then counted no
// reader before it although its client's reader was woken, woke the next
// writer as well, and that writer, refused by the reader on arrival, kept a
// window that lapsed in silence: it slept out the reader's 30 s lease
// (TestRWMutexExclusion's stalls). A reader's try, likewise, left its
// client's queued writer untold on a free lock.
func TestRegressRWWakeStopsOnlyInTheCallersQueue(t *testing.T) {
	t.Run("writer", func(t *testing.T) {
		f := newRW(t, standaloneClient(t))
		f.wake = minuteWindows
		require.True(t, f.write("X", "cx", false).Acquired)
		ar, aw, bw := f.listen("ca", false), f.listen("ca", true), f.listen("cb", true)
		require.False(t, f.read("AR", "ca", true).Acquired)
		require.False(t, f.write("BW", "cb", true).Acquired)
		require.False(t, f.write("AW", "ca", true).Acquired)
		_, woken := f.unlock("X", true, 1, false)
		require.Equal(t, int64(1), woken, "the write release wakes the reader queued first")
		ar.woken(t)
		r := f.write("AW", "ca", true)
		require.False(t, r.Acquired, "a writer overtook a woken reader")
		between(t, r.PTTL, time.Minute-5*time.Second, time.Minute, "refused until the reader's window ends")
		bw.quiet(t)
		aw.quiet(t)
		require.True(t, f.read("AR", "ca", true).Acquired, "the woken reader")
		_, woken = f.unlock("AR", false, 1, false)
		assert.Equal(t, int64(1), woken)
		bw.woken(t)
		f.leave("cb", true)
		aw.woken(t)
		f.leave("ca", true)
		f.gone()
	})
	// A woken writer refused all the same (the defect above; a reader got
	// in) waits for the holder's lease: when its window lapses, the walk that
	// drops it tells it, so that it asks again at the back of the queue.
	t.Run("lapse", func(t *testing.T) {
		f := newRW(t, standaloneClient(t))
		f.wake = minuteWindows
		require.True(t, f.read("R", "cr", false).Acquired)
		aw := f.listen("ca", true)
		require.False(t, f.write("AW", "ca", true).Acquired)
		// Woken once, with a window that has passed since.
		do(t, f.c, f.c.B().Zadd().Key(f.k.QueueW).Xx().ScoreMember().ScoreMember(-float64(serverMillis(t, f.c)-1000), "ca").Build())
		_, woken := f.unlock("R", false, 1, false)
		assert.Equal(t, int64(1), woken, "one message: the lapsed writer told it lost its place")
		aw.woken(t)
		assert.Empty(t, zmembers(t, f.c, f.k.QueueW), "it lost its place")
		f.writeOnce("AW", "ca")
	})
	t.Run("reader", func(t *testing.T) {
		f := newRW(t, standaloneClient(t))
		f.wake = minuteWindows
		require.True(t, f.write("X", "cx", false).Acquired)
		aw := f.listen("ca", true)
		require.False(t, f.write("AW", "ca", true).Acquired)
		// The writer's lease runs out: nobody releases, nobody is told.
		do(t, f.c, f.c.B().Del().Key(f.k.Write).Build())
		require.False(t, f.read("AR", "ca", false).Acquired, "a reader overtook a queued writer")
		aw.woken(t)
		f.writeOnce("AW", "ca")
	})
}

// TestRWReadGrantAfterLapse: a reader granted once its walks dropped
// writers queued before it wakes the readers behind it, which share with it:
// nobody told them, as the dropped writers stood before them when the write
// side was freed. Before the fix they slept out the bound of their refusal,
// the old writer's lease. A grant that dropped nobody tells nobody.
func TestRWReadGrantAfterLapse(t *testing.T) {
	// The write release wakes the writer queued first; its window lapses,
	// and C's walk drops it.
	t.Run("lapse", func(t *testing.T) {
		f := newRW(t, standaloneClient(t))
		f.wake = minuteWindows
		require.True(t, f.write("X", "cx", false).Acquired)
		fw := f.listen("fw", true)
		require.False(t, f.write("FW", "fw", true).Acquired)
		var ls []listener
		for _, client := range []string{"d", "c", "e"} {
			ls = append(ls, f.listen(client, false))
			require.False(t, f.read(strings.ToUpper(client), client, true).Acquired)
		}
		d, c, e := ls[0], ls[1], ls[2]
		_, woken := f.unlock("X", true, 1, false)
		assert.Equal(t, int64(1), woken, "the writer queued first")
		fw.woken(t)
		for _, l := range ls {
			l.quiet(t) // they wait for the writer
		}
		// Its window passed.
		do(t, f.c, f.c.B().Zadd().Key(f.k.QueueW).Xx().ScoreMember().ScoreMember(-float64(serverMillis(t, f.c)-1000), "fw").Build())
		require.True(t, f.read("C", "c", true).Acquired)
		fw.woken(t) // told it lost its place
		d.woken(t)
		e.woken(t)
		c.quiet(t)
		inWindow, _ := wokenEnd(t, f.c, f.k.QueueR, "d")
		assert.True(t, inWindow, "d got a window")
		// Granted in its window, D drops nobody and tells nobody.
		require.True(t, f.read("D", "d", true).Acquired)
		e.quiet(t)
		require.True(t, f.read("E", "e", true).Acquired)
		for _, o := range []string{"C", "D", "E"} {
			left, _ := f.unlock(o, false, 1, false)
			assert.Zero(t, left)
		}
		for _, l := range append(ls, fw) {
			l.quiet(t)
		}
		f.gone()
	})
	// The write lease runs out untold; C's walk drops the writer before it,
	// which nobody listens for, and E behind C is the next to share.
	t.Run("dead writer", func(t *testing.T) {
		f := newRW(t, standaloneClient(t))
		f.wake = minuteWindows
		require.True(t, f.write("X", "cx", false).Acquired)
		require.False(t, f.write("DW", "cd", true).Acquired) // cd never listens
		c, e := f.listen("c", false), f.listen("e", false)
		require.False(t, f.read("C", "c", true).Acquired)
		require.False(t, f.read("E", "e", true).Acquired)
		do(t, f.c, f.c.B().Del().Key(f.k.Write).Build())
		require.True(t, f.read("C", "c", true).Acquired)
		e.woken(t)
		c.quiet(t)
		assert.Empty(t, zmembers(t, f.c, f.k.QueueW), "the dead writer was dropped")
		require.True(t, f.read("E", "e", true).Acquired)
		for _, o := range []string{"C", "E"} {
			left, _ := f.unlock(o, false, 1, false)
			assert.Zero(t, left)
		}
		e.quiet(t)
		f.gone()
	})
}

// minuteWindows wakes clients with windows that never lapse in a test.
var minuteWindows = luascripts.Wake{Window: time.Minute}

// writeOnce takes the write hold for owner, a queued client's, releases
// it, and asserts that nothing is left.
func (f rwFixture) writeOnce(owner, client string) {
	f.t.Helper()
	require.True(f.t, f.write(owner, client, true).Acquired)
	left, _ := f.unlock(owner, true, 1, false)
	assert.Zero(f.t, left)
	f.gone()
}

// TestRegressRWDeadWriterFirst: a writer first in the queue whose client no
// longer listens is dropped by the walk that tells it. Before the fix, that
// walk went on to the next writer, which then overtook a reader queued
// before it; and a reader queued behind only the dead writer was refused
// with no bound on its wait (nobody left to wake it: a stall of a second).
func TestRegressRWDeadWriterFirst(t *testing.T) {
	t.Run("release", func(t *testing.T) {
		f := newRW(t, standaloneClient(t))
		f.wake = minuteWindows
		require.True(t, f.write("X", "cx", false).Acquired)
		require.False(t, f.write("DW", "cd", true).Acquired) // cd never listens
		ar, bw := f.listen("ca", false), f.listen("cb", true)
		require.False(t, f.read("AR", "ca", true).Acquired)
		require.False(t, f.write("BW", "cb", true).Acquired)
		_, woken := f.unlock("X", true, 1, false)
		assert.Equal(t, int64(1), woken)
		ar.woken(t)
		bw.quiet(t)
		assert.Equal(t, []string{"cb"}, zmembers(t, f.c, f.k.QueueW), "the dead writer was dropped, the live one kept")
		require.True(t, f.read("AR", "ca", true).Acquired, "the reader queued before the live writer")
		_, woken = f.unlock("AR", false, 1, false)
		assert.Equal(t, int64(1), woken)
		bw.woken(t)
		f.writeOnce("BW", "cb")
	})
	// A reader queued behind dead writers only gets in; one queued before it
	// is woken, and holds it back no more than it would a writer-free queue.
	t.Run("reader", func(t *testing.T) {
		for _, before := range []bool{false, true} {
			f := newRW(t, standaloneClient(t))
			f.wake = minuteWindows
			require.True(t, f.write("X", "cx", false).Acquired)
			require.False(t, f.write("DW", "cd", true).Acquired)
			r1 := f.listen("c1", false)
			if before {
				require.False(t, f.read("R1", "c1", true).Acquired)
			}
			ar := f.listen("ca", false)
			require.False(t, f.read("AR", "ca", true).Acquired)
			// The writer's lease runs out: nobody releases, nobody is told.
			do(t, f.c, f.c.B().Del().Key(f.k.Write).Build())
			r := f.read("AR", "ca", true)
			require.True(t, r.Acquired, "reader before it %v: refused for %v behind a dead writer", before, r.PTTL)
			ar.quiet(t)
			if before {
				r1.woken(t)
				require.True(t, f.read("R1", "c1", true).Acquired)
				left, _ := f.unlock("R1", false, 1, false)
				assert.Zero(t, left)
			}
			assert.Empty(t, zmembers(t, f.c, f.k.QueueW))
			left, _ := f.unlock("AR", false, 1, false)
			assert.Zero(t, left)
			f.gone()
		}
	})
}

// TestRegressRWForceUnlockOnlyLive: a force-unlock of an RWMutex whose only
// reader left crashed and its lease ran out finds nothing live: it reports
// (and the client counts) no force-unlock, and leaves nothing behind. The
// readers' keys expire with the longest lease ever started, so after a
// long-lease reader released early they outlived the dead one, and the
// force-unlock deleted them and reported true.
func TestRegressRWForceUnlockOnlyLive(t *testing.T) {
	f := newRW(t, standaloneClient(t))
	require.True(t, f.acquire(false, oid("L"), "cl", false, time.Hour).Acquired)
	require.True(t, f.acquire(false, oid("D"), "cd", false, 20*time.Millisecond).Acquired)
	left, _ := f.unlock(oid("L"), false, 1, false)
	require.Zero(t, left)
	end := leaseEnd(t, f.c, f.k.ReadLeases, oid("D"))
	require.Eventually(t, func() bool { return serverMillis(t, f.c) > end }, 5*time.Second, time.Millisecond, "D's lease to run out")
	ok, foreign, err := f.k.Intro().ForceUnlock(t.Context(), f.c, f.wake)
	require.NoError(t, err)
	require.Empty(t, foreign)
	assert.False(t, ok, "a force-unlock of a reader whose lease ran out")
	f.gone()

	// A live reader beside a dead one is a force-unlock.
	require.True(t, f.read(oid("L"), "cl", false).Acquired)
	require.True(t, f.acquire(false, oid("D"), "cd", false, 20*time.Millisecond).Acquired)
	end = leaseEnd(t, f.c, f.k.ReadLeases, oid("D"))
	require.Eventually(t, func() bool { return serverMillis(t, f.c) > end }, 5*time.Second, time.Millisecond, "D's lease to run out")
	ok, _, err = f.k.Intro().ForceUnlock(t.Context(), f.c, f.wake)
	require.NoError(t, err)
	assert.True(t, ok)
	f.gone()
}
