package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/rlock"
)

// waitSignal returns Options whose OnWait signals the channel returned,
// without blocking, each time a call of the client waits.
func waitSignal() (rlock.Options, <-chan struct{}) {
	waited := make(chan struct{}, 1)
	return rlock.Options{OnWait: func(string) {
		select {
		case waited <- struct{}{}:
		default:
		}
	}}, waited
}

// TestRegressElectionNotHandedByMutex: a Campaign waiting in the local turn
// behind a Mutex holder of the same name and Client leads with its value,
// announced. Election and Mutex share the turn (one queue entry per
// client), and the Mutex's Unlock handed the lock to the campaigner with
// the Mutex's release script: a grant without `#val` and without
// announcement, so Leader reported Value "" for the whole term and
// observers heard of it only at their backstop read.
func TestRegressElectionNotHandedByMutex(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx := t.Context()
		name := lockName(t)
		obs := observeElection(t, lockClient(t, tp, rlock.Options{}).Election(name))
		obs.await(t, 10*time.Second, "no leader at first", noLeader)

		opts, waited := waitSignal()
		c := lockClient(t, tp, opts)
		m, e := c.Mutex(name), c.Election(name)
		mctx, err := m.Lock(ctx)
		require.NoError(t, err)

		won := takeWhileWaiting(t, waited, "the campaigner", func() (context.Context, error) { return e.Campaign(ctx, "v") }, func() error { return m.Unlock(mctx) })
		defer func() { require.NoError(t, e.Resign(won)) }()
		token, err := e.Token(won)
		require.NoError(t, err)

		l, err := e.Leader(ctx)
		require.NoError(t, err)
		require.Equal(t, token, l.Token, "the campaigner leads")
		require.Equal(t, "v", l.Value, "the leader's value")
		// Within the backstop (WatchdogTimeout, 30 s) only if announced.
		obs.await(t, 10*time.Second, `the leader "v"`, func(l rlock.Leadership) bool { return l.Value == "v" && l.Token == token })
	})
}

// TestRegressMutexAfterLocalResign is the reverse: a Mutex Lock waiting in
// the turn behind a leader of the same name and Client gets the lock once
// the leader resigns, and observers hear the resignation.
func TestRegressMutexAfterLocalResign(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx := t.Context()
		name := lockName(t)
		obs := observeElection(t, lockClient(t, tp, rlock.Options{}).Election(name))
		obs.await(t, 10*time.Second, "no leader at first", noLeader)

		opts, waited := waitSignal()
		c := lockClient(t, tp, opts)
		m, e := c.Mutex(name), c.Election(name)
		lead, err := e.Campaign(ctx, "v")
		require.NoError(t, err)
		obs.await(t, 10*time.Second, `the leader "v"`, func(l rlock.Leadership) bool { return l.Value == "v" })

		locked := takeWhileWaiting(t, waited, "the Mutex Lock", func() (context.Context, error) { return m.Lock(ctx) }, func() error { return e.Resign(lead) })
		token, err := m.Token(locked)
		require.NoError(t, err)
		l, err := e.Leader(ctx)
		require.NoError(t, err)
		require.Equal(t, rlock.Leadership{Token: token, Since: l.Since, Client: l.Client}, l, "the Mutex holder leads, with no value")
		require.NoError(t, m.Unlock(locked))
		_, err = e.Leader(ctx)
		require.ErrorIs(t, err, rlock.ErrNoLeader)
	})
}

// takeWhileWaiting runs take in a goroutine, awaits its wait in the turn
// (waited), then runs release, and returns take's context once it has it.
func takeWhileWaiting(t *testing.T, waited <-chan struct{}, who string, take func() (context.Context, error), release func() error) context.Context {
	t.Helper()
	type result struct {
		lctx context.Context
		err  error
	}
	took := make(chan result, 1)
	go func() {
		lctx, err := take()
		took <- result{lctx, err}
	}()
	await(t, waited, 10*time.Second, who+" to wait in the turn")
	require.NoError(t, release())
	select {
	case r := <-took:
		require.NoError(t, r.err)
		return r.lctx
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not return within 10s of the release", who)
		return nil
	}
}
