package watchdog_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/internal/luascripts"
	"github.com/latchkey/latchkey/internal/redistest"
	"github.com/latchkey/latchkey/watchdog"
)

var (
	standaloneAddr string
	clusterAddrs   []string

	// runID and seq make every key name unique, across tests and across
	// -count repetitions against the same server.
	runID = time.Now().UnixNano()
	seq   atomic.Int64
)

// Small timings keep the tests short; every assertion about time uses a
// bound far wider than the timings themselves.
const (
	timeout  = 600 * time.Millisecond
	interval = 200 * time.Millisecond
	// waitFor bounds waits for server-side state and for ticks; it only
	// matters when a test is failing.
	waitFor = 10 * time.Second
)

// TestMain gets real servers from the harness; RunTests checks for leaked
// goroutines with goleak once they are closed.
func TestMain(m *testing.M) {
	os.Exit(redistest.RunTests(m, "watchdog", true, func(e redistest.Env) {
		standaloneAddr, clusterAddrs = e.Standalone.Addr, e.Cluster.Addrs
	}, nil))
}

// ---- helpers ----

func newClient(t *testing.T, opt rueidis.ClientOption) rueidis.Client {
	t.Helper()
	opt.DisableCache = true
	c, err := rueidis.NewClient(opt)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

func standaloneClient(t *testing.T) rueidis.Client {
	t.Helper()
	c := newClient(t, rueidis.ClientOption{InitAddress: []string{standaloneAddr}})
	require.Equal(t, rueidis.ClientModeStandalone, c.Mode())
	return c
}

func clusterClient(t *testing.T) rueidis.Client {
	t.Helper()
	c := newClient(t, rueidis.ClientOption{InitAddress: clusterAddrs})
	require.Equal(t, rueidis.ClientModeCluster, c.Mode())
	return c
}

func newWatchdog(t *testing.T, c rueidis.Client, opts watchdog.Options) *watchdog.Watchdog {
	t.Helper()
	w, err := watchdog.New(c, opts)
	require.NoError(t, err)
	// Registered after the client's Close, so it runs before it.
	t.Cleanup(w.Close)
	return w
}

// acquireArgv is the acquire script's ARGV for a new owner of key.
func acquireArgv(key, owner string, lease time.Duration) []string {
	return luascripts.NewKeys(key).AcquireArgv(luascripts.AcquireArgs{Owner: owner, Lease: lease, Client: "client"})
}

func uniqueKey(t *testing.T) string {
	return fmt.Sprintf("latchkey:{%s-%d-%d}", t.Name(), runID, seq.Add(1))
}

// lock takes a fresh lock for owner with the given lease, through the
// acquire script, and returns its key and the time the request was sent.
func lock(t *testing.T, c rueidis.Client, owner string, lease time.Duration) (string, time.Time) {
	t.Helper()
	key := uniqueKey(t)
	sent := time.Now()
	v, err := luascripts.Acquire.Exec(t.Context(), c, luascripts.NewKeys(key).AcquireKeys(), acquireArgv(key, owner, lease)).AsIntSlice()
	require.NoError(t, err)
	require.Equal(t, []int64{1, 1}, v)
	return key, sent
}

func exists(t *testing.T, c rueidis.Client, key string) bool {
	t.Helper()
	n, err := c.Do(t.Context(), c.B().Exists().Key(key).Build()).AsInt64()
	require.NoError(t, err)
	return n == 1
}

func pttl(t *testing.T, c rueidis.Client, key string) time.Duration {
	t.Helper()
	n, err := c.Do(t.Context(), c.B().Pttl().Key(key).Build()).AsInt64()
	require.NoError(t, err)
	return time.Duration(n) * time.Millisecond
}

func del(t *testing.T, c rueidis.Client, key string) {
	t.Helper()
	n, err := c.Do(t.Context(), c.B().Del().Key(key).Build()).AsInt64()
	require.NoError(t, err)
	require.Equal(t, int64(1), n)
}

// requireAllAlive asserts every key exists with a positive TTL, in one
// pipeline (one command per key, so it works across Cluster slots).
func requireAllAlive(t *testing.T, c rueidis.Client, keys []string) {
	t.Helper()
	cmds := make(rueidis.Commands, 0, len(keys))
	for _, k := range keys {
		cmds = append(cmds, c.B().Pttl().Key(k).Build())
	}
	for i, r := range c.DoMulti(t.Context(), cmds...) {
		n, err := r.AsInt64()
		require.NoError(t, err)
		require.Greater(t, n, int64(0), "%s: PTTL %d (-2 means gone)", keys[i], n)
	}
}

// keepCheckingAlive samples keys until d has passed, failing at the first
// sample that finds one gone. Sampling over a span is the claim itself
// ("alive throughout"), not a wait for an event.
func keepCheckingAlive(t *testing.T, c rueidis.Client, keys []string, d time.Duration) {
	t.Helper()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for end := time.Now().Add(d); time.Now().Before(end); <-tick.C {
		requireAllAlive(t, c, keys)
	}
	requireAllAlive(t, c, keys)
}

// lostLog records onLost calls without ever blocking the watchdog goroutine.
type lostLog struct {
	calls  atomic.Int32
	causes chan error
}

func newLostLog() *lostLog { return &lostLog{causes: make(chan error, 16)} }

func (l *lostLog) onLost(cause error) {
	l.calls.Add(1)
	select {
	case l.causes <- cause:
	default:
	}
}

// await returns the first cause, failing if none arrives within d.
func (l *lostLog) await(t *testing.T, d time.Duration) (error, time.Time) {
	t.Helper()
	select {
	case cause := <-l.causes:
		return cause, time.Now()
	case <-time.After(d):
		t.Fatalf("onLost not called within %v", d)
		return nil, time.Time{}
	}
}

// awaitTicks waits until the watchdog has completed n more renewal ticks.
func awaitTicks(t *testing.T, w *watchdog.Watchdog, n uint64) {
	t.Helper()
	start := w.Stats().Ticks
	require.Eventually(t, func() bool { return w.Stats().Ticks >= start+n },
		waitFor, 10*time.Millisecond, "%d more ticks", n)
}

// ---- options ----

func TestOptionsValidation(t *testing.T) {
	c := standaloneClient(t)
	for _, tc := range []struct {
		name string
		opts watchdog.Options
	}{
		{"IntervalEqualsTimeout", watchdog.Options{Timeout: time.Second, Interval: time.Second}},
		// 1s less its 30ms margin leaves 970ms for a renewal to succeed in.
		{"IntervalInsideDriftMargin", watchdog.Options{Timeout: time.Second, Interval: 970 * time.Millisecond}},
		{"IntervalAboveTimeout", watchdog.Options{Timeout: time.Second, Interval: 2 * time.Second}},
		{"IntervalAboveDefaultTimeout", watchdog.Options{Interval: 40 * time.Second}},
		{"NegativeTimeout", watchdog.Options{Timeout: -time.Second}},
		{"NegativeInterval", watchdog.Options{Interval: -time.Second}},
		{"NegativeIntervalWithTimeout", watchdog.Options{Timeout: time.Second, Interval: -time.Millisecond}},
		{"TimeoutUnderOneMillisecond", watchdog.Options{Timeout: 500 * time.Microsecond}},
		{"NegativeBatchSize", watchdog.Options{BatchSize: -1}},
		// A 1ns interval spun without renewing anything (issue 21, defect 11).
		{"IntervalBelowMinimum", watchdog.Options{Interval: time.Nanosecond}},
		{"BatchSizeAboveMaximum", watchdog.Options{BatchSize: watchdog.MaxBatchSize + 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := watchdog.New(c, tc.opts)
			require.ErrorIs(t, err, watchdog.ErrInvalidOptions)
			assert.Nil(t, w)
		})
	}
	t.Run("NilClient", func(t *testing.T) {
		w, err := watchdog.New(nil, watchdog.Options{})
		require.ErrorIs(t, err, watchdog.ErrInvalidOptions)
		assert.Nil(t, w)
	})
}

func TestOptionsDefaults(t *testing.T) {
	c := standaloneClient(t)
	for _, tc := range []struct {
		name string
		in   watchdog.Options
		want watchdog.Options
	}{
		{"Zero", watchdog.Options{}, watchdog.Options{Timeout: 30 * time.Second, Interval: 10 * time.Second, BatchSize: 100}},
		{"TimeoutOnly", watchdog.Options{Timeout: 3 * time.Second}, watchdog.Options{Timeout: 3 * time.Second, Interval: time.Second, BatchSize: 100}},
		{"Explicit", watchdog.Options{Timeout: timeout, Interval: interval, BatchSize: 7}, watchdog.Options{Timeout: timeout, Interval: interval, BatchSize: 7}},
		{"IntervalJustBeforeDriftMargin", watchdog.Options{Timeout: time.Second, Interval: 969 * time.Millisecond}, watchdog.Options{Timeout: time.Second, Interval: 969 * time.Millisecond, BatchSize: 100}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWatchdog(t, c, tc.in)
			assert.Equal(t, tc.want, w.Options())
		})
	}
	assert.Equal(t, 30*time.Second, watchdog.DefaultTimeout)
	assert.Equal(t, 100, watchdog.DefaultBatchSize)
}

func TestDriftMargin(t *testing.T) {
	for _, tc := range []struct {
		lease, want time.Duration
	}{
		{30 * time.Second, 320 * time.Millisecond},
		{time.Second, 30 * time.Millisecond},
		{100 * time.Millisecond, 21 * time.Millisecond},
		{80 * time.Millisecond, 20 * time.Millisecond}, // capped at a quarter
		{time.Millisecond, 250 * time.Microsecond},
	} {
		assert.Equal(t, tc.want, watchdog.DriftMargin(tc.lease), "lease %v", tc.lease)
	}
}

// ---- entries ----

func TestEntryDeadlineStartsAtSentAt(t *testing.T) {
	c := standaloneClient(t)
	// No tick happens during this test.
	w := newWatchdog(t, c, watchdog.Options{Timeout: time.Hour, Interval: 30 * time.Minute})
	sent := time.Now().Add(-time.Minute)
	e := w.Add(uniqueKey(t), "A", sent, nil)
	// An hour's margin is 1% (36s) plus the 20ms timer slack.
	assert.Equal(t, sent.Add(time.Hour-36*time.Second-20*time.Millisecond), e.Deadline())
	assert.Equal(t, 1, w.Len())
	e.Stop()
	assert.Equal(t, 0, w.Len())
}

// TestRenewalDeadline: a renewal moves the local deadline to its send time
// plus Timeout less the drift margin, so the holder gives up that margin
// before the server (which started the lease no earlier) lets it lapse.
func TestRenewalDeadline(t *testing.T) {
	c := standaloneClient(t)
	w := newWatchdog(t, c, watchdog.Options{Timeout: timeout, Interval: interval})
	const owner = "owner-margin"
	key, sent := lock(t, c, owner, timeout)
	e := w.Add(key, owner, sent, nil)
	defer e.Stop()
	validity := timeout - watchdog.DriftMargin(timeout)
	d0 := e.Deadline()
	require.Equal(t, sent.Add(validity), d0)
	require.Eventually(t, func() bool { return w.Stats().Renewed >= 1 }, waitFor, time.Millisecond, "a renewal")
	// The renewal was sent after sent and before now.
	d1 := e.Deadline()
	assert.True(t, d1.After(d0), "the renewal moved the deadline")
	assert.False(t, d1.After(time.Now().Add(validity)), "deadline %v past the validity %v of a renewal sent by now", time.Until(d1), validity)
}

func TestKeepsAlive(t *testing.T) {
	c := standaloneClient(t)
	w := newWatchdog(t, c, watchdog.Options{Timeout: timeout, Interval: interval})
	const owner = "owner-keepalive"
	key, sent := lock(t, c, owner, timeout)
	lost := newLostLog()
	e := w.Add(key, owner, sent, lost.onLost)
	require.Equal(t, 1, w.Len())
	d0 := e.Deadline()

	// Without renewals the key would be gone after one Timeout.
	keepCheckingAlive(t, c, []string{key}, 4*timeout)
	assert.True(t, e.Deadline().After(d0), "renewals moved the local deadline")
	st := w.Stats()
	assert.GreaterOrEqual(t, st.Renewed, uint64(3), "surviving 4×Timeout takes several renewals")
	assert.Zero(t, st.Lost)
	assert.Zero(t, st.Errors)

	e.Stop()
	assert.Equal(t, 0, w.Len())
	require.Eventually(t, func() bool { return !exists(t, c, key) }, waitFor, 20*time.Millisecond,
		"the lease runs out once renewals stop")
	assert.Zero(t, lost.calls.Load(), "onLost after Stop")
	assert.Zero(t, w.Stats().Lost)
}

func TestGone(t *testing.T) {
	c := standaloneClient(t)
	w := newWatchdog(t, c, watchdog.Options{Timeout: timeout, Interval: interval})
	// The control lease keeps ticks coming after the others are lost.
	control, sent := lock(t, c, "owner-control", timeout)
	ctrl := w.Add(control, "owner-control", sent, newLostLog().onLost)
	deleted, sent := lock(t, c, "owner-A", timeout)
	deletedLost := newLostLog()
	w.Add(deleted, "owner-A", sent, deletedLost.onLost)
	taken, sent := lock(t, c, "owner-A", timeout)
	takenLost := newLostLog()
	w.Add(taken, "owner-A", sent, takenLost.onLost)
	require.Equal(t, 3, w.Len())
	awaitTicks(t, w, 1)

	// One deleted outright, one deleted and then taken by someone else.
	del(t, c, deleted)
	del(t, c, taken)
	v, err := luascripts.Acquire.Exec(t.Context(), c, luascripts.NewKeys(taken).AcquireKeys(), acquireArgv(taken, "owner-B", time.Hour)).AsIntSlice()
	require.NoError(t, err)
	require.Equal(t, []int64{1, 2}, v, "a second grant: token 2")

	// Found at the next tick; the slack is for slow CI machines.
	bound := 3*interval + time.Second
	for name, l := range map[string]*lostLog{deleted: deletedLost, taken: takenLost} {
		cause, _ := l.await(t, bound)
		assert.ErrorIs(t, cause, watchdog.ErrGone, name)
		assert.NotErrorIs(t, cause, watchdog.ErrExpired, name)
		assert.Contains(t, cause.Error(), name)
	}
	assert.Equal(t, 1, w.Len(), "only the control lease is left")

	// More ticks call nothing again.
	awaitTicks(t, w, 3)
	assert.Equal(t, int32(1), deletedLost.calls.Load())
	assert.Equal(t, int32(1), takenLost.calls.Load())
	assert.Equal(t, uint64(2), w.Stats().Lost)
	assert.False(t, exists(t, c, deleted), "a lost lease is not recreated")
	assert.Greater(t, pttl(t, c, taken), 30*time.Minute, "the new holder's lease is untouched")
	requireAllAlive(t, c, []string{control})

	ctrl.Stop()
	assert.Equal(t, 0, w.Len())
}

func TestExpired(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	srv, err := redistest.StartProcess(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, srv.Close()) })
	// A short ConnWriteTimeout so a silent server is noticed quickly.
	c := newClient(t, rueidis.ClientOption{
		InitAddress:      []string{srv.Addr},
		ConnWriteTimeout: 300 * time.Millisecond,
		Dialer:           net.Dialer{Timeout: 300 * time.Millisecond},
	})
	pid, err := redistest.ProcessID(t.Context(), c)
	require.NoError(t, err)
	w := newWatchdog(t, c, watchdog.Options{Timeout: timeout, Interval: interval})
	// Runs first: a stopped server would stall everything after it.
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })

	const owner = "owner-expired"
	key, sent := lock(t, c, owner, timeout)
	lost := newLostLog()
	e := w.Add(key, owner, sent, lost.onLost)
	require.Eventually(t, func() bool { return w.Stats().Renewed >= 2 }, waitFor, 10*time.Millisecond, "renewals before the pause")

	deadlineBefore := e.Deadline()
	pauseStart := time.Now()
	require.NoError(t, syscall.Kill(pid, syscall.SIGSTOP))

	cause, at := lost.await(t, timeout+2*interval+time.Second)
	assert.ErrorIs(t, cause, watchdog.ErrExpired)
	assert.NotErrorIs(t, cause, watchdog.ErrGone)
	assert.Contains(t, cause.Error(), key)
	// Never given up before Timeout after the last successful renewal was
	// sent: that deadline is at least the one in force when the pause began.
	assert.False(t, at.Before(deadlineBefore), "lost at %v, before the deadline %v", at, deadlineBefore)
	assert.False(t, at.Before(e.Deadline()), "lost at %v, before the final deadline %v", at, e.Deadline())
	t.Logf("ErrExpired %v after the pause (Timeout %v, Interval %v)", at.Sub(pauseStart), timeout, interval)
	assert.Equal(t, 0, w.Len())
	assert.Equal(t, uint64(1), w.Stats().Lost)

	// Once the server runs again, the lease has lapsed there too.
	require.NoError(t, syscall.Kill(pid, syscall.SIGCONT))
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		n, err := c.Do(ctx, c.B().Exists().Key(key).Build()).AsInt64()
		return err == nil && n == 0
	}, waitFor, 50*time.Millisecond, "lease lapsed on the server")
	assert.Equal(t, int32(1), lost.calls.Load())
}

func TestBatching(t *testing.T) {
	c := standaloneClient(t)
	// A longer Timeout so setting up 250 locks cannot outlast a lease.
	w := newWatchdog(t, c, watchdog.Options{Timeout: 5 * time.Second, Interval: 300 * time.Millisecond, BatchSize: 100})
	const n = 250
	keys := make([]string, n)
	calls := make([]luascripts.Call, n)
	for i := range keys {
		keys[i] = uniqueKey(t)
		calls[i] = luascripts.Call{Keys: luascripts.NewKeys(keys[i]).AcquireKeys(), Args: acquireArgv(keys[i], "owner-batch", 5*time.Second)}
	}
	sent := time.Now()
	for i, r := range luascripts.Acquire.ExecMulti(t.Context(), c, calls) {
		v, err := r.AsIntSlice()
		require.NoError(t, err)
		require.Equal(t, []int64{1, 1}, v, keys[i])
	}
	lost := newLostLog()
	for _, k := range keys {
		w.Add(k, "owner-batch", sent, lost.onLost)
	}
	require.Equal(t, n, w.Len())

	// Two ticks after the last Add has been seen, every tick in flight
	// started with all 250 entries registered.
	awaitTicks(t, w, 2)
	s0 := w.Stats()
	awaitTicks(t, w, 2)
	s1 := w.Stats()
	ticks := s1.Ticks - s0.Ticks
	require.GreaterOrEqual(t, ticks, uint64(2))
	assert.Equal(t, 3*ticks, s1.Calls-s0.Calls, "250 keys in batches of 100 make 3 calls a tick")
	assert.Equal(t, n*ticks, s1.Renewed-s0.Renewed, "every lease renewed at every tick")
	assert.Zero(t, s1.Errors)
	assert.Zero(t, s1.Lost)
	assert.Zero(t, lost.calls.Load())
	requireAllAlive(t, c, keys)
}

func TestStop(t *testing.T) {
	c := standaloneClient(t)
	w := newWatchdog(t, c, watchdog.Options{Timeout: timeout, Interval: interval})
	control, sent := lock(t, c, "owner-control", timeout)
	w.Add(control, "owner-control", sent, newLostLog().onLost)
	key, sent := lock(t, c, "owner-stop", timeout)
	lost := newLostLog()
	e := w.Add(key, "owner-stop", sent, lost.onLost)
	awaitTicks(t, w, 1)

	e.Stop()
	assert.Equal(t, 1, w.Len())
	e.Stop() // idempotent
	assert.Equal(t, 1, w.Len())

	del(t, c, key)
	awaitTicks(t, w, 3) // ticks keep coming thanks to the control lease
	assert.Zero(t, lost.calls.Load(), "onLost after Stop")
	assert.Zero(t, w.Stats().Lost)
	assert.False(t, exists(t, c, key), "a stopped lease is not renewed")
	requireAllAlive(t, c, []string{control})
}

func TestClose(t *testing.T) {
	c := standaloneClient(t)
	w, err := watchdog.New(c, watchdog.Options{Timeout: timeout, Interval: interval})
	require.NoError(t, err)
	t.Cleanup(w.Close) // only matters if the test fails before closing it
	key, sent := lock(t, c, "owner-close", timeout)
	lost := newLostLog()
	e := w.Add(key, "owner-close", sent, lost.onLost)
	require.Eventually(t, func() bool { return w.Stats().Renewed >= 1 }, waitFor, 10*time.Millisecond)

	for i := range 2 { // the second Close returns too
		closed := make(chan struct{})
		go func() {
			w.Close()
			close(closed)
		}()
		select {
		case <-closed:
		case <-time.After(waitFor):
			t.Fatalf("Close #%d did not return within %v", i+1, waitFor)
		}
	}

	// Still registered, no longer renewed: the lease runs out and nobody is told.
	assert.Equal(t, 1, w.Len())
	require.Eventually(t, func() bool { return !exists(t, c, key) }, waitFor, 20*time.Millisecond)
	assert.Zero(t, lost.calls.Load(), "onLost after Close")
	assert.Zero(t, w.Stats().Lost)
	e.Stop() // still safe after Close
	assert.Equal(t, 0, w.Len())
}

// ---- Cluster ----

func TestClusterKeepsAlive(t *testing.T) {
	c := clusterClient(t)
	w := newWatchdog(t, c, watchdog.Options{Timeout: timeout, Interval: interval})
	const n = 50
	keys := make([]string, n)
	lost := newLostLog()
	slots := map[int64]bool{}
	for i := range keys {
		var sent time.Time
		keys[i], sent = lock(t, c, "owner-cluster", timeout)
		w.Add(keys[i], "owner-cluster", sent, lost.onLost)
		slot, err := c.Do(t.Context(), c.B().ClusterKeyslot().Key(keys[i]).Build()).AsInt64()
		require.NoError(t, err)
		slots[slot] = true
	}
	require.Equal(t, n, w.Len())

	keepCheckingAlive(t, c, keys, 4*timeout)
	assert.Zero(t, lost.calls.Load())
	assert.Zero(t, w.Stats().Errors)

	// One call per slot each tick (no slot shares 100 keys).
	awaitTicks(t, w, 2)
	s0 := w.Stats()
	awaitTicks(t, w, 2)
	s1 := w.Stats()
	ticks := s1.Ticks - s0.Ticks
	assert.Equal(t, uint64(len(slots))*ticks, s1.Calls-s0.Calls)
	assert.Equal(t, n*ticks, s1.Renewed-s0.Renewed)
	assert.Zero(t, s1.Lost)
}

// TestLateEntryExpiresByItsDeadline: an entry whose deadline comes before
// the next tick (an acquire whose reply arrived late) is given up at that
// deadline, not at the next tick: Add wakes the loop to watch it. Before,
// the loop slept until the tick, so the holder kept a context that was
// live past the server's expiry.
func TestLateEntryExpiresByItsDeadline(t *testing.T) {
	c := standaloneClient(t)
	const timeout = 20 * time.Second
	w := newWatchdog(t, c, watchdog.Options{Timeout: timeout, Interval: 10 * time.Second})
	key, _ := lock(t, c, "owner-late", timeout)
	// Sent so long ago that only 200ms of validity are left.
	sent := time.Now().Add(-(timeout - watchdog.DriftMargin(timeout) - 200*time.Millisecond))
	lost := newLostLog()
	e := w.Add(key, "owner-late", sent, lost.onLost)
	cause, at := lost.await(t, 5*time.Second) // the first tick is 10s away
	require.ErrorIs(t, cause, watchdog.ErrExpired)
	require.False(t, at.Before(e.Deadline()), "given up before its deadline")
	del(t, c, key)
}

// TestLateEntryAmongOthersExpiresByItsDeadline: a late entry added while the
// loop already watches a later deadline still wakes it, and is given up at
// its own deadline.
func TestLateEntryAmongOthersExpiresByItsDeadline(t *testing.T) {
	c := standaloneClient(t)
	const timeout = 20 * time.Second
	w := newWatchdog(t, c, watchdog.Options{Timeout: timeout, Interval: 10 * time.Second})
	// No tick comes before the test ends, so the keys need not exist.
	onTime := newLostLog()
	w.Add(uniqueKey(t), "owner-on-time", time.Now(), onTime.onLost)
	sent := time.Now().Add(-(timeout - watchdog.DriftMargin(timeout) - 200*time.Millisecond))
	late := newLostLog()
	e := w.Add(uniqueKey(t), "owner-late", sent, late.onLost)
	cause, at := late.await(t, 5*time.Second) // the first tick is 10s away
	require.ErrorIs(t, cause, watchdog.ErrExpired)
	require.False(t, at.Before(e.Deadline()), "given up before its deadline")
	assert.Zero(t, onTime.calls.Load(), "the entry on time was given up")
	assert.Equal(t, 1, w.Len())
}

// TestAddWakesOnlyForAnEarlierDeadline: Add wakes the loop only for an entry
// due before the deadline its expiry timer is set for. When every Add woke
// it, the loop scanned all entries once per Add, so taking n locks cost
// O(n²): lockbench's watchdog scale spent 26s taking 100 000 locks, three
// quarters of its CPU in that scan.
func TestAddWakesOnlyForAnEarlierDeadline(t *testing.T) {
	c := standaloneClient(t)
	w, err := watchdog.NewStill(c, watchdog.Options{Timeout: timeout, Interval: interval})
	require.NoError(t, err)
	t.Cleanup(w.Close)
	now := time.Now()
	first := w.Add(uniqueKey(t), "A", now, nil)
	require.True(t, w.TakeWake(), "with nothing watched, Add wakes the loop")
	require.Equal(t, first.Deadline(), w.Scan(now))

	for i := range 100 {
		w.Add(uniqueKey(t), "A", now.Add(time.Duration(i)*time.Millisecond), nil)
	}
	assert.False(t, w.TakeWake(), "entries due no earlier than the watched deadline woke the loop")

	early := w.Add(uniqueKey(t), "A", now.Add(-time.Millisecond), nil)
	assert.True(t, w.TakeWake(), "an entry due earlier did not wake the loop")
	assert.Equal(t, early.Deadline(), w.Scan(now))

	// Once a scan finds nothing left, the next Add wakes the loop again.
	assert.True(t, w.Scan(early.Deadline().Add(time.Hour)).IsZero(), "every entry given up")
	assert.Zero(t, w.Len())
	w.Add(uniqueKey(t), "A", time.Now(), nil)
	assert.True(t, w.TakeWake(), "with nothing watched, Add wakes the loop")
}

// TestDue: a tick leaves a lease renewed less than half an interval before
// to the next tick, so that a server slower than the interval renews each
// lease about once per pass over all of them instead of queueing renewals
// of leases renewed a moment before (issue 21, item 12); but only while
// the next tick still comes well before the lease's deadline.
func TestDue(t *testing.T) {
	c := standaloneClient(t)
	for _, tc := range []struct {
		name              string
		timeout, interval time.Duration
		age               time.Duration // since the last renewal was sent
		due               bool
	}{
		{"defaults, just renewed", 30 * time.Second, 0, time.Second, false},
		{"defaults, renewed by the previous tick", 30 * time.Second, 0, 9 * time.Second, true},
		{"defaults, half an interval", 30 * time.Second, 0, 5*time.Second + time.Millisecond, true},
		{"defaults, overdue", 30 * time.Second, 0, 25 * time.Second, true},
		{"long interval, just renewed", time.Second, 900 * time.Millisecond, 100 * time.Millisecond, true},
		{"interval timeout/4, just renewed", 4 * time.Second, time.Second, 100 * time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := watchdog.NewStill(c, watchdog.Options{Timeout: tc.timeout, Interval: tc.interval})
			require.NoError(t, err)
			defer w.Close()
			now := time.Now()
			e := w.Add("wd:due", "owner-due", now.Add(-tc.age), nil)
			defer e.Stop()
			assert.Equal(t, tc.due, w.Due(e, now))
		})
	}
}

// TestHolderRecordLivesWithTheLock: a Mutex's holder record is a field of
// the lock hash, so the watchdog keeps it by renewing the one key, and it
// goes with the lock once renewals stop.
func TestHolderRecordLivesWithTheLock(t *testing.T) {
	c := standaloneClient(t)
	const timeout = 500 * time.Millisecond
	w := newWatchdog(t, c, watchdog.Options{Timeout: timeout})
	key, sent := lock(t, c, "owner-rec", timeout)
	record := func() string {
		t.Helper()
		v, err := c.Do(t.Context(), c.B().Hget().Key(key).Field("#rec").Build()).ToString()
		if rueidis.IsRedisNil(err) {
			return ""
		}
		require.NoError(t, err)
		return v
	}
	require.True(t, strings.HasPrefix(record(), "owner-rec|1|"), record())
	lost := newLostLog()
	e := w.Add(key, "owner-rec", sent, lost.onLost)
	for end := time.Now().Add(4 * timeout); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		require.True(t, strings.HasPrefix(record(), "owner-rec|1|"), "the record lapsed while the lock was kept")
	}
	assert.GreaterOrEqual(t, w.Stats().Renewed, uint64(4))
	e.Stop()
	require.Eventually(t, func() bool { return !exists(t, c, key) }, 3*timeout, 20*time.Millisecond, "the lock outlived its lease")
	assert.Empty(t, record())
	assert.Zero(t, lost.calls.Load())
}
