package integration

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/rlock"
)

// order records who acquired, in order, with their fencing tokens.
type order struct {
	mu     sync.Mutex
	who    []string
	tokens []int64
}

func (o *order) lockUnlock(t *testing.T, m *rlock.Mutex, who string) {
	lctx, err := m.Lock(context.Background())
	if err != nil {
		t.Error(err)
		return
	}
	tok, err := m.Token(lctx)
	if err != nil {
		t.Error(err)
	}
	o.mu.Lock()
	o.who = append(o.who, who)
	o.tokens = append(o.tokens, tok)
	o.mu.Unlock()
	if err := m.Unlock(lctx); err != nil {
		t.Error(err)
	}
}

// TestLocalHandover: a release passes the lock straight to a goroutine of
// the same client waiting in its gate, with no acquire attempt at all and a
// new fencing token each time; and after MaxLocalHandovers in a row it
// yields to a waiter of another client.
func TestLocalHandover(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx := context.Background()
		t.Run("chain", func(t *testing.T) {
			name := lockName(t)
			att := newAttempts()
			c := lockClient(t, tp, att.options(rlock.Options{}))
			holder := c.Mutex(name)
			hctx := mustLock(t, ctx, holder)
			first, err := holder.Token(hctx)
			require.NoError(t, err)

			var o order
			var wg sync.WaitGroup
			const waiters = 5
			blockWaiters(t, att, name, waiters, &wg, func() { o.lockUnlock(t, c.Mutex(name), "c") })
			before := att.count(name)
			require.NoError(t, holder.Unlock(hctx))
			wg.Wait()
			require.Len(t, o.tokens, waiters)
			require.Equal(t, before, att.count(name), "handovers need no acquire attempt")
			for i, tok := range o.tokens {
				require.Equal(t, first+int64(i)+1, tok, "handover %d is a new grant", i)
			}
			// The waiters waited in the client's gate, never in Redis: the
			// last release finds nobody queued and frees the lock at once.
			rc := redisClient(t, tp)
			require.False(t, exists(t, rc, holder.Key()), "the last one released the lock")
			require.False(t, exists(t, rc, holder.Key()+":q"), "a gate waiter was queued in Redis, or woken")
		})

		t.Run("yield", func(t *testing.T) {
			name := lockName(t)
			att := newAttempts()
			c := lockClient(t, tp, att.options(rlock.Options{MaxLocalHandovers: 2}))
			holder := c.Mutex(name)
			hctx := mustLock(t, ctx, holder)

			var o order
			var wg sync.WaitGroup
			blockWaiters(t, att, name, 4, &wg, func() { o.lockUnlock(t, c.Mutex(name), "c") })
			datt := newAttempts()
			d := lockClient(t, tp, datt.options(rlock.Options{}))
			blockWaiters(t, datt, name, 1, &wg, func() { o.lockUnlock(t, d.Mutex(name), "d") })

			require.NoError(t, holder.Unlock(hctx))
			wg.Wait()
			// Two handovers in c, then d (queued) gets its turn, then c again.
			require.Equal(t, []string{"c", "c", "d", "c", "c"}, o.who)
			for i := 1; i < len(o.tokens); i++ {
				require.Greater(t, o.tokens[i], o.tokens[i-1])
			}
		})
	})
}
