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

		type result struct {
			lctx context.Context
			err  error
		}
		won := make(chan result, 1)
		go func() {
			lctx, err := e.Campaign(ctx, "v")
			won <- result{lctx, err}
		}()
		await(t, waited, 10*time.Second, "the campaigner to wait in the turn")
		require.NoError(t, m.Unlock(mctx))

		var r result
		select {
		case r = <-won:
		case <-time.After(10 * time.Second):
			t.Fatal("Campaign did not return within 10s of the Mutex's Unlock")
		}
		require.NoError(t, r.err)
		defer func() { require.NoError(t, e.Resign(r.lctx)) }()
		token, err := e.Token(r.lctx)
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

		type result struct {
			lctx context.Context
			err  error
		}
		locked := make(chan result, 1)
		go func() {
			lctx, err := m.Lock(ctx)
			locked <- result{lctx, err}
		}()
		await(t, waited, 10*time.Second, "the Mutex Lock to wait in the turn")
		require.NoError(t, e.Resign(lead))

		var r result
		select {
		case r = <-locked:
		case <-time.After(10 * time.Second):
			t.Fatal("Lock did not return within 10s of the leader's Resign")
		}
		require.NoError(t, r.err)
		token, err := m.Token(r.lctx)
		require.NoError(t, err)
		l, err := e.Leader(ctx)
		require.NoError(t, err)
		require.Equal(t, rlock.Leadership{Token: token, Since: l.Since, Client: l.Client}, l, "the Mutex holder leads, with no value")
		require.NoError(t, m.Unlock(r.lctx))
		_, err = e.Leader(ctx)
		require.ErrorIs(t, err, rlock.ErrNoLeader)
	})
}
