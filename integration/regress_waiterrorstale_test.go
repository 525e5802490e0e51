package integration

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/rlock"
)

// TestRegressWaitErrorStaleHolder: a WaitError named the holder that the
// side's last refused try saw, even after a grant: G1 was refused by
// other-proc, G2 waited in the local turn behind G1, other-proc released
// and G1 got the lock, and G2, giving up behind G1's hold, blamed
// other-proc ("held by other-proc … lease left 28s", long released). With
// a handle per call, G2's side had seen no refusal at all, so the error
// named nobody though this very client held the lock. A wait now reports
// what blocked it at its end: the client's own hold when it gave up behind
// one, else the last refusal of the client's contender for the lock.
func TestRegressWaitErrorStaleHolder(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		for _, spin := range []bool{false, true} {
			for _, shared := range []bool{true, false} {
				t.Run(fmt.Sprintf("spin=%v/shared handle=%v", spin, shared), func(t *testing.T) {
					testWaitErrorStaleHolder(t, tp, spin, shared)
				})
			}
		}
	})
}

func testWaitErrorStaleHolder(t *testing.T, tp topology, spin, shared bool) {
	ctx := context.Background()
	name := lockName(t)
	other := lockClient(t, tp, rlock.Options{ClientName: "other-proc"}).Mutex(name)
	octx := mustLock(t, ctx, other)
	released := false
	defer func() {
		if !released {
			require.NoError(t, other.Unlock(octx))
		}
	}()

	// G1's first refused try waits in OnAttempt until G2 and G3 wait in
	// the turn, so that its refusal is newer than their calls (as when
	// G1 is refused again while they wait).
	att := newAttempts()
	opts := att.options(rlock.Options{ClientName: "this-proc"})
	var refused atomic.Bool
	firstRefused, gate := make(chan struct{}), make(chan struct{})
	opts.OnAttempt = func(n string, acquired bool) {
		att.hook(n, acquired)
		if !acquired && refused.CompareAndSwap(false, true) {
			close(firstRefused)
			<-gate
		}
	}
	c := lockClient(t, tp, opts)
	handle := func() *rlock.Mutex {
		if spin {
			return c.SpinMutex(name)
		}
		return c.Mutex(name)
	}
	m := handle()
	mutexFor := func() *rlock.Mutex {
		if shared {
			return m
		}
		return handle()
	}

	type locked struct {
		lctx context.Context
		err  error
	}
	g1 := make(chan locked, 1)
	go func() {
		lctx, err := mutexFor().Lock(ctx)
		g1 <- locked{lctx, err}
	}()
	await(t, firstRefused, 10*time.Second, "G1's refusal")
	waiter := func(n int) (context.CancelFunc, <-chan error) {
		wctx, cancel := context.WithCancel(ctx)
		errs := make(chan error, 1)
		go func() {
			_, err := mutexFor().Lock(wctx)
			errs <- err
		}()
		// G1 waits in the hook: the waits counted are the turn's.
		await(t, att.reached(waitKey(name), n), 10*time.Second, fmt.Sprintf("waiter %d to wait in the turn", n))
		return cancel, errs
	}
	cancel2, errs2 := waiter(1)
	defer cancel2()
	cancel3, errs3 := waiter(2)
	defer cancel3()
	close(gate)
	// G1 contends: its refusal is recorded before it waits.
	await(t, att.reached(waitKey(name), 3), 10*time.Second, "G1 to wait for other-proc")

	// G3 gives up while G1 still contends: other-proc blocks them both.
	cancel3()
	err := recvErr(t, errs3, 10*time.Second, "G3's cancelled wait")
	require.ErrorIs(t, err, context.Canceled)
	var we *rlock.WaitError
	require.True(t, errors.As(err, &we), "%T: %v", err, err)
	if assert.NotNil(t, we.Holder, "G3 waited behind G1, refused by other-proc: %v", err) {
		assert.Equal(t, "other-proc", we.Holder.Client.Name, "%v", err)
	}

	// other-proc releases and G1 gets the lock; G2 gives up behind G1.
	require.NoError(t, other.Unlock(octx))
	released = true
	var r locked
	select {
	case r = <-g1:
	case <-time.After(10 * time.Second):
		t.Fatal("G1 did not get the lock")
	}
	require.NoError(t, r.err)
	defer func() { require.NoError(t, m.Unlock(r.lctx)) }()
	token, err := m.Token(r.lctx)
	require.NoError(t, err)

	cancel2()
	err = recvErr(t, errs2, 10*time.Second, "G2's cancelled wait")
	require.ErrorIs(t, err, context.Canceled)
	we = nil
	require.True(t, errors.As(err, &we), "%T: %v", err, err)
	require.NotContains(t, err.Error(), "other-proc", "other-proc released before G2 gave up")
	require.NotNil(t, we.Holder, "G2 gave up behind G1, a hold of its own client: %v", err)
	require.Equal(t, "this-proc", we.Holder.Client.Name, "%v", err)
	require.Equal(t, c.ID(), we.Holder.Client.ID, "%v", err)
	require.Equal(t, token, we.Holder.Token, "G1's grant: %v", err)
	require.False(t, we.Holder.Since.IsZero(), "%v", err)
	require.Positive(t, we.Holder.LeaseLeft, "%v", err)
	require.Zero(t, we.Position, "the grant dequeued the client: %v", err)
	require.Contains(t, err.Error(), "held by this-proc (host ")
}
