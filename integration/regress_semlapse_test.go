package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/internal/luascripts"
	"github.com/latchkey/latchkey/rlock"
)

// TestRegressSemGrantAfterLapse: a Semaphore grant that takes the place of
// woken clients whose window lapsed wakes the clients behind it that the
// permits left free serve. C's try dropped two frozen woken clients and
// took one permit; the grant woke others only when C had wanted more than
// it took, so D, queued behind C while the holder held every permit, slept
// until the holder's lease end with a permit free.
func TestRegressSemGrantAfterLapse(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		const size, lease = 2, 8 * time.Second
		ctx := context.Background()
		name := lockName(t)
		rc := redisClient(t, tp)
		keys := semKeysOf(name)
		wake := luascripts.Wake{Sharded: tp.cluster, Window: rlock.DefaultHandoffWindow}
		holder := lockClient(t, tp, rlock.Options{})
		hctx, err := holder.Semaphore(name, size).Acquire(ctx, size, rlock.WithLease(lease))
		require.NoError(t, err)

		// Two frozen clients queued first: still subscribed, they never come.
		var frozen []*rawSubscriber
		for _, id := range []string{"frozen-a", "frozen-b"} {
			frozen = append(frozen, subscribeRaw(t, tp, keys.Inbox(id)))
			r, err := luascripts.RunSemAcquire(ctx, rc, keys, luascripts.AcquireArgs{
				Owner: id + ":1", Lease: time.Minute, Client: id, Waiter: true, Wake: wake}, 1, size)
			require.NoError(t, err)
			require.False(t, r.Acquired)
		}
		// C, then D, each queued once the one before waits.
		type grant struct {
			at   time.Time
			s    *rlock.Semaphore
			pctx context.Context
		}
		take := func(what string) <-chan grant {
			att := newAttempts()
			s := lockClient(t, tp, att.options(rlock.Options{})).Semaphore(name, size)
			ch := make(chan grant, 1)
			go func() {
				pctx, err := s.Acquire(ctx, 1)
				if err == nil {
					ch <- grant{time.Now(), s, pctx}
				}
			}()
			await(t, att.reached(waitKey(name), 1), 10*time.Second, what+" to wait")
			return ch
		}
		cDone := take("C")
		dDone := take("D")
		require.Len(t, queueMembers(t, rc, keys.Base), 4)

		start := time.Now()
		require.NoError(t, holder.Semaphore(name, size).Release(hctx))
		for _, f := range frozen {
			select {
			case <-f.msgs: // woken; it will never come
			case <-time.After(10 * time.Second):
				t.Fatal("the release did not wake a frozen client")
			}
		}
		var got []grant
		for _, w := range []struct {
			what string
			ch   <-chan grant
		}{{"C", cDone}, {"D", dDone}} {
			what := w.what
			select {
			case g := <-w.ch:
				t.Logf("%s granted %v after the release", what, g.at.Sub(start))
				require.Less(t, g.at.Sub(start), 2*time.Second,
					"%s waited for the holder's lease (%v) with a permit free", what, lease)
				got = append(got, g)
			case <-time.After(2 * lease):
				t.Fatalf("%s never got a permit", what)
			}
		}
		for _, g := range got {
			require.NoError(t, g.s.Release(g.pctx))
		}
		for _, id := range []string{"frozen-a", "frozen-b"} {
			_, err := luascripts.RunSemLeave(ctx, rc, keys, id, size, wake)
			require.NoError(t, err)
		}
		requireNoLeftovers(t, tp, name)
	})
}
