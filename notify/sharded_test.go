package notify

import (
	"fmt"
	"testing"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"
)

const clusterSlots = 16384

// ownerIndex maps a slot to the cluster node that serves it; redistest gives
// node i the i-th contiguous n-th of the slot space.
func ownerIndex(slot int64, nodes int) int {
	return int(slot * int64(nodes) / clusterSlots)
}

// shardedChannels returns n channels (hash-tagged) whose slots belong to n
// different nodes, with each one's owner.
func shardedChannels(t *testing.T, c rueidis.Client, n int) (channels []string, owners []int) {
	t.Helper()
	base := uniqueChannel(t)
	seen := make(map[int]bool)
	for i := 0; len(channels) < n; i++ {
		require.Less(t, i, 1000, "no hash tags found on %d different nodes", n)
		ch := fmt.Sprintf("{tag%d}:%s", i, base)
		slot, err := c.Do(t.Context(), c.B().ClusterKeyslot().Key(ch).Build()).AsInt64()
		require.NoError(t, err)
		owner := ownerIndex(slot, len(clusterAddrs))
		if !seen[owner] {
			seen[owner] = true
			channels = append(channels, ch)
			owners = append(owners, owner)
		}
	}
	return channels, owners
}

// Sharded mode on a cluster: each channel's SSUBSCRIBE lands on the node that
// owns its slot, SPUBLISH wakes the waiter of that channel only, and the
// subscriptions end on Release (without a linger) and Close.
func TestShardedModeOnCluster(t *testing.T) {
	cc := newClient(t, clusterAddrs...)
	nodes := make([]rueidis.Client, len(clusterAddrs))
	for i, addr := range clusterAddrs {
		nodes[i] = newNodeClient(t, addr)
	}
	tap := newTap(cc)
	h := newHub(t, tap, Options{Mode: Sharded, Linger: noLinger})

	channels, owners := shardedChannels(t, cc, 2)
	require.NotEqual(t, owners[0], owners[1])
	subs := make([]*Subscription, len(channels))
	for i, ch := range channels {
		subs[i] = subscribeN(t, h, ch, 1)[0]
		for j, node := range nodes {
			n, err := numsubOf(t.Context(), node, true, ch)
			require.NoError(t, err)
			if j == owners[i] {
				require.EqualValues(t, 1, n, "%q not subscribed on its owner %s right after Subscribe", ch, clusterAddrs[j])
			} else {
				require.EqualValues(t, 0, n, "%q subscribed on %s, which does not own it", ch, clusterAddrs[j])
			}
		}
	}
	require.ElementsMatch(t, channels, h.Channels())

	results := startWaiters(t, subs, longWait)
	for i, ch := range channels {
		n, err := cc.Do(t.Context(), cc.B().Spublish().Channel(ch).Message("released").Build()).AsInt64()
		require.NoError(t, err)
		require.EqualValues(t, 1, n, "SPUBLISH %q reached %d subscribers", ch, n)
		r := await(t, results, fmt.Sprintf("the waiter on %q", ch))
		require.NoError(t, r.err)
		require.Equal(t, WokenOne, r.wake)
		require.Equal(t, i, r.id, "SPUBLISH %q woke the waiter of another channel", ch)
		tap.requireHandled(t, ch, 1)
		require.Empty(t, results)
	}
	for _, ch := range channels {
		require.Equal(t, 1, tap.handledOn(ch), "messages handled on %q", ch)
	}

	// Release unsubscribes the first channel on its owner, and only that.
	subs[0].Release()
	requireNumsubEventually(t, nodes[owners[0]], true, channels[0], 0)
	n, err := numsubOf(t.Context(), nodes[owners[1]], true, channels[1])
	require.NoError(t, err)
	require.EqualValues(t, 1, n)

	// Close unsubscribes the rest before it returns.
	h.Close()
	for i, ch := range channels {
		n, err := numsubOf(t.Context(), nodes[owners[i]], true, ch)
		require.NoError(t, err)
		require.EqualValues(t, 0, n, "%q still subscribed on %s after Close", ch, clusterAddrs[owners[i]])
	}
	require.Empty(t, h.Channels())
}
