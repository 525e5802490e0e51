package integration

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/rlock"
)

// TestRegressForceUnlockAnnounced: a force-unlock of an election's lock
// tells its observers at once, as a resignation does. It announced
// nothing, so an observer kept reporting the deleted leader until the
// lease it had read ran out (here a minute).
func TestRegressForceUnlockAnnounced(t *testing.T) {
	const lease = time.Minute
	forEachTopology(t, func(t *testing.T, tp topology) {
		name := lockName(t)
		obs := observeElection(t, lockClient(t, tp, rlock.Options{}).Election(name))
		obs.await(t, 5*time.Second, "no leader at first", noLeader)
		leader := lockClient(t, tp, rlock.Options{WatchdogTimeout: lease})
		lctx, err := leader.Election(name).Campaign(t.Context(), "a")
		require.NoError(t, err)
		keepHeld(t, lctx) // a leaked hold is released: the force-unlock must find it
		obs.await(t, 5*time.Second, "a leading", leads("a"))

		deleted, err := lockClient(t, tp, rlock.Options{}).ForceUnlock(t.Context(), name)
		require.NoError(t, err)
		require.True(t, deleted, "the leader's lock was there to delete")
		// Far within the lease: only an announcement makes the observer read.
		obs.await(t, 5*time.Second, "no leader after the force-unlock", noLeader)
	})
}
