package integration

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/rlock"
)

// TestRegressObserveTokenReset: a new leader whose fencing token is not above
// the highest one an observer delivered is still delivered. Observe dropped
// every leader with a token at or below the highest delivered, so once Redis
// lost its fencing counter (a restart without persistence, a failover to a
// replica that missed the INCR) the observer kept showing the old leader, or
// none, while Leader returned the new one.
func TestRegressObserveTokenReset(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx := t.Context()
		name := lockName(t)
		rc := redisClient(t, tp)
		obs := observeElection(t, lockClient(t, tp, rlock.Options{}).Election(name))
		obs.await(t, 5*time.Second, "no leader at first", noLeader)

		a := lockClient(t, tp, rlock.Options{}).Election(name)
		actx, err := a.Campaign(ctx, "a")
		require.NoError(t, err)
		token, err := a.Token(actx)
		require.NoError(t, err)
		obs.await(t, 5*time.Second, "a leading", leads("a"))
		require.NoError(t, a.Resign(actx))
		obs.await(t, 5*time.Second, "no leader after a resigned", noLeader)

		// Redis loses the last INCR of the fencing counter.
		fence := "latchkey:{" + name + "}:fence"
		require.NoError(t, rc.Do(ctx, rc.B().Set().Key(fence).Value(strconv.FormatInt(token-1, 10)).Build()).Error())

		b := lockClient(t, tp, rlock.Options{}).Election(name)
		bctx, err := b.Campaign(ctx, "b")
		require.NoError(t, err)
		btoken, err := b.Token(bctx)
		require.NoError(t, err)
		require.Equal(t, token, btoken, "b's token repeats a's")
		l, err := b.Leader(ctx)
		require.NoError(t, err)
		require.Equal(t, "b", l.Value)
		obs.await(t, 5*time.Second, "b leading", leads("b"))
		require.NoError(t, b.Resign(bctx))
		obs.await(t, 5*time.Second, "no leader after b resigned", noLeader)
	})
}
