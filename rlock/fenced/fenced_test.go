package fenced_test

import (
	"context"
	"errors"
	"fmt"
	"math"
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

// newStore returns a Store of a name no other test uses, deleted when the
// test ends.
func newStore(t *testing.T, rc rueidis.Client, opts ...fenced.Option) *fenced.Store {
	s := fenced.New(rc, fmt.Sprintf("%s-%d", t.Name(), seq.Add(1)), opts...)
	t.Cleanup(func() { require.NoError(t, s.Delete(context.Background())) })
	return s
}

func TestStoreRejectsLowerTokens(t *testing.T) {
	for topo, rc := range clients(t) {
		t.Run(topo, func(t *testing.T) {
			s := newStore(t, rc)

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
			s := newStore(t, rc)
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
	s := newStore(t, rc)
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
			s := newStore(t, rc, fenced.WithLogLimit(limit))
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

// TestRegressBracedNames: a name with a brace broke the keys' shared hash
// tag ("}x" gave fenced:{}x} and fenced:{}x}:log, two slots), and Write and
// Delete panicked on Redis Cluster. Such names are refused before any I/O.
func TestRegressBracedNames(t *testing.T) {
	for topo, rc := range clients(t) {
		t.Run(topo, func(t *testing.T) {
			for _, name := range []string{"}x", "{x", "x}", "{}", "a{b}c"} {
				s := fenced.New(rc, name)
				for method, call := range map[string]func() error{
					"Write":  func() error { return s.Write(t.Context(), 1, "v") },
					"Claim":  func() error { _, err := s.Claim(t.Context(), 1); return err },
					"Read":   func() error { _, _, err := s.Read(t.Context()); return err },
					"Audit":  func() error { _, _, err := s.Audit(t.Context()); return err },
					"Delete": func() error { return s.Delete(t.Context()) },
				} {
					var err error
					if assert.NotPanics(t, func() { err = call() }, "%s on %q", method, name) {
						assert.ErrorIs(t, err, fenced.ErrInvalidName, "%s on %q", method, name)
					}
				}
			}
		})
	}
}

// TestRegressHugeLogLimit: write.lua passed -limit to LTRIM as a Lua
// number, which Redis formats as a float from 1e17 up and LTRIM rejects
// after HSET and RPUSH have run: Write stored the value but failed.
func TestRegressHugeLogLimit(t *testing.T) {
	rc := clients(t)["standalone"]
	for _, limit := range []int{1e17, math.MaxInt} {
		t.Run(fmt.Sprint(limit), func(t *testing.T) {
			s := newStore(t, rc, fenced.WithLogLimit(limit))
			for tok := int64(1); tok <= 3; tok++ {
				require.NoError(t, s.Write(t.Context(), tok, "v"))
			}
			accepted, stale, err := s.Audit(t.Context())
			require.NoError(t, err)
			assert.Equal(t, 3, accepted, "a huge limit keeps every token")
			assert.Zero(t, stale)
		})
	}
}

// TestRegressTokensAboveMaxToken: the scripts compare tokens as Lua numbers
// (doubles), so above 2^53 a lower token could compare equal to the highest
// and be accepted. Such tokens are refused before any I/O; MaxToken itself
// is still exact.
func TestRegressTokensAboveMaxToken(t *testing.T) {
	for topo, rc := range clients(t) {
		t.Run(topo, func(t *testing.T) {
			s := newStore(t, rc)
			ctx := t.Context()
			const hi, lo = 1<<53 + 1, 1 << 53

			hiErr := s.Write(ctx, hi, "hi")
			_, claimErr := s.Claim(ctx, hi)
			require.Error(t, s.Write(ctx, lo, "lo"), "token %d after %d", lo, hi)
			assert.ErrorIs(t, hiErr, fenced.ErrInvalidToken)
			assert.ErrorIs(t, claimErr, fenced.ErrInvalidToken)
			_, tok, err := s.Read(ctx)
			require.NoError(t, err)
			assert.Zero(t, tok, "nothing reached Redis")

			require.NoError(t, s.Write(ctx, fenced.MaxToken, "max"))
			require.ErrorIs(t, s.Write(ctx, fenced.MaxToken-1, "late"), fenced.ErrStale)
			_, err = s.Claim(ctx, fenced.MaxToken-1)
			require.ErrorIs(t, err, fenced.ErrStale)
		})
	}
}
