package rlock_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/rlock"
)

// TestRedissonRefusals: with ProtocolRedisson, what has no Redisson
// counterpart, and empty names, are refused before any I/O; names are
// taken as Redisson takes them, braces included (off a Cluster, even those
// whose channel would land in another slot).
func TestRedissonRefusals(t *testing.T) {
	_, err := rlock.NewClient(&noIO{}, rlock.Options{Protocol: rlock.ProtocolRedisson + 1})
	require.ErrorIs(t, err, rlock.ErrInvalidOptions, "an unknown protocol")

	_, err = rlock.NewClient(&noIO{}, rlock.Options{Protocol: rlock.ProtocolRedisson, PubSub: rlock.PubSubSharded})
	require.ErrorIs(t, err, rlock.ErrInvalidOptions, "SPUBLISH off a Cluster, where Redisson uses PUBLISH")

	rc := &noIO{}
	c, err := rlock.NewClient(rc, rlock.Options{Protocol: rlock.ProtocolRedisson})
	require.NoError(t, err)
	defer func() {
		require.NoError(t, c.Close())
		require.Zero(t, rc.calls.Load(), "a refusal reached Redis")
	}()
	ctx := context.Background()

	_, err = c.RWMutex("a").RLock(ctx)
	require.ErrorIs(t, err, rlock.ErrInvalidOptions, "RWMutex")
	_, err = c.Semaphore("a", 2).Acquire(ctx, 1)
	require.ErrorIs(t, err, rlock.ErrInvalidOptions, "Semaphore")
	_, err = c.CountDownLatch("a").TrySetCount(ctx, 1)
	require.ErrorIs(t, err, rlock.ErrInvalidOptions, "CountDownLatch")
	_, err = c.MultiMutex("a", "b").Lock(ctx)
	require.ErrorIs(t, err, rlock.ErrInvalidOptions, "MultiMutex")
	_, err = c.List(ctx, "")
	require.ErrorIs(t, err, rlock.ErrInvalidOptions, "List")
	_, err = c.InspectSemaphore(ctx, "a")
	require.ErrorIs(t, err, rlock.ErrInvalidOptions, "InspectSemaphore")
	_, err = c.ForceUnlockRWMutex(ctx, "a")
	require.ErrorIs(t, err, rlock.ErrInvalidOptions, "ForceUnlockRWMutex")
	_, err = c.Election("a").Campaign(ctx, "v")
	require.ErrorIs(t, err, rlock.ErrInvalidOptions, "Election")

	_, err = c.Mutex("").Lock(ctx)
	require.ErrorIs(t, err, rlock.ErrInvalidName, "an empty name")
	_, err = c.Inspect(ctx, "")
	require.ErrorIs(t, err, rlock.ErrInvalidName, "Inspect of an empty name")
	for _, name := range []string{"orders", "app:{orders}:lock", "{a}}", "a}b"} {
		require.Equal(t, name, c.Mutex(name).Key(), "the key is the name as given")
	}

	// Names whose channel would hash to another slot are refused on a
	// Cluster only: integration's TestRedissonUnpairedBraces.
}
