package integration

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/rlock"
)

// TestRegressObserveMutexRelease: an observer sees a Mutex holder's Unlock
// within its WatchdogTimeout. A Mutex release announces nothing on the
// election's channel, and the observer waited for the end of the lease it
// had read, so `latchkey leader --watch` showed a released `latchkey run
// --lease 10m` holder for up to ten minutes.
func TestRegressObserveMutexRelease(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx := t.Context()
		name := lockName(t)
		obs := observeElection(t, lockClient(t, tp, rlock.Options{WatchdogTimeout: time.Second}).Election(name))
		obs.await(t, 5*time.Second, "no leader at first", noLeader)

		m := lockClient(t, tp, rlock.Options{}).Mutex(name)
		lctx, err := m.Lock(ctx, rlock.WithLease(time.Minute))
		require.NoError(t, err)
		token, err := m.Token(lctx)
		require.NoError(t, err)
		obs.await(t, 5*time.Second, "the Mutex holder leading", func(l rlock.Leadership) bool { return l.Token == token })
		require.NoError(t, m.Unlock(lctx))
		obs.await(t, 5*time.Second, "no leader after the holder's Unlock", noLeader)
	})
}
