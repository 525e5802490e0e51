package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/internal/childproc"
	"github.com/latchkey/latchkey/rlock"
)

// The holder faults (paused, killed, connections killed) for the lock
// family besides Mutex. Each kind names what the faulty holder takes and
// what a contender takes that must exclude it.

// famKind is one primitive under the faults.
type famKind struct {
	// hold takes the faulty holder's hold; contend takes a hold that
	// excludes it. Both return the hold's context and its release.
	hold, contend famAcquire
	// waitsOn is the name the contender's OnWait hook reports (the member
	// it waits for, for a MultiMutex); nil for the name itself.
	waitsOn func(name string) string
}

// waitName is the OnWait name of kind's contender on name.
func (k famKind) waitName(name string) string {
	if k.waitsOn == nil {
		return name
	}
	return k.waitsOn(name)
}

type famAcquire func(ctx context.Context, c *rlock.Client, name string) (context.Context, func(context.Context) error, error)

// famKinds are the primitives the family faults run on.
var famKinds = map[string]famKind{
	"rwmutex-write": {hold: rwWrite, contend: rwWrite},
	"rwmutex-read":  {hold: rwRead, contend: rwWrite},
	// Every permit held; the contender wants one.
	"semaphore": {hold: semAcquire(2), contend: semAcquire(1)},
	// {a, b} held; the contender wants {b, c} (on a Cluster, members may
	// live on different masters).
	"multimutex": {hold: multiLock("-a", "-b"), contend: multiLock("-b", "-c"), waitsOn: func(name string) string { return name + "-b" }},
}

func semAcquire(n int64) famAcquire {
	return func(ctx context.Context, c *rlock.Client, name string) (context.Context, func(context.Context) error, error) {
		s := c.Semaphore(name, 2)
		pctx, err := s.Acquire(ctx, n)
		return pctx, s.Release, err
	}
}

func multiLock(suffixes ...string) famAcquire {
	return func(ctx context.Context, c *rlock.Client, name string) (context.Context, func(context.Context) error, error) {
		var names []string
		for _, s := range suffixes {
			names = append(names, name+s)
		}
		mm := c.MultiMutex(names...)
		lctx, err := mm.Lock(ctx)
		return lctx, mm.Unlock, err
	}
}

func rwWrite(ctx context.Context, c *rlock.Client, name string) (context.Context, func(context.Context) error, error) {
	rw := c.RWMutex(name)
	lctx, err := rw.Lock(ctx)
	return lctx, rw.Unlock, err
}

func rwRead(ctx context.Context, c *rlock.Client, name string) (context.Context, func(context.Context) error, error) {
	rw := c.RWMutex(name)
	lctx, err := rw.RLock(ctx)
	return lctx, rw.RUnlock, err
}

// famHolderConfig tells a "famholder" child what to take.
type famHolderConfig struct {
	LockAddr        string
	Kind, Lock      string
	WatchdogTimeout time.Duration
}

// famHolderChild is the "famholder" role: take the hold and report
// "claimed"; wait for a line on stdin (the parent pauses or kills the
// process meanwhile); then wait for the loss signal, release, and report
// "done" with what both gave.
func famHolderChild() error {
	var cfg famHolderConfig
	if err := childproc.Params(&cfg); err != nil {
		return err
	}
	kind, ok := famKinds[cfg.Kind]
	if !ok {
		return fmt.Errorf("unknown kind %q", cfg.Kind)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{cfg.LockAddr}, DisableCache: true})
	if err != nil {
		return err
	}
	defer rc.Close()
	locks, err := rlock.NewClient(rc, rlock.Options{WatchdogTimeout: cfg.WatchdogTimeout})
	if err != nil {
		return err
	}
	defer locks.Close()
	lctx, release, err := kind.hold(ctx, locks, cfg.Lock)
	if err != nil {
		return err
	}
	lost := whenDone(lctx)
	out := json.NewEncoder(os.Stdout)
	if err := out.Encode(holderEvent{Event: "claimed"}); err != nil {
		return err
	}
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		return fmt.Errorf("waiting for the parent's go-ahead: %w", err)
	}
	ev := holderEvent{Event: "done"}
	select {
	case at := <-lost:
		ev.LostAtUnixNano = at.UnixNano()
	case <-time.After(holderLossWait):
	}
	if cause := context.Cause(lctx); cause != nil {
		ev.LossCause = cause.Error()
		ev.LossIsLockLost = errors.Is(cause, rlock.ErrLockLost)
	}
	err = release(lctx)
	ev.UnlockNotHeld = errors.Is(err, rlock.ErrNotHeld)
	if err != nil {
		ev.UnlockErr = err.Error()
	}
	return out.Encode(ev)
}

// startFamHolder runs a famholder child until it holds.
func startFamHolder(t *testing.T, cfg famHolderConfig) *holderProc {
	t.Helper()
	h := startHolderRole(t, "famholder", cfg)
	h.next(t, "claimed")
	return h
}

// forEachFamKind runs f for every kind, on standalone Redis.
func forEachFamKind(t *testing.T, f func(t *testing.T, kind famKind, cfg famHolderConfig)) {
	for name, kind := range famKinds {
		t.Run(name, func(t *testing.T) {
			f(t, kind, famHolderConfig{LockAddr: standalone.Addr, Kind: name, Lock: lockName(t), WatchdogTimeout: faultLease})
		})
	}
}

// TestFaultFamilyHolderPaused: a holder stopped past its lease loses its
// hold; a contender gets in only once the lease lapsed; resumed, the
// holder's context ends with ErrLockLost and its release reports
// ErrNotHeld without touching the contender's hold.
func TestFaultFamilyHolderPaused(t *testing.T) {
	forEachFamKind(t, func(t *testing.T, kind famKind, cfg famHolderConfig) {
		ctx := faultCtx(t)
		c := lockClient(t, topologies()[0], rlock.Options{WatchdogTimeout: faultLease})
		h := startFamHolder(t, cfg)
		h.signal(t, syscall.SIGSTOP)
		stopped := time.Now()
		lctx, release, err := kind.contend(ctx, c, cfg.Lock)
		require.NoError(t, err)
		nextHolder := time.Since(stopped)
		// The last renewal came at most a period before the stop.
		require.Greater(t, nextHolder, faultLease-faultLease/3-100*time.Millisecond, "a contender got in before the paused holder's lease could lapse")
		h.goAhead(t)
		h.signal(t, syscall.SIGCONT)
		done := h.next(t, "done")
		require.True(t, done.LossIsLockLost, "loss cause %q", done.LossCause)
		require.NotZero(t, done.LostAtUnixNano, "no loss signal within %v of resuming", holderLossWait)
		require.True(t, done.UnlockNotHeld, "the release after the loss must report ErrNotHeld, got %q", done.UnlockErr)
		require.NoError(t, lctx.Err(), "the late release ended the contender's hold")
		require.NoError(t, release(lctx))
		t.Logf("FAULT family-holder-sigstop %s: next holder after %v", cfg.Kind, nextHolder.Round(time.Millisecond))
	})
}

// TestFaultFamilyHolderKilled: a holder killed with SIGKILL never releases;
// a waiting contender gets in within the lease plus a renewal period.
func TestFaultFamilyHolderKilled(t *testing.T) {
	forEachFamKind(t, func(t *testing.T, kind famKind, cfg famHolderConfig) {
		ctx := faultCtx(t)
		att := newAttempts()
		c := lockClient(t, topologies()[0], att.options(rlock.Options{WatchdogTimeout: faultLease}))
		h := startFamHolder(t, cfg)
		got := make(chan error, 1)
		var lctx context.Context
		var release func(context.Context) error
		reached := att.reached(waitKey(kind.waitName(cfg.Lock)), 1)
		go func() {
			var err error
			lctx, release, err = kind.contend(ctx, c, cfg.Lock)
			got <- err
		}()
		await(t, reached, 10*time.Second, "the contender to wait")
		h.signal(t, syscall.SIGKILL)
		killed := time.Now()
		require.NoError(t, recvErr(t, got, 10*faultLease, "the contender"))
		nextHolder := time.Since(killed)
		require.Less(t, nextHolder, faultLease+faultLease/3+time.Second, "the contender must get in within a lease and a renewal period of the kill (plus slack)")
		require.NoError(t, release(lctx))
		t.Logf("FAULT family-holder-sigkill %s: next holder after %v", cfg.Kind, nextHolder.Round(time.Millisecond))
	})
}

// TestFaultFamilyConnectionsKilled: every client connection is killed
// while one client holds and another waits. The hold survives (the
// watchdog renews over new connections), and its release still wakes the
// waiter, whose subscription was remade.
func TestFaultFamilyConnectionsKilled(t *testing.T) {
	forEachFamKind(t, func(t *testing.T, kind famKind, cfg famHolderConfig) {
		ctx := faultCtx(t)
		tp := topologies()[0]
		opts := rlock.Options{WatchdogTimeout: faultLease}
		holder := lockClient(t, tp, opts)
		att := newAttempts()
		waiter := lockClient(t, tp, att.options(opts))
		hctx, hrelease, err := kind.hold(ctx, holder, cfg.Lock)
		require.NoError(t, err)
		got := make(chan error, 1)
		var wctx context.Context
		var wrelease func(context.Context) error
		reached := att.reached(waitKey(kind.waitName(cfg.Lock)), 1)
		go func() {
			var err error
			wctx, wrelease, err = kind.contend(ctx, waiter, cfg.Lock)
			got <- err
		}()
		await(t, reached, 10*time.Second, "the waiter to wait")
		renewed := holder.WatchdogStats().Renewed
		require.Positive(t, killAllClients(t, tp), "no connection was killed")
		// Two renewals over new connections: the hold survived the kill.
		awaitCond(t, 4*faultLease, "two renewals after the kill", func() bool { return holder.WatchdogStats().Renewed >= renewed+2 })
		require.NoError(t, hctx.Err(), "the hold was lost to a connection kill")
		select {
		case err := <-got:
			t.Fatalf("the waiter returned while the hold was kept: %v", err)
		default:
		}
		released := time.Now()
		require.NoError(t, hrelease(hctx))
		require.NoError(t, recvErr(t, got, 10*time.Second, "the waiter"))
		t.Logf("FAULT family-connection-kill %s: waiter in %v after the release", cfg.Kind, time.Since(released).Round(time.Millisecond))
		require.NoError(t, wrelease(wctx))
	})
}

// killAllClients kills every normal and pub/sub connection on tp's nodes
// but the killer's own, and returns how many it killed.
func killAllClients(t *testing.T, tp topology) int {
	t.Helper()
	total := killPubSubClients(t, tp)
	for _, addr := range tp.addrs {
		rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, ForceSingleClient: true, DisableCache: true})
		require.NoError(t, err)
		n, err := rc.Do(context.Background(), rc.B().ClientKill().TypeNormal().Build()).AsInt64()
		rc.Close()
		require.NoError(t, err)
		total += int(n)
	}
	return total
}
