package main

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// smallMarket writes a consistent market by hand: seller s1 made three
// items; b1 bought s1-0, s1-1 is listed, s1-2 is still in s1's inventory.
func smallMarket(t *testing.T, rc rueidis.Client) world {
	t.Helper()
	ctx := context.Background()
	w := world{made: map[string]int{"s1": 3}, buyers: []string{"b1"}, buyerFunds: 1000, maxPrice: 100, listed: 2, bought: 1}
	p0, p1 := priceOf("s1-0", w.maxPrice), priceOf("s1-1", w.maxPrice)
	require.NoError(t, rc.Do(ctx, rc.B().Flushall().Build()).Error())
	require.NoError(t, createUsers(ctx, rc, []string{"s1"}, w.buyers, w.buyerFunds))
	cmds := rueidis.Commands{
		rc.B().Hincrby().Key(userKey("s1")).Field("funds").Increment(p0).Build(),
		rc.B().Hincrby().Key(userKey("b1")).Field("funds").Increment(-p0).Build(),
		rc.B().Sadd().Key(inventoryKey("b1")).Member("s1-0").Build(),
		rc.B().Zadd().Key(marketKey).ScoreMember().ScoreMember(float64(p1), "s1-1.s1").Build(),
		rc.B().Sadd().Key(inventoryKey("s1")).Member("s1-2").Build(),
	}
	for _, c := range cmds {
		require.NoError(t, rc.Do(ctx, c).Error())
	}
	return w
}

// TestInvariantsCatchBrokenMarkets shows that each invariant can fail: a
// consistent market passes, and each kind of damage is reported.
func TestInvariantsCatchBrokenMarkets(t *testing.T) {
	rc := newTestClient(t)
	ctx := context.Background()
	price := func(item string) int64 { return priceOf(item, defaultMaxPrice) }

	t.Run("consistent", func(t *testing.T) {
		w := smallMarket(t, rc)
		p, err := checkInvariants(ctx, rc, w)
		require.NoError(t, err)
		assert.Zero(t, p.n, "problems: %q", p.samples)
	})

	for _, tc := range []struct {
		name   string
		damage func(w *world) rueidis.Commands
		want   string
	}{
		{"purchase applied twice", func(*world) rueidis.Commands {
			return rueidis.Commands{
				rc.B().Hincrby().Key(userKey("s1")).Field("funds").Increment(price("s1-0")).Build(),
				rc.B().Hincrby().Key(userKey("b1")).Field("funds").Increment(-price("s1-0")).Build(),
			}
		}, "applied twice"},
		{"money created", func(*world) rueidis.Commands {
			return rueidis.Commands{rc.B().Hincrby().Key(userKey("s1")).Field("funds").Increment(1).Build()}
		}, "money not conserved"},
		{"item in two places", func(*world) rueidis.Commands {
			return rueidis.Commands{rc.B().Zadd().Key(marketKey).ScoreMember().ScoreMember(float64(price("s1-0")), "s1-0.s1").Build()}
		}, "s1-0 exists 2 times"},
		{"item lost", func(*world) rueidis.Commands {
			return rueidis.Commands{rc.B().Srem().Key(inventoryKey("s1")).Member("s1-2").Build()}
		}, "s1-2 exists 0 times"},
		{"item from nowhere", func(*world) rueidis.Commands {
			return rueidis.Commands{rc.B().Sadd().Key(inventoryKey("b1")).Member("s9-0").Build()}
		}, "s9-0 was never created"},
		{"wrong price", func(*world) rueidis.Commands {
			return rueidis.Commands{rc.B().Zadd().Key(marketKey).ScoreMember().ScoreMember(float64(price("s1-1")+1), "s1-1.s1").Build()}
		}, "its price is"},
		{"purchase not counted", func(w *world) rueidis.Commands {
			w.bought--
			return nil
		}, "counted 0 purchases"},
		{"lock left behind", func(*world) rueidis.Commands {
			return rueidis.Commands{rc.B().Set().Key(setnxPrefix + "market").Value("x").Build()}
		}, "lock lock:market is still held"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := smallMarket(t, rc)
			for _, c := range tc.damage(&w) {
				require.NoError(t, rc.Do(ctx, c).Error())
			}
			p, err := checkInvariants(ctx, rc, w)
			require.NoError(t, err)
			require.Positive(t, p.n)
			assert.Contains(t, strings.Join(p.samples, "\n"), tc.want)
		})
	}
}

func TestItemNames(t *testing.T) {
	item := itemID("s3", 42)
	assert.Equal(t, "s3", sellerOfItem(item))
	gotItem, gotSeller, ok := splitMember(marketMember(item, "s3"))
	assert.True(t, ok)
	assert.Equal(t, [2]string{item, "s3"}, [2]string{gotItem, gotSeller})
	for _, bad := range []string{"", "noseller.", ".s1", "nodot"} {
		_, _, ok := splitMember(bad)
		assert.False(t, ok, bad)
	}
	assert.Empty(t, sellerOfItem("s3-x"))
	for i := range 1000 {
		p := priceOf(itemID("s1", i), defaultMaxPrice)
		require.True(t, p >= 1 && p <= defaultMaxPrice, "price %d", p)
	}
}
