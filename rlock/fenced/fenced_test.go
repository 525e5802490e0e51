package fenced_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/rlock/fenced"
)

var seq atomic.Int64

func clients(t *testing.T) map[string]rueidis.Client {
	out := map[string]rueidis.Client{}
	for name, addrs := range map[string][]string{"standalone": {redisAddr}, "cluster": clusterAddrs} {
		rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: addrs, DisableCache: true})
		require.NoError(t, err)
		t.Cleanup(rc.Close)
		out[name] = rc
	}
	return out
}

func TestStoreRejectsLowerTokens(t *testing.T) {
	for topo, rc := range clients(t) {
		t.Run(topo, func(t *testing.T) {
			s := fenced.New(rc, fmt.Sprintf("%s-%d", t.Name(), seq.Add(1)))
			t.Cleanup(func() { require.NoError(t, s.Delete(context.Background())) })

			v, tok, err := s.Read(t.Context())
			require.NoError(t, err)
			assert.Equal(t, "", v)
			assert.Zero(t, tok)

			require.NoError(t, s.Write(t.Context(), 1, "one"))
			require.NoError(t, s.Write(t.Context(), 1, "one again"), "the same holder writes twice")
			require.NoError(t, s.Write(t.Context(), 3, "three"))
			err = s.Write(t.Context(), 2, "two")
			require.ErrorIs(t, err, fenced.ErrStale)
			assert.Contains(t, err.Error(), "token 2, but 3")

			v, tok, err = s.Read(t.Context())
			require.NoError(t, err)
			assert.Equal(t, "three", v, "the stale write changed nothing")
			assert.Equal(t, int64(3), tok)

			accepted, stale, err := s.Audit(t.Context())
			require.NoError(t, err)
			assert.Equal(t, 3, accepted)
			assert.Zero(t, stale)
		})
	}
}

func TestStoreRejectsInvalidTokens(t *testing.T) {
	s := fenced.New(clients(t)["standalone"], "invalid")
	for _, tok := range []int64{0, -1} {
		err := s.Write(t.Context(), tok, "x")
		assert.True(t, errors.Is(err, fenced.ErrInvalidToken), "token %d: %v", tok, err)
	}
	accepted, _, err := s.Audit(t.Context())
	require.NoError(t, err)
	assert.Zero(t, accepted, "nothing reached Redis")
}

// TestClaimFencesTheRead is the interleaving a write-only fence misses: the
// old holder reads, the new holder reads, the old holder writes, the new
// holder writes. Without Claim the old write is accepted and then
// overwritten; with Claim it is rejected, so nothing acknowledged is lost.
func TestClaimFencesTheRead(t *testing.T) {
	for topo, rc := range clients(t) {
		t.Run(topo, func(t *testing.T) {
			s := fenced.New(rc, fmt.Sprintf("%s-%d", t.Name(), seq.Add(1)))
			t.Cleanup(func() { require.NoError(t, s.Delete(context.Background())) })
			ctx := t.Context()
			require.NoError(t, s.Write(ctx, 1, "x"))

			old, err := s.Claim(ctx, 1)
			require.NoError(t, err)
			assert.Equal(t, "x", old)
			next, err := s.Claim(ctx, 2)
			require.NoError(t, err)
			assert.Equal(t, "x", next)

			err = s.Write(ctx, 1, old+" a")
			require.ErrorIs(t, err, fenced.ErrStale, "the old holder writes after the new one claimed")
			assert.Contains(t, err.Error(), "token 1, but 2")
			_, err = s.Claim(ctx, 1)
			require.ErrorIs(t, err, fenced.ErrStale)
			require.NoError(t, s.Write(ctx, 2, next+" b"))

			v, tok, err := s.Read(ctx)
			require.NoError(t, err)
			assert.Equal(t, "x b", v)
			assert.Equal(t, int64(2), tok, "Read reports the token that wrote, not the claim")
			accepted, stale, err := s.Audit(ctx)
			require.NoError(t, err)
			assert.Equal(t, 2, accepted)
			assert.Zero(t, stale)

			_, err = s.Claim(ctx, 0)
			require.ErrorIs(t, err, fenced.ErrInvalidToken)
		})
	}
}

// TestAuditLogBounded (issue 21, defect 15): the audit log no longer grows
// by one entry per accepted write forever: by default it keeps the last
// 1000 accepted tokens, and Audit reads that window.
func TestAuditLogBounded(t *testing.T) {
	rc := clients(t)["standalone"]
	s := fenced.New(rc, fmt.Sprintf("%s-%d", t.Name(), seq.Add(1)))
	t.Cleanup(func() { require.NoError(t, s.Delete(context.Background())) })
	for tok := int64(1); tok <= 1100; tok++ {
		require.NoError(t, s.Write(t.Context(), tok, "v"))
	}
	n, err := rc.Do(t.Context(), rc.B().Llen().Key(s.Key()+":log").Build()).AsInt64()
	require.NoError(t, err)
	require.Equal(t, int64(1000), n, "the log's length after 1100 writes")
	first, err := rc.Do(t.Context(), rc.B().Lindex().Key(s.Key()+":log").Index(0).Build()).AsInt64()
	require.NoError(t, err)
	assert.Equal(t, int64(101), first, "the oldest entries go first")
	accepted, stale, err := s.Audit(t.Context())
	require.NoError(t, err)
	assert.Equal(t, 1000, accepted)
	assert.Zero(t, stale)
}

// TestWithLogLimit: the log keeps the last n tokens, or none with n = 0;
// the fence itself is the same.
func TestWithLogLimit(t *testing.T) {
	rc := clients(t)["standalone"]
	for _, limit := range []int{3, 0, -1} {
		t.Run(fmt.Sprint(limit), func(t *testing.T) {
			s := fenced.New(rc, fmt.Sprintf("%s-%d", t.Name(), seq.Add(1)), fenced.WithLogLimit(limit))
			t.Cleanup(func() { require.NoError(t, s.Delete(context.Background())) })
			for tok := int64(1); tok <= 5; tok++ {
				require.NoError(t, s.Write(t.Context(), tok, "v"))
			}
			require.ErrorIs(t, s.Write(t.Context(), 4, "late"), fenced.ErrStale)
			log, err := rc.Do(t.Context(), rc.B().Lrange().Key(s.Key()+":log").Start(0).Stop(-1).Build()).AsIntSlice()
			require.NoError(t, err)
			want := []int64{3, 4, 5}
			if limit <= 0 {
				want = []int64{}
			}
			assert.Equal(t, want, log)
		})
	}
}
