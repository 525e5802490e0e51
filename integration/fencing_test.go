package integration

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/rlock"
	"github.com/latchkey/latchkey/rlock/fenced"
)

// TestFencingToken: every grant gets a higher token, across clients and
// variants; re-entries share their grant's token; a handle without a hold
// has none; and the fenced store turns the old token away.
func TestFencingToken(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx := context.Background()
		a := lockClient(t, tp, rlock.Options{})
		b := lockClient(t, tp, rlock.Options{})
		name := lockName(t)
		store := fenced.New(redisClient(t, tp), name)
		t.Cleanup(func() { require.NoError(t, store.Delete(context.Background())) })

		var last int64
		grants := []struct {
			c *rlock.Client
			m *rlock.Mutex
		}{{a, a.Mutex(name)}, {b, b.SpinMutex(name)}, {a, a.SpinMutex(name)}, {b, b.Mutex(name)}}
		for i, g := range grants {
			m := g.m
			_, err := m.Token(ctx)
			require.ErrorIs(t, err, rlock.ErrNotHeld, "grant %d: no hold yet", i)

			lctx := mustLock(t, ctx, m)
			tok, err := m.Token(lctx)
			require.NoError(t, err)
			require.Greater(t, tok, last, "grant %d", i)
			require.NoError(t, store.Write(lctx, tok, "v"))

			// Re-entry through another handle with the lock context.
			inner := mustLock(t, lctx, g.c.Mutex(name))
			same, err := m.Token(inner)
			require.NoError(t, err)
			require.Equal(t, tok, same, "grant %d: re-entry keeps the token", i)
			require.NoError(t, m.Unlock(inner))
			require.NoError(t, m.Unlock(lctx))
			_, err = m.Token(lctx)
			require.ErrorIs(t, err, rlock.ErrNotHeld, "grant %d: released", i)
			last = tok
		}
		require.ErrorIs(t, store.Write(ctx, last-1, "late"), fenced.ErrStale)
		accepted, stale, err := store.Audit(ctx)
		require.NoError(t, err)
		require.Equal(t, 4, accepted)
		require.Zero(t, stale)
	})
}
