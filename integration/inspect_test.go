package integration

import (
	"context"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/internal/redisinfo"
	"github.com/latchkey/latchkey/internal/redistest"
	"github.com/latchkey/latchkey/rlock"
)

// TestInspect: the holder's record (client name, host, pid, token, grant
// time) and hold count, the lease left and the queued clients in order;
// the record is renewed with the lock and goes with it.
func TestInspect(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		name := lockName(t)
		holder := lockClient(t, tp, rlock.Options{ClientName: "worker-a", WatchdogTimeout: 600 * time.Millisecond, WatchdogInterval: 200 * time.Millisecond})
		watcher := lockClient(t, tp, rlock.Options{})
		m := holder.Mutex(name)

		free, err := watcher.Inspect(ctx, name)
		require.NoError(t, err)
		require.False(t, free.Held())
		require.Zero(t, free.LeaseLeft)

		before := time.Now()
		lctx, err := m.Lock(ctx)
		require.NoError(t, err)
		rctx, err := m.Lock(lctx) // re-entry
		require.NoError(t, err)
		token, err := m.Token(lctx)
		require.NoError(t, err)

		// Renewals keep the record: three of them, past the 600 ms lease.
		renewed := holder.WatchdogStats().Renewed
		awaitCond(t, 10*time.Second, "three renewals", func() bool { return holder.WatchdogStats().Renewed >= renewed+3 })

		// Two clients queue, in this order.
		waiters := []*rlock.Client{lockClient(t, tp, rlock.Options{}), lockClient(t, tp, rlock.Options{})}
		got := make(chan error, len(waiters))
		for i, w := range waiters {
			go func() {
				wctx, err := w.Mutex(name).Lock(ctx)
				if err == nil {
					err = w.Mutex(name).Unlock(wctx)
				}
				got <- err
			}()
			awaitCond(t, 10*time.Second, "a queued client", func() bool {
				info, err := watcher.Inspect(ctx, name)
				require.NoError(t, err)
				return info.WaitersTotal == i+1
			})
		}

		info, err := watcher.Inspect(ctx, name)
		require.NoError(t, err)
		host, err := os.Hostname()
		require.NoError(t, err)
		require.Len(t, info.Holders, 1)
		h := info.Holders[0]
		assert.EqualValues(t, 2, h.Count)
		assert.Equal(t, token, h.Token)
		assert.Equal(t, rlock.ClientInfo{ID: holder.ID(), Name: "worker-a", Host: host, PID: os.Getpid()}, h.Client)
		assert.True(t, strings.HasPrefix(h.Owner, holder.ID()), "owner %q of client %s", h.Owner, holder.ID())
		// The grant time is the holder's clock when it asked: in the Lock call.
		assert.WithinRange(t, h.Since, before.Truncate(time.Millisecond), time.Now())
		assert.Greater(t, info.LeaseLeft, time.Duration(0))
		assert.LessOrEqual(t, info.LeaseLeft, 600*time.Millisecond)
		require.Len(t, info.Waiters, 2)
		for i, w := range waiters {
			// Queued clients are described as holders are.
			assert.Equal(t, rlock.ClientInfo{ID: w.ID(), Host: host, PID: os.Getpid()}, info.Waiters[i].Client)
			assert.Empty(t, info.Waiters[i].Mode)
			assert.Zero(t, info.Waiters[i].Permits)
		}
		assert.False(t, info.Waiters[1].Since.Before(info.Waiters[0].Since))
		assert.Equal(t, rlock.KindMutex, info.Kind)
		assert.Equal(t, info.LeaseLeft, h.LeaseLeft)

		require.NoError(t, m.Unlock(rctx))
		require.NoError(t, m.Unlock(lctx))
		for range waiters {
			require.NoError(t, <-got)
		}
		requireNoLeftovers(t, tp, name)
	})
}

// TestInspectRecordFollowsTheLock: a local handover records its heir, and
// force-unlock and expiry take the record with the lock.
func TestInspectRecordFollowsTheLock(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		name := lockName(t)
		att := newAttempts()
		c := lockClient(t, tp, att.options(rlock.Options{ClientName: "heirs"}))
		rc := redisClient(t, tp)
		m := c.Mutex(name)

		first, err := m.Lock(ctx)
		require.NoError(t, err)
		second := make(chan context.Context, 1)
		var wg sync.WaitGroup
		blockWaiters(t, att, name, 1, &wg, func() {
			lctx, err := m.Lock(ctx)
			assert.NoError(t, err)
			second <- lctx
		})
		require.NoError(t, m.Unlock(first))
		lctx := <-second
		token, err := m.Token(lctx)
		require.NoError(t, err)
		info, err := c.Inspect(ctx, name)
		require.NoError(t, err)
		require.Len(t, info.Holders, 1)
		assert.Equal(t, token, info.Holders[0].Token, "the heir's record")
		assert.Equal(t, "heirs", info.Holders[0].Client.Name)

		ok, err := c.ForceUnlock(ctx, name)
		require.NoError(t, err)
		require.True(t, ok)
		assert.False(t, exists(t, rc, m.Key()), "force-unlock left the lock and its record")
		require.ErrorIs(t, m.Unlock(lctx), rlock.ErrNotHeld)

		lctx, err = m.Lock(ctx, rlock.WithLease(300*time.Millisecond))
		require.NoError(t, err)
		keepHeld(t, lctx) // the lease must run out, not be released
		rec, err := rc.Do(ctx, rc.B().Hget().Key(m.Key()).Field("#rec").Build()).ToString()
		require.NoError(t, err)
		require.NotEmpty(t, rec, "the record is the lock hash's field")
		requireNoLeftovers(t, tp, name) // the lease runs out: lock and record go together
	})
}

// TestList: List finds the held locks whose names match, on every Cluster
// master, sorted, with the same facts as Inspect, and not the released.
func TestList(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		c := lockClient(t, tp, rlock.Options{ClientName: "lister"})
		names, pattern := namesOnEveryMaster(t, tp, 2)
		var ms []*rlock.Mutex
		var holds []context.Context
		for i, name := range names {
			m := c.Mutex(name)
			if i == len(names)-1 {
				m = c.SpinMutex(name) // grants through the same scripts
			}
			lctx, err := m.Lock(ctx)
			require.NoError(t, err)
			ms, holds = append(ms, m), append(holds, lctx)
		}
		// Another lock, outside the pattern.
		other := lockName(t)
		octx, err := c.Mutex(other).Lock(ctx)
		require.NoError(t, err)

		found, err := c.List(ctx, pattern)
		require.NoError(t, err)
		var got []string
		for _, info := range found {
			got = append(got, info.Name)
			require.Len(t, info.Holders, 1, info.Name)
			assert.Equal(t, "lister", info.Holders[0].Client.Name)
			assert.Positive(t, info.Holders[0].Token)
		}
		assert.Equal(t, names, got)

		for i := range 3 {
			require.NoError(t, ms[i].Unlock(holds[i]))
		}
		found, err = c.List(ctx, pattern)
		require.NoError(t, err)
		got = got[:0]
		for _, info := range found {
			got = append(got, info.Name)
		}
		assert.Equal(t, names[3:], got, "released locks listed")

		_, err = c.List(ctx, "a{b")
		require.ErrorIs(t, err, rlock.ErrInvalidName)
		_, err = c.Inspect(ctx, "")
		require.ErrorIs(t, err, rlock.ErrInvalidName)
		_, err = rlock.NewClient(redisClient(t, tp), rlock.Options{ClientName: strings.Repeat("x", rlock.MaxClientNameLen+1)})
		require.ErrorIs(t, err, rlock.ErrInvalidOptions)

		for i := 3; i < len(ms); i++ {
			require.NoError(t, ms[i].Unlock(holds[i]))
		}
		require.NoError(t, c.Mutex(other).Unlock(octx))
		requireNoLeftovers(t, tp, append(names, other)...)
	})
}

// TestListFamily: List finds every kind of lock, a Mutex and an RWMutex
// of one name apart, sorted by name and then kind, each described as
// Inspect describes it; and none once all are released.
func TestListFamily(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		c := lockClient(t, tp, rlock.Options{ClientName: "family"})
		names, pattern := namesOnEveryMaster(t, tp, 1)
		require.GreaterOrEqual(t, len(names), 3)
		both, reads, sem := names[0], names[1], names[2]

		mctx, err := c.Mutex(both).Lock(ctx)
		require.NoError(t, err)
		wctx, err := c.RWMutex(both).Lock(ctx)
		require.NoError(t, err)
		r1, err := c.RWMutex(reads).RLock(ctx)
		require.NoError(t, err)
		r2, err := c.SpinRWMutex(reads).RLock(ctx) // the spin variant shares the keys
		require.NoError(t, err)
		pctx, err := c.Semaphore(sem, 5).Acquire(ctx, 3)
		require.NoError(t, err)

		found, err := c.List(ctx, pattern)
		require.NoError(t, err)
		type entry struct {
			name  string
			kind  rlock.Kind
			modes []string
		}
		var got []entry
		for _, info := range found {
			e := entry{name: info.Name, kind: info.Kind}
			for _, h := range info.Holders {
				e.modes = append(e.modes, h.Mode)
				assert.Equal(t, "family", h.Client.Name, "%s %s", info.Kind, info.Name)
				assert.Positive(t, h.LeaseLeft)
			}
			got = append(got, e)
			if info.Kind == rlock.KindSemaphore {
				assert.EqualValues(t, 5, info.Size)
				require.Len(t, info.Holders, 1)
				assert.EqualValues(t, 3, info.Holders[0].Permits)
			}
		}
		assert.Equal(t, []entry{
			{both, rlock.KindMutex, []string{""}},
			{both, rlock.KindRWMutex, []string{rlock.ModeWrite}},
			{reads, rlock.KindRWMutex, []string{rlock.ModeRead, rlock.ModeRead}},
			{sem, rlock.KindSemaphore, []string{""}},
		}, got)

		require.NoError(t, c.Mutex(both).Unlock(mctx))
		require.NoError(t, c.RWMutex(both).Unlock(wctx))
		require.NoError(t, c.RWMutex(reads).RUnlock(r1))
		require.NoError(t, c.SpinRWMutex(reads).RUnlock(r2))
		require.NoError(t, c.Semaphore(sem, 5).Release(pctx))
		found, err = c.List(ctx, pattern)
		require.NoError(t, err)
		assert.Empty(t, found)
		requireNoLeftovers(t, tp, names...)
	})
}

// TestListSkipsReplicas: on a Cluster with replicas, List scans each master
// and no replica, and finds each lock once.
func TestListSkipsReplicas(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, tp := replicatedCluster(t)
	holder := lockClient(t, tp, rlock.Options{})
	names, pattern := namesOnEveryMaster(t, tp, 1)
	var holds []context.Context
	for _, name := range names {
		lctx, err := holder.Mutex(name).Lock(ctx)
		require.NoError(t, err)
		holds = append(holds, lctx)
	}
	// CLUSTER SLOTS names a replica only once the node asked has heard that
	// it replicated something; the lister's rueidis client, which asks any
	// node, must know the replicas for the test to mean anything.
	admins := nodeClients(t, cl.NodeAddrs())
	awaitCond(t, 30*time.Second, "CLUSTER SLOTS to list the replicas on every node", func() bool {
		for _, admin := range admins {
			ranges, err := admin.Do(ctx, admin.B().ClusterSlots().Build()).ToArray()
			require.NoError(t, err)
			for _, r := range ranges {
				if f, err := r.ToArray(); err != nil || len(f) < 4 {
					return false
				}
			}
		}
		return true
	})
	rc := redisClient(t, tp)
	require.ElementsMatch(t, cl.NodeAddrs(), slices.Collect(maps.Keys(rc.Nodes())))
	lister, err := rlock.NewClient(rc, rlock.Options{})
	require.NoError(t, err)
	defer func() { require.NoError(t, lister.Close()) }()
	for _, admin := range admins {
		require.NoError(t, admin.Do(ctx, admin.B().ConfigResetstat().Build()).Error())
	}

	found, err := lister.List(ctx, pattern)
	require.NoError(t, err)
	var got []string
	for _, info := range found {
		got = append(got, info.Name)
	}
	assert.Equal(t, names, got)
	for i, master := range cl.Addrs {
		calls, err := redisinfo.Commands(ctx, nodeClient(t, master))
		require.NoError(t, err)
		assert.Positive(t, calls["scan"], "master %s was not scanned", master)
		for _, replica := range cl.ReplicaAddrs[i] {
			calls, err := redisinfo.Commands(ctx, nodeClient(t, replica))
			require.NoError(t, err)
			assert.Zero(t, calls["scan"], "replica %s was scanned", replica)
		}
	}

	for i, name := range names {
		require.NoError(t, holder.Mutex(name).Unlock(holds[i]))
	}
	requireNoLeftovers(t, tp, names...)
}

// namesOnEveryMaster returns fresh lock names, sorted, perMaster of them
// on each Cluster master (3*perMaster on standalone Redis), and a List
// pattern that matches them and no other test's.
func namesOnEveryMaster(t *testing.T, tp topology, perMaster int) ([]string, string) {
	t.Helper()
	base := lockName(t) + "-"
	masters := map[int64]string{0: ""} // standalone: one server for every slot
	want := 3 * perMaster
	if tp.cluster {
		masters = slotMasters(t, redisClient(t, tp))
		want = perMaster * len(slices.Compact(slices.Sorted(maps.Values(masters))))
	}
	on := make(map[string]int)
	var names []string
	for i := 0; len(names) < want; i++ {
		require.Less(t, i, 10000, "no names found on every master")
		name := base + strconv.Itoa(i)
		slot := int64(0)
		if tp.cluster {
			slot = int64(redistest.SlotOf(name))
		}
		if m := masters[slot]; on[m] < perMaster || !tp.cluster {
			on[m]++
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names, base + "*"
}

// TestInspectRWMutex: the write hold's record (token, client, re-entries),
// the queued readers and writers in one order with their modes and
// descriptions, the read holds' records after the handover, records kept
// by renewals, and nothing left once all is released.
func TestInspectRWMutex(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		name := lockName(t)
		fast := rlock.Options{WatchdogTimeout: 600 * time.Millisecond, WatchdogInterval: 200 * time.Millisecond}
		writerOpts, readerOpts := fast, fast
		writerOpts.ClientName, readerOpts.ClientName = "writer-a", "reader-b"
		a, b := lockClient(t, tp, writerOpts), lockClient(t, tp, readerOpts)
		cw := lockClient(t, tp, rlock.Options{ClientName: "writer-c"})
		watcher := lockClient(t, tp, rlock.Options{})
		host, err := os.Hostname()
		require.NoError(t, err)

		before := time.Now()
		wctx, err := a.RWMutex(name).Lock(ctx)
		require.NoError(t, err)
		wctx2, err := a.RWMutex(name).Lock(wctx) // re-entry
		require.NoError(t, err)
		token, err := a.RWMutex(name).Token(wctx)
		require.NoError(t, err)
		renewed := a.WatchdogStats().Renewed
		awaitCond(t, 10*time.Second, "three renewals", func() bool { return a.WatchdogStats().Renewed >= renewed+3 })

		// A reader queues, then a writer.
		readerIn, writerIn := make(chan context.Context, 1), make(chan context.Context, 1)
		go func() {
			rctx, err := b.RWMutex(name).RLock(ctx)
			assert.NoError(t, err)
			readerIn <- rctx
		}()
		awaitWaiters(t, watcher.InspectRWMutex, name, 1)
		go func() {
			lctx, err := cw.RWMutex(name).Lock(ctx)
			assert.NoError(t, err)
			writerIn <- lctx
		}()
		awaitWaiters(t, watcher.InspectRWMutex, name, 2)

		info, err := watcher.InspectRWMutex(ctx, name)
		require.NoError(t, err)
		assert.Equal(t, rlock.KindRWMutex, info.Kind)
		require.Len(t, info.Holders, 1)
		h := info.Holders[0]
		assert.Equal(t, rlock.ModeWrite, h.Mode)
		assert.EqualValues(t, 2, h.Count)
		assert.Equal(t, token, h.Token)
		assert.Equal(t, rlock.ClientInfo{ID: a.ID(), Name: "writer-a", Host: host, PID: os.Getpid()}, h.Client)
		assert.WithinRange(t, h.Since, before.Truncate(time.Millisecond), time.Now())
		assert.Greater(t, h.LeaseLeft, time.Duration(0))
		assert.LessOrEqual(t, h.LeaseLeft, 600*time.Millisecond)
		assert.Equal(t, h.LeaseLeft, info.LeaseLeft)
		require.Len(t, info.Waiters, 2)
		assert.Equal(t, 2, info.WaitersTotal)
		assert.Equal(t, rlock.ModeRead, info.Waiters[0].Mode)
		assert.Equal(t, rlock.ClientInfo{ID: b.ID(), Name: "reader-b", Host: host, PID: os.Getpid()}, info.Waiters[0].Client)
		assert.Equal(t, rlock.ModeWrite, info.Waiters[1].Mode)
		assert.Equal(t, "writer-c", info.Waiters[1].Client.Name)
		assert.False(t, info.Waiters[1].Since.Before(info.Waiters[0].Since))

		// The write release admits the reader queued before the writer.
		require.NoError(t, a.RWMutex(name).Unlock(wctx2))
		require.NoError(t, a.RWMutex(name).Unlock(wctx))
		rctx := <-readerIn
		renewed = b.WatchdogStats().Renewed
		awaitCond(t, 10*time.Second, "three renewals", func() bool { return b.WatchdogStats().Renewed >= renewed+3 })
		info, err = watcher.InspectRWMutex(ctx, name)
		require.NoError(t, err)
		require.Len(t, info.Holders, 1)
		h = info.Holders[0]
		assert.Equal(t, rlock.ModeRead, h.Mode)
		assert.EqualValues(t, 1, h.Count)
		assert.Zero(t, h.Token, "read holds have no token")
		assert.Equal(t, "reader-b", h.Client.Name)
		assert.Positive(t, h.LeaseLeft)
		require.Len(t, info.Waiters, 1)
		assert.Equal(t, rlock.ModeWrite, info.Waiters[0].Mode)

		require.NoError(t, b.RWMutex(name).RUnlock(rctx))
		lctx := <-writerIn
		info, err = watcher.InspectRWMutex(ctx, name)
		require.NoError(t, err)
		require.Len(t, info.Holders, 1)
		assert.Equal(t, "writer-c", info.Holders[0].Client.Name)
		assert.Greater(t, info.Holders[0].Token, token)
		assert.Empty(t, info.Waiters)
		require.NoError(t, cw.RWMutex(name).Unlock(lctx))

		free, err := watcher.InspectRWMutex(ctx, name)
		require.NoError(t, err)
		assert.False(t, free.Held())
		assert.Zero(t, free.LeaseLeft)
		requireNoLeftovers(t, tp, name)
	})
}

// TestInspectSemaphore: holders with their permits and records, the size,
// a queued client with the permits it wants; a lease's end takes its
// holder's record along.
func TestInspectSemaphore(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		name := lockName(t)
		a := lockClient(t, tp, rlock.Options{ClientName: "sem-a"})
		b := lockClient(t, tp, rlock.Options{ClientName: "sem-b"})
		c := lockClient(t, tp, rlock.Options{ClientName: "sem-c"})
		watcher := lockClient(t, tp, rlock.Options{})

		actx, err := a.Semaphore(name, 3).Acquire(ctx, 2)
		require.NoError(t, err)
		bctx, err := b.Semaphore(name, 3).Acquire(ctx, 1, rlock.WithLease(time.Minute))
		require.NoError(t, err)
		in := make(chan context.Context, 1)
		go func() {
			cctx, err := c.Semaphore(name, 3).Acquire(ctx, 2)
			assert.NoError(t, err)
			in <- cctx
		}()
		awaitWaiters(t, watcher.InspectSemaphore, name, 1)

		info, err := watcher.InspectSemaphore(ctx, name)
		require.NoError(t, err)
		assert.Equal(t, rlock.KindSemaphore, info.Kind)
		assert.EqualValues(t, 3, info.Size)
		require.Len(t, info.Holders, 2)
		byName := map[string]rlock.Holder{}
		for _, h := range info.Holders {
			byName[h.Client.Name] = h
			assert.EqualValues(t, 1, h.Count)
			assert.Zero(t, h.Token)
			assert.Empty(t, h.Mode)
			assert.False(t, h.Since.IsZero())
		}
		assert.EqualValues(t, 2, byName["sem-a"].Permits)
		assert.EqualValues(t, 1, byName["sem-b"].Permits)
		assert.Greater(t, byName["sem-b"].LeaseLeft, 50*time.Second, "the fixed lease")
		assert.Equal(t, byName["sem-b"].LeaseLeft, info.LeaseLeft, "the longest lease")
		require.Len(t, info.Waiters, 1)
		assert.EqualValues(t, 2, info.Waiters[0].Permits)
		assert.Equal(t, "sem-c", info.Waiters[0].Client.Name)
		assert.Equal(t, c.ID(), info.Waiters[0].Client.ID)

		require.NoError(t, a.Semaphore(name, 3).Release(actx))
		cctx := <-in
		info, err = watcher.InspectSemaphore(ctx, name)
		require.NoError(t, err)
		require.Len(t, info.Holders, 2)
		assert.Empty(t, info.Waiters)
		require.NoError(t, b.Semaphore(name, 3).Release(bctx))
		require.NoError(t, c.Semaphore(name, 3).Release(cctx))

		// A lease's end takes the holder and its record.
		pctx, err := a.Semaphore(name, 3).Acquire(ctx, 1, rlock.WithLease(300*time.Millisecond))
		require.NoError(t, err)
		keepHeld(t, pctx) // the lease must run out, not be released
		requireNoLeftovers(t, tp, name)
		free, err := watcher.InspectSemaphore(ctx, name)
		require.NoError(t, err)
		assert.False(t, free.Held())
		assert.Zero(t, free.Size)
	})
}

// awaitWaiters waits until inspect reports n clients queued for name.
func awaitWaiters(t *testing.T, inspect func(context.Context, string) (rlock.LockInfo, error), name string, n int) {
	t.Helper()
	awaitCond(t, 10*time.Second, strconv.Itoa(n)+" queued clients", func() bool {
		info, err := inspect(context.Background(), name)
		require.NoError(t, err)
		return info.WaitersTotal == n
	})
}

// TestListDamaged: a lock whose state is not latchkey's (a hold count that
// is not an integer, a holder record of another shape, a key of another
// type where its wait queue belongs, a Semaphore holder's foreign record) is
// listed with Damaged saying what, and what could be read; every healthy
// lock is listed as usual (issue 21, defect 7: List failed with the first
// parse error). Inspect describes a damaged lock the same way.
func TestListDamaged(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		c := lockClient(t, tp, rlock.Options{ClientName: "healthy"})
		rc := redisClient(t, tp)
		run := func(args ...string) {
			require.NoError(t, rc.Do(ctx, rc.B().Arbitrary(args[0]).Keys(args[1]).Args(args[2:]...).Build()).Error(), "%q", args)
		}
		names, pattern := namesOnEveryMaster(t, tp, 2)
		healthy, count, record, wrongType, sem := names[0], names[1], names[2], names[3], names[4]
		key := func(name string) string { return rlock.DefaultPrefix + ":{" + name + "}" }

		hctx := mustLock(t, ctx, c.Mutex(healthy))
		run("HSET", key(count), "someone", "one")
		run("PEXPIRE", key(count), "60000")
		rctx := mustLock(t, ctx, c.Mutex(record))
		run("HSET", key(record), "#rec", "not a record")
		wctx := mustLock(t, ctx, c.Mutex(wrongType))
		run("SET", key(wrongType)+":q", "x", "PX", "60000")
		pctx, err := c.Semaphore(sem, 2).Acquire(ctx, 1)
		require.NoError(t, err)
		recs, err := rc.Do(ctx, rc.B().Hgetall().Key(key(sem)+":sem:h:rec").Build()).AsStrMap()
		require.NoError(t, err)
		require.Len(t, recs, 1)
		for owner := range recs {
			run("HSET", key(sem)+":sem:h:rec", owner, "junk")
		}

		found, err := c.List(ctx, pattern)
		require.NoError(t, err, "one damaged lock failed the whole List")
		byName := make(map[string]rlock.LockInfo)
		for _, info := range found {
			byName[info.Name] = info
		}
		require.Len(t, found, 5, "%+v", found)
		assert.Empty(t, byName[healthy].Damaged)
		require.Len(t, byName[healthy].Holders, 1)
		assert.Equal(t, "healthy", byName[healthy].Holders[0].Client.Name)
		assert.Contains(t, byName[count].Damaged, "not an integer")
		require.Len(t, byName[count].Holders, 1)
		assert.Equal(t, "someone", byName[count].Holders[0].Owner)
		assert.Contains(t, byName[record].Damaged, "not a record")
		require.Len(t, byName[record].Holders, 1)
		assert.EqualValues(t, 1, byName[record].Holders[0].Count, "the count was read")
		assert.Contains(t, byName[wrongType].Damaged, "WRONGTYPE")
		assert.Equal(t, rlock.KindSemaphore, byName[sem].Kind)
		assert.Contains(t, byName[sem].Damaged, "junk")
		require.Len(t, byName[sem].Holders, 1)
		assert.EqualValues(t, 1, byName[sem].Holders[0].Permits)
		info, err := c.Inspect(ctx, count)
		require.NoError(t, err)
		assert.Equal(t, byName[count].Damaged, info.Damaged)

		require.NoError(t, c.Mutex(healthy).Unlock(hctx))
		require.NoError(t, c.Mutex(record).Unlock(rctx))
		run("DEL", key(wrongType)+":q") // the release reads the queue
		require.NoError(t, c.Mutex(wrongType).Unlock(wctx))
		require.NoError(t, c.Semaphore(sem, 2).Release(pctx))
		run("DEL", key(count))
		requireNoLeftovers(t, tp, names...)
	})
}

// TestForceUnlockClearsWindows: a free Mutex kept for a client a release
// woke and that never came (a wake window can be long) is cleared by
// ForceUnlock, which drops that client and wakes the next waiter as a
// release would (issue 21, defect 10: the reservation, as the window was
// then, was left, and the waiter waited for it to run out).
func TestForceUnlockClearsWindows(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		name := lockName(t)
		a, b := lockClient(t, tp, rlock.Options{}), lockClient(t, tp, rlock.Options{})
		rc := redisClient(t, tp)
		// Woken, with a minute's window: its score is minus the window's
		// end, server ms (queue.lua).
		queueWoken(t, rc, a.Mutex(name).Key()+":q", "gone-client", time.Minute)
		got := make(chan error, 1)
		go func() {
			lctx, err := b.Mutex(name).Lock(ctx)
			if err == nil {
				err = b.Mutex(name).Unlock(lctx)
			}
			got <- err
		}()
		awaitWaiters(t, a.Inspect, name, 2)
		ok, err := a.ForceUnlock(ctx, name)
		require.NoError(t, err)
		require.True(t, ok, "the window was not cleared")
		require.NoError(t, recvErr(t, got, 10*time.Second, "the waiter behind the window"))
		requireNoLeftovers(t, tp, name)
	})
}

// TestForceUnlockRefusesForeignKeys: where a lock's key holds another
// type (an application's key under the same prefix), force-unlock of any
// kind returns ErrWrongType and deletes nothing (issue 21, defect 10: the
// Mutex's deleted whatever was at the key).
func TestForceUnlockRefusesForeignKeys(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		name := lockName(t)
		c := lockClient(t, tp, rlock.Options{})
		rc := redisClient(t, tp)
		key := c.Mutex(name).Key()
		for _, k := range []string{key, key + ":rw:rd", key + ":sem:q"} {
			require.NoError(t, rc.Do(ctx, rc.B().Set().Key(k).Value("the application's").Build()).Error())
		}
		for kind, force := range map[string]func(context.Context, string) (bool, error){
			"mutex": c.ForceUnlock, "rwmutex": c.ForceUnlockRWMutex, "semaphore": c.ForceUnlockSemaphore,
		} {
			ok, err := force(ctx, name)
			require.ErrorIs(t, err, rlock.ErrWrongType, kind)
			assert.False(t, ok, kind)
		}
		for _, k := range []string{key, key + ":rw:rd", key + ":sem:q"} {
			assert.True(t, exists(t, rc, k), "%s was deleted", k)
		}
		require.NoError(t, rc.Do(ctx, rc.B().Del().Key(key).Build()).Error())
		require.NoError(t, rc.Do(ctx, rc.B().Del().Key(key+":rw:rd").Build()).Error())
		require.NoError(t, rc.Do(ctx, rc.B().Del().Key(key+":sem:q").Build()).Error())
	})
}

// TestForceUnlockFamily: ForceUnlockRWMutex and ForceUnlockSemaphore take
// every hold, whose holders find them lost, and wake the waiters as a
// release would (issue 21, defect 10: force-unlock covered the Mutex only).
func TestForceUnlockFamily(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		name := lockName(t)
		a := lockClient(t, tp, rlock.Options{WatchdogTimeout: 600 * time.Millisecond, WatchdogInterval: 200 * time.Millisecond})
		b := lockClient(t, tp, rlock.Options{})

		wctx, err := a.RWMutex(name).Lock(ctx)
		require.NoError(t, err)
		rctx, err := a.RWMutex(name).RLock(wctx) // the writer reads too
		require.NoError(t, err)
		readerIn := make(chan error, 1)
		go func() {
			lctx, err := b.RWMutex(name).RLock(ctx)
			if err == nil {
				err = b.RWMutex(name).RUnlock(lctx)
			}
			readerIn <- err
		}()
		awaitWaiters(t, a.InspectRWMutex, name, 1)
		ok, err := a.ForceUnlockRWMutex(ctx, name)
		require.NoError(t, err)
		require.True(t, ok)
		require.NoError(t, recvErr(t, readerIn, 10*time.Second, "the queued reader"))
		requireLost(t, wctx, 10*time.Second, "the forced writer")
		requireLost(t, rctx, 10*time.Second, "the forced reader")

		pctx, err := a.Semaphore(name, 2).Acquire(ctx, 2)
		require.NoError(t, err)
		permitted := make(chan error, 1)
		go func() {
			lctx, err := b.Semaphore(name, 2).Acquire(ctx, 1)
			if err == nil {
				err = b.Semaphore(name, 2).Release(lctx)
			}
			permitted <- err
		}()
		awaitWaiters(t, a.InspectSemaphore, name, 1)
		ok, err = a.ForceUnlockSemaphore(ctx, name)
		require.NoError(t, err)
		require.True(t, ok)
		require.NoError(t, recvErr(t, permitted, 10*time.Second, "the queued semaphore client"))
		requireLost(t, pctx, 10*time.Second, "the forced permits")
		ok, err = a.ForceUnlockSemaphore(ctx, name)
		require.NoError(t, err)
		require.False(t, ok, "nothing left to delete")
		requireNoLeftovers(t, tp, name)
	})
}
