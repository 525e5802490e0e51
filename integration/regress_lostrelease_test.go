package integration

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/internal/luascripts"
	"github.com/latchkey/latchkey/rlock"
	"github.com/latchkey/latchkey/watchdog"
)

// heldLostRelease holds the client's renewals while on (as heldRenewals)
// and every Mutex release until releaseGate closes, noting the lock's PTTL
// in Redis when the first release arrives.
type heldLostRelease struct {
	heldRenewals
	rc          rueidis.Client // reads the PTTL
	key         string
	release     string // the release script's SHA
	pttl        chan time.Duration
	releaseGate chan struct{}
}

func (c heldLostRelease) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	if args := cmd.Commands(); len(args) > 1 && args[0] == "EVALSHA" && args[1] == c.release {
		p, err := c.rc.Do(context.Background(), c.rc.B().Pttl().Key(c.key).Build()).AsInt64()
		if err == nil {
			select {
			case c.pttl <- time.Duration(p) * time.Millisecond:
			default:
			}
		}
		select {
		case <-c.releaseGate:
		case <-ctx.Done():
			return c.Client.Do(ctx, cmd) // ctx's error, as a call cut short
		}
	}
	return c.heldRenewals.Do(ctx, cmd)
}

// TestRegressLostHoldReleaseKeepsTheMargin: the release of a hold the
// watchdog gave up (fac3673) comes when the lease the holder counted on
// could have run out in Redis, not at once, and an Unlock of the lost hold
// does not wait for it. Before the fix the release was sent at the loss,
// with the drift margin (the holder's head start: docs/safety.md) still
// left on the lock, and it held the hold's call lock, so that Unlock
// waited for it as long as Redis did not answer (up to ReleaseTimeout).
func TestRegressLostHoldReleaseKeepsTheMargin(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx := context.Background()
		const timeout = 3 * time.Second
		name := lockName(t)
		raw := redisClient(t, tp)
		w := newHeldLostRelease(raw, name)
		c, m, lctx := lostByHeldRenewals(t, ctx, w, name, rlock.Options{WatchdogTimeout: timeout, ReleaseTimeout: time.Minute})

		var left time.Duration
		select {
		case left = <-w.pttl:
		case <-time.After(timeout):
			t.Fatal("the lost hold was not released")
		}
		// The margin is 50 ms at this timeout; the lease ends in Redis a
		// round trip after the local estimate, never before it.
		require.Less(t, left, watchdog.DriftMargin(timeout)/2, "released with the holder's head start still on the lock")

		unlocked := make(chan error, 1)
		go func() { unlocked <- m.Unlock(lctx) }()
		select {
		case err := <-unlocked:
			require.ErrorIs(t, err, rlock.ErrNotHeld)
		case <-time.After(10 * time.Second):
			t.Fatal("Unlock of the lost hold waited for the background release")
		}
		close(w.releaseGate)
		close(w.gate)
		require.NoError(t, c.Close())
		require.False(t, exists(t, raw, m.Key()), "the lost hold was not released")
	})
}

// TestRegressLostHoldCloseKeepsTheMargin: a Close soon after the watchdog
// gave a hold up releases it only once the margin has passed, and returns
// after that release. Before the fix Close cut the margin's wait short and
// the release ran at once, with the holder's head start still on the lock.
func TestRegressLostHoldCloseKeepsTheMargin(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx := context.Background()
		const timeout = 3 * time.Second
		name := lockName(t)
		raw := redisClient(t, tp)
		w := newHeldLostRelease(raw, name)
		close(w.releaseGate)
		openGate := sync.OnceFunc(func() { close(w.gate) })
		t.Cleanup(openGate) // a Close left waiting on the held renewal
		c, m, _ := lostByHeldRenewals(t, ctx, w, name, rlock.Options{WatchdogTimeout: timeout})

		closed := make(chan error, 1)
		go func() { closed <- c.Close() }()
		var left time.Duration
		select {
		case left = <-w.pttl:
		case <-time.After(timeout):
			t.Fatal("the lost hold was not released")
		}
		openGate() // Close awaits the renewal held since the loss
		select {
		case err := <-closed:
			require.NoError(t, err)
		case <-time.After(10 * time.Second):
			t.Fatal("Close did not return")
		}
		// The margin is 50 ms at this timeout.
		require.Less(t, left, watchdog.DriftMargin(timeout)/2, "released at Close with the holder's head start still on the lock")
		require.False(t, exists(t, raw, m.Key()), "the lost hold was not released")
	})
}

// newHeldLostRelease wraps raw for the lock name: renewals held while
// w.on is set, releases held until w.releaseGate closes.
func newHeldLostRelease(raw rueidis.Client, name string) heldLostRelease {
	return heldLostRelease{
		heldRenewals: heldRenewals{Client: raw, sha: shaOf(luascripts.Renew), on: new(atomic.Bool), n: new(atomic.Int64), sent: new(atomic.Int64), gate: make(chan struct{})},
		rc:           raw, key: "latchkey:{" + name + "}", release: shaOf(luascripts.Release),
		pttl: make(chan time.Duration, 1), releaseGate: make(chan struct{}),
	}
}

// lostByHeldRenewals makes a client over w, locks name after its first
// renewal went through, then holds its renewals until the watchdog gives
// the hold up.
func lostByHeldRenewals(t *testing.T, ctx context.Context, w heldLostRelease, name string, opts rlock.Options) (*rlock.Client, *rlock.Mutex, context.Context) {
	t.Helper()
	c, err := rlock.NewClient(w, opts)
	require.NoError(t, err)
	m := c.Mutex(name)
	require.Equal(t, w.key, m.Key())
	lctx, err := m.Lock(ctx)
	require.NoError(t, err)
	awaitCond(t, 2*opts.WatchdogTimeout, "a first renewal", func() bool { return w.sent.Load() > 0 })
	w.on.Store(true)
	requireLost(t, lctx, 2*opts.WatchdogTimeout, "the hold whose renewals are held")
	return c, m, lctx
}
