package luascripts_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/internal/luascripts"
)

// semFor is a semaphore fixture of size on mode's topology.
func semFor(t *testing.T, sharded bool, size int64) semFixture {
	t.Helper()
	if sharded {
		return newSem(t, clusterClient(t), clusterAddrs, true, size)
	}
	return newSem(t, standaloneClient(t), []string{standaloneAddr}, false, size)
}

// hashReads sums, over every node of c, the calls of the commands that read
// a whole hash: what a Semaphore script must not run on its holders.
func hashReads(t *testing.T, c rueidis.Client) int64 {
	t.Helper()
	var n int64
	for _, node := range c.Nodes() {
		info, err := node.Do(t.Context(), node.B().Info().Section("commandstats").Build()).ToString()
		require.NoError(t, err)
		for _, line := range strings.Split(info, "\n") {
			name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
			if !ok || !strings.HasPrefix(name, "cmdstat_") {
				continue
			}
			switch strings.TrimPrefix(name, "cmdstat_") {
			case "hgetall", "hkeys", "hvals", "hscan":
				calls, _, _ := strings.Cut(strings.TrimPrefix(rest, "calls="), ",")
				v, err := strconv.ParseInt(calls, 10, 64)
				require.NoError(t, err, line)
				n += v
			}
		}
	}
	return n
}

// TestRegressSemHeldIsNotSummed: a Semaphore script's cost must not grow
// with the holders. sem_held ran HGETALL on the holders hash and summed
// every holder's permits in Lua on each acquire, release and Available: a
// rate limiter of 50,000 single-permit holders moved 100,000 values into
// Lua per call, blocking Redis for milliseconds.
func TestRegressSemHeldIsNotSummed(t *testing.T) {
	const holders = 5000
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			f := semFor(t, m.sharded, 2*holders)
			for i := range holders {
				require.True(t, f.acquire(fmt.Sprintf("O%d", i), "c", 1, false).Acquired)
			}
			calls := []struct {
				what string
				run  func()
			}{
				{"acquire", func() { require.True(t, f.acquire("X", "x", 1, false).Acquired) }},
				{"release", func() { assert.Zero(t, f.release("X", false)) }},
				{"available", func() { assert.EqualValues(t, holders, f.available()) }},
			}
			for _, call := range calls {
				before := hashReads(t, f.c)
				call.run()
				assert.Equal(t, before, hashReads(t, f.c), "%s read the whole holders hash", call.what)
			}
			// The cleanup deletes the keys; nothing waits.
		})
	}
}

// heldIs asserts that the holders hash's running total "#held" is want,
// that it is the sum of the owners' fields, and that Available agrees.
func heldIs(t *testing.T, f semFixture, want int64) {
	t.Helper()
	m := hgetall(t, f.c, f.k.Holders)
	var sum int64
	for field, v := range m {
		if !strings.HasPrefix(field, "#") {
			n, err := strconv.ParseInt(v, 10, 64)
			require.NoError(t, err, field)
			sum += n
		}
	}
	require.Equal(t, want, sum, "the owners' permits")
	if want == 0 {
		assert.False(t, exists(t, f.c, f.k.Holders), "the holders hash outlived its holders: %v", m)
	} else {
		assert.Equal(t, strconv.FormatInt(want, 10), m["#held"], "the running total: %v", m)
	}
	assert.Equal(t, f.size-want, f.available())
}

// lapse waits until owner's lease has run out by the server's clock (the
// scripts' judge), its score in the holders' lease set.
// shortLease is a holder's lease that lapse awaits. It must outlast the
// calls made before that (a script run in between drops a holder already
// lapsed, and lapse then finds no lease: 20ms did, under -race on a busy
// machine).
const shortLease = 300 * time.Millisecond

func lapse(t *testing.T, f semFixture, owner string) {
	t.Helper()
	end := leaseEnd(t, f.c, f.k.Leases, owner)
	require.Eventually(t, func() bool { return serverMillis(t, f.c) > end }, waitFor, time.Millisecond)
}

// TestRegressSemHeldTotal: the running total of held permits stays exact
// through grants, releases, retried releases, lapsed holders, force-unlock
// and a size mismatch.
func TestRegressSemHeldTotal(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			f := semFor(t, m.sharded, 10)
			require.True(t, f.acquire(oid("A"), "a", 3, false).Acquired)
			require.True(t, f.acquire(oid("B"), "b", 2, false).Acquired)
			heldIs(t, f, 5)

			// A release subtracts the owner's permits once: a second one, and
			// a retry, find the field gone and subtract nothing.
			assert.Zero(t, f.release(oid("A"), false))
			heldIs(t, f, 2)
			assert.Equal(t, int64(-1), f.release(oid("A"), false))
			assert.Zero(t, f.release(oid("A"), true))
			heldIs(t, f, 2)

			// Lapsed holders are dropped with their permits, by an acquire...
			require.True(t, f.acquireLease(oid("D1"), "d", 4, false, shortLease).Acquired)
			heldIs(t, f, 6)
			lapse(t, f, oid("D1"))
			require.True(t, f.acquire(oid("C"), "c", 1, false).Acquired)
			heldIs(t, f, 3)
			// ... by Available, and by a release of another owner; a dead
			// holder's own release then subtracts nothing.
			require.True(t, f.acquireLease(oid("D2"), "d", 5, false, shortLease).Acquired)
			require.True(t, f.acquireLease(oid("D3"), "d", 1, false, shortLease).Acquired)
			lapse(t, f, oid("D2"))
			lapse(t, f, oid("D3"))
			assert.Equal(t, int64(7), f.available())
			require.True(t, f.acquireLease(oid("D4"), "d", 2, false, shortLease).Acquired)
			lapse(t, f, oid("D4"))
			assert.Zero(t, f.release(oid("C"), false))
			assert.Equal(t, int64(-1), f.release(oid("D4"), false))
			heldIs(t, f, 2)

			// A size mismatch changes nothing.
			other := f
			other.size = 4
			assert.Equal(t, luascripts.AcquireReply{Size: 10}, other.acquire(oid("Y"), "y", 1, false))
			heldIs(t, f, 2)

			// Force-unlock takes the total with the holders.
			require.True(t, f.acquire(oid("E"), "e", 1, false).Acquired)
			ok, foreign, err := f.k.Intro().ForceUnlock(t.Context(), f.c, f.wake)
			require.NoError(t, err)
			require.Empty(t, foreign)
			assert.True(t, ok)
			heldIs(t, f, 0)
			require.True(t, f.acquire(oid("F"), "f", 4, false).Acquired)
			heldIs(t, f, 4)
			assert.Zero(t, f.release(oid("F"), false))
			heldIs(t, f, 0)

			// Unused, the name takes a new size, counted from zero.
			require.True(t, other.acquire(oid("G"), "g", 4, false).Acquired)
			heldIs(t, other, 4)
			assert.Zero(t, other.release(oid("G"), false))
			f.gone()
		})
	}
}

// TestRegressSemStaleSize: once no live holder is left, the holders hash
// must go, and Inspect and ForceUnlock see only live state. semacquire
// dropped lapsed holders without settling the hash, which expires with the
// longest lease ever started: after a long-lease holder released early and
// a short-lease holder crashed, "#size" outlived them for the long lease,
// Inspect reported a Size with nobody holding or waiting, and ForceUnlock
// reported (and counted) a force-unlock for deleting only that.
func TestRegressSemStaleSize(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			f := semFor(t, m.sharded, 3)
			forceUnlock := func() bool {
				ok, foreign, err := f.k.Intro().ForceUnlock(t.Context(), f.c, f.wake)
				require.NoError(t, err)
				require.Empty(t, foreign)
				return ok
			}

			// Nobody waits: Inspect and ForceUnlock find nothing live.
			require.True(t, f.acquire(oid("A"), "a", 1, false).Acquired)
			require.True(t, f.acquireLease(oid("D"), "d", 1, false, shortLease).Acquired)
			assert.Zero(t, f.release(oid("A"), false))
			lapse(t, f, oid("D"))
			d := describe(t, f.c, f.k.Intro(), 10)
			assert.Empty(t, d.Holds)
			assert.Zero(t, d.Size, "a size with nobody holding or waiting")
			assert.False(t, forceUnlock(), "a force-unlock of nothing live")
			f.gone()

			// A client waits (told, without a window): a refused acquire that
			// drops the last holder, dead, deletes the holders hash.
			require.True(t, f.acquire(oid("A"), "a", 1, false).Acquired)
			require.True(t, f.acquireLease(oid("D"), "d", 1, false, shortLease).Acquired)
			w := f.listen("w")
			require.True(t, refused(f.acquire("x", "w", 3, true)))
			assert.Zero(t, f.release(oid("A"), false))
			w.woken(t) // the probe: it does not fit beside D
			lapse(t, f, oid("D"))
			require.True(t, refused(f.acquire(oid("X"), "x", 1, false)), "overtook the waiter")
			w.woken(t)
			assert.False(t, exists(t, f.c, f.k.Holders), "the holders hash outlived its holders")
			d = describe(t, f.c, f.k.Intro(), 10)
			assert.Empty(t, d.Holds)
			assert.EqualValues(t, 3, d.Size, "the waiter's size")
			assert.False(t, forceUnlock(), "a force-unlock of nothing live")
			assert.True(t, f.leave("w"))
			w.quiet(t)
			f.gone()
		})
	}
}
