package integration

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/rlock"
)

// TestWrongTypeKeyIsErrWrongType: where a key of a lock holds another type
// (an application's key under latchkey's prefix), every call that touches
// it returns at once an error matching ErrWrongType that wraps Redis' and
// says what to check, having written nothing, and List shows the lock as
// damaged, whichever key of the lock it is, as ErrWrongType's and
// LockInfo.Damaged's docs and docs/operations.md say. Before, the calls
// returned Redis' bare WRONGTYPE (errors.Is false, no hint); List, whose
// SCAN kept only hashes, never found the key; and a read lock or a
// Semaphore's grant whose lease set or records key was of another type
// left its count behind, without a lease or an expiry.
func TestWrongTypeKeyIsErrWrongType(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		c := lockClient(t, tp, rlock.Options{})
		rc := redisClient(t, tp)
		var name string // each case's own lock: a case that failed leaves nothing in the others' way
		lockErr := func(_ context.Context, err error) error { return err }
		tryErr := func(_ context.Context, _ bool, err error) error { return err }
		for _, tc := range []struct {
			call   string
			suffix string     // the key of the lock set to a string: base + suffix
			kind   rlock.Kind // how List shows it; "" for a key List does not look at
			do     func(ctx context.Context) error
		}{
			{"Mutex.Lock", "", rlock.KindMutex, func(ctx context.Context) error { return lockErr(c.Mutex(name).Lock(ctx)) }},
			{"Mutex.TryLock", "", rlock.KindMutex, func(ctx context.Context) error { return tryErr(c.Mutex(name).TryLock(ctx)) }},
			{"SpinMutex.Lock", "", rlock.KindMutex, func(ctx context.Context) error { return lockErr(c.SpinMutex(name).Lock(ctx)) }},
			{"MultiMutex.Lock", "", rlock.KindMutex, func(ctx context.Context) error { return lockErr(c.MultiMutex(name).Lock(ctx)) }},
			{"Election.Campaign", "", rlock.KindMutex, func(ctx context.Context) error { return lockErr(c.Election(name).Campaign(ctx, "v")) }},
			{"Election.Leader", "", rlock.KindMutex, func(ctx context.Context) error {
				_, err := c.Election(name).Leader(ctx)
				return err
			}},
			{"RWMutex.Lock", ":rw:w", rlock.KindRWMutex, func(ctx context.Context) error { return lockErr(c.RWMutex(name).Lock(ctx)) }},
			{"RWMutex.RLock", ":rw:rd", rlock.KindRWMutex, func(ctx context.Context) error { return lockErr(c.RWMutex(name).RLock(ctx)) }},
			{"Semaphore.Acquire", ":sem:h", rlock.KindSemaphore, func(ctx context.Context) error { return lockErr(c.Semaphore(name, 2).Acquire(ctx, 1)) }},
			{"Semaphore.TryAcquire", ":sem:h", rlock.KindSemaphore, func(ctx context.Context) error { return tryErr(c.Semaphore(name, 2).TryAcquire(ctx, 1)) }},
			{"Semaphore.Available", ":sem:h", rlock.KindSemaphore, func(ctx context.Context) error {
				_, err := c.Semaphore(name, 2).Available(ctx)
				return err
			}},
			// Any other key of the lock (but its fencing counter) too.
			{"Mutex.Lock/queue", ":q", rlock.KindMutex, func(ctx context.Context) error { return lockErr(c.Mutex(name).Lock(ctx)) }},
			{"RWMutex.RLock/leases", ":rw:rd:e", rlock.KindRWMutex, func(ctx context.Context) error { return lockErr(c.RWMutex(name).RLock(ctx)) }},
			{"RWMutex.Lock/queue", ":rw:qw", rlock.KindRWMutex, func(ctx context.Context) error { return lockErr(c.RWMutex(name).Lock(ctx)) }},
			{"Semaphore.Acquire/records", ":sem:h:rec", rlock.KindSemaphore, func(ctx context.Context) error { return lockErr(c.Semaphore(name, 2).Acquire(ctx, 1)) }},
			{"Semaphore.Acquire/wants", ":sem:qn", rlock.KindSemaphore, func(ctx context.Context) error { return lockErr(c.Semaphore(name, 2).Acquire(ctx, 1)) }},
			{"CountDownLatch.TrySetCount", ":latch", "", func(ctx context.Context) error {
				_, err := c.CountDownLatch(name).TrySetCount(ctx, 1)
				return err
			}},
			{"CountDownLatch.Count", ":latch", "", func(ctx context.Context) error {
				_, err := c.CountDownLatch(name).Count(ctx)
				return err
			}},
			{"CountDownLatch.Await", ":latch", "", func(ctx context.Context) error { return c.CountDownLatch(name).Await(ctx) }},
		} {
			t.Run(tc.call, func(t *testing.T) {
				name = lockName(t)
				key := c.Mutex(name).Key() + tc.suffix
				require.NoError(t, rc.Do(ctx, rc.B().Set().Key(key).Value("the application's").Build()).Error())
				defer func() {
					require.NoError(t, rc.Do(ctx, rc.B().Del().Key(key).Build()).Error())
					requireNoLeftovers(t, tp, name) // the script stopped before it wrote anything
				}()
				cctx, cancel := context.WithTimeout(ctx, 10*time.Second) // a retried WRONGTYPE would run to it
				defer cancel()
				err := tc.do(cctx)
				require.ErrorIs(t, err, rlock.ErrWrongType, "%s on a string at %s", tc.call, key)
				assert.NotErrorIs(t, err, context.DeadlineExceeded, "retried, where a WRONGTYPE is for good")
				var re *rueidis.RedisError
				assert.True(t, errors.As(err, &re), "Redis' error is kept")
				assert.Contains(t, err.Error(), "Options.Prefix", "the hint says what to check")
				if tc.kind == "" {
					return
				}
				found, err := c.List(ctx, name)
				require.NoError(t, err)
				require.Len(t, found, 1, "List does not show the damaged lock: %+v", found)
				assert.Equal(t, name, found[0].Name)
				assert.Equal(t, tc.kind, found[0].Kind)
				assert.Contains(t, found[0].Damaged, "another type")
			})
		}

		// Refused while another holds, a client queues, and writes its want
		// beside its queue entry: a wants key of another type stops it
		// before either.
		t.Run("Semaphore.Acquire/wants, held", func(t *testing.T) {
			s := c.Semaphore(lockName(t), 1)
			other := lockClient(t, tp, rlock.Options{}).Semaphore(s.Name(), 1)
			pctx, err := other.Acquire(ctx, 1)
			require.NoError(t, err)
			key := c.Mutex(s.Name()).Key() + ":sem:qn"
			require.NoError(t, rc.Do(ctx, rc.B().Set().Key(key).Value("the application's").Build()).Error())
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			_, err = s.Acquire(cctx, 1)
			require.ErrorIs(t, err, rlock.ErrWrongType)
			require.NoError(t, rc.Do(ctx, rc.B().Del().Key(key).Build()).Error())
			assert.False(t, exists(t, rc, c.Mutex(s.Name()).Key()+":sem:q"), "queued, with no want")
			require.NoError(t, other.Release(pctx))
			requireNoLeftovers(t, tp, s.Name())
		})

		// A hold whose key was written over: its release says so too.
		t.Run("Mutex.Unlock", func(t *testing.T) {
			m := c.Mutex(lockName(t))
			lctx := mustLock(t, ctx, m, rlock.WithLease(time.Minute))
			require.NoError(t, rc.Do(ctx, rc.B().Set().Key(m.Key()).Value("the application's").Build()).Error())
			err := m.Unlock(lctx)
			require.ErrorIs(t, err, rlock.ErrWrongType)
			assert.Contains(t, err.Error(), "Options.Prefix", "the hint says what to check")
			require.NoError(t, rc.Do(ctx, rc.B().Del().Key(m.Key()).Build()).Error())
			requireNoLeftovers(t, tp, m.Name())
		})
	})
}
