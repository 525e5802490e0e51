package integration

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/rlock"
)

// TestRegressSyncTimeoutDefaultFits: SyncReplicas' default WAIT timeout
// fits a short watchdog interval. It was 1 s whatever the interval, which
// must be longer, so a WatchdogTimeout of 3 s or less with SyncReplicas
// made NewClient refuse options made of defaults only.
func TestRegressSyncTimeoutDefaultFits(t *testing.T) {
	tp := topologies()[0]
	for _, opts := range []rlock.Options{
		{WatchdogTimeout: 3 * time.Second, SyncReplicas: rlock.SyncReplicas{Replicas: 1}},
		{WatchdogTimeout: time.Second, SyncReplicas: rlock.SyncReplicas{Replicas: 1}},
		{WatchdogTimeout: 10 * time.Second, WatchdogInterval: time.Second, SyncReplicas: rlock.SyncReplicas{Replicas: 1}},
	} {
		c, err := rlock.NewClient(redisClient(t, tp), opts)
		require.NoError(t, err, "%+v", opts)
		require.NoError(t, c.Close())
	}
}
