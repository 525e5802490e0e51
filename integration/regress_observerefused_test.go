package integration

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/rlock"
)

// TestRegressObserveRefused: an observer that Redis refuses with an error
// no retry cures (a user without the channels' permission: NOPERM) closes
// its channel and logs why. It retried silently and forever, delivering
// nothing (and `latchkey leader --watch` ran on, saying nothing).
func TestRegressObserveRefused(t *testing.T) {
	t.Run("standalone", func(t *testing.T) {
		// A server of its own: this test changes its ACL.
		testObserveRefused(t, topology{name: "standalone", addrs: []string{ownServer(t).Addr}})
	})
	t.Run("cluster", func(t *testing.T) {
		testObserveRefused(t, topologies()[1])
	})
}

func testObserveRefused(t *testing.T, tp topology) {
	ctx := context.Background()
	tp.user, tp.password = "latchkey-observe-refused", "observe-refused-secret"
	// The documented grant without its channels: reads work, the
	// observers' subscription is refused.
	cmd := slices.DeleteFunc(aclSetUser(tp.user, tp.password, rlock.DefaultPrefix), func(a string) bool { return strings.HasPrefix(a, "&") })
	for _, addr := range tp.addrs {
		admin := nodeClient(t, addr)
		require.NoError(t, admin.Do(ctx, admin.B().Arbitrary(cmd...).Build()).Error())
		t.Cleanup(func() { admin.Do(context.Background(), admin.B().AclDeluser().Username(tp.user).Build()) })
	}
	logs := &logCapture{}
	e := lockClient(t, tp, rlock.Options{Logger: slog.New(logs)}).Election(lockName(t))
	_, err := e.Leader(ctx)
	require.ErrorIs(t, err, rlock.ErrNoLeader, "the user may read the leader")

	octx, cancel := context.WithCancel(ctx)
	defer cancel()
	leaders := e.Observe(octx)
	select {
	case l, open := <-leaders:
		require.False(t, open, "delivered %+v", l)
	case <-time.After(10 * time.Second):
		t.Fatalf("still observing 10s after the refusal; logs %q", logs.all())
	}
	require.True(t, logs.saw(slog.LevelError, "NOPERM"), "logs %q", logs.all())
}
