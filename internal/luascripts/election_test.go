package luascripts_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/internal/luascripts"
)

// TestElection: a grant stores the value (the lock hash's field "#val",
// with the lock's lease) and tells the observers; a
// refusal queues and tells nobody; a resignation that wakes a campaigner
// leaves the announcement to its grant, one that wakes nobody announces
// "no leader", and a retried resignation never deletes the next leader's
// value.
func TestElection(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			c := standaloneClient(t)
			wake := luascripts.Wake{Sharded: mode.sharded}
			k := luascripts.NewElectionKeys(newKeys(t, c))
			observers := listener{c: c, sharded: mode.sharded, inbox: k.Observers,
				msgs: subscribe(t, []string{standaloneAddr}, mode.sharded, k.Observers)}
			elect := func(owner, client, value string) luascripts.AcquireReply {
				t.Helper()
				r, err := luascripts.RunElect(t.Context(), c, k,
					luascripts.AcquireArgs{Owner: owner, Lease: lease, Client: client, Waiter: true, About: `{"id":"` + client + `"}`, Wake: wake}, value)
				require.NoError(t, err)
				return r
			}
			resign := func(owner string, retry bool) luascripts.ReleaseReply {
				t.Helper()
				r, err := luascripts.RunResign(t.Context(), c, k, luascripts.ReleaseArgs{Owner: owner, Count: 1, Wake: wake, Retry: retry, Heir: "ignored"})
				require.NoError(t, err)
				return r
			}
			read := func() luascripts.Leader {
				t.Helper()
				l, err := luascripts.ReadLeader(t.Context(), c, k)
				require.NoError(t, err)
				return l
			}

			assert.Equal(t, luascripts.Leader{PTTL: -2e6}, read(), "nobody leads yet")
			a := elect("A:1", "A", "alpha|one")
			require.True(t, a.Acquired)
			observers.expect(t, "all")
			l := read()
			assert.Equal(t, "alpha|one", l.Value, "a value may hold the separator")
			assert.Equal(t, a.Token, l.Record.Token)
			assert.Equal(t, "A:1", l.Record.Owner)
			assert.Positive(t, l.PTTL)
			v, err := c.Do(t.Context(), c.B().Hget().Key(k.Lock).Field("#val").Build()).ToString()
			require.NoError(t, err)
			assert.Equal(t, "alpha|one", v, "the value is a field of the lock hash")

			// B campaigns (queued), C too: refusals announce nothing.
			b := listen(t, c, []string{standaloneAddr}, mode.sharded, k.Keys, "B")
			require.False(t, elect("B:1", "B", "beta").Acquired)
			require.False(t, elect("C:1", "C", "gamma").Acquired)
			observers.quiet(t)

			// A resigns: B, the oldest campaigner, is woken; the heir asked
			// for is ignored, and B's grant will be the announcement.
			assert.Equal(t, luascripts.ReleaseReply{Woken: 1}, resign("A:1", false))
			b.woken(t)
			observers.quiet(t)
			assert.Equal(t, luascripts.Leader{PTTL: -2e6}, read())
			bt := elect("B:2", "B", "beta")
			require.True(t, bt.Acquired, "B is queued first")
			assert.Greater(t, bt.Token, a.Token)
			observers.expect(t, "all")

			// A's release sent again after B's grant changes nothing of B's.
			resign("A:1", true)
			assert.Equal(t, "beta", read().Value)
			observers.quiet(t)

			// B resigns with C queued but not listening: nobody takes over,
			// and the observers hear of it.
			assert.Equal(t, luascripts.ReleaseReply{}, resign("B:2", false))
			observers.expect(t, "all")
			assert.Equal(t, luascripts.Leader{PTTL: -2e6}, read())
			n, err := c.Do(t.Context(), c.B().Exists().Key(k.Lock).Build()).AsInt64()
			require.NoError(t, err)
			assert.Zero(t, n, "the value, a field of the lock hash, went with the lock")

			// A Mutex holder of the same name leads without a value.
			take(t, c, k.Keys, "M")
			assert.Equal(t, "", read().Value)
			assert.Equal(t, "M", read().Record.Owner)
		})
	}
}
