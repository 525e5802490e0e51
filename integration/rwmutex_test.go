package integration

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/rlock"
)

// TestRWMutexExclusion: readers share, a writer excludes readers and other
// writers, across two clients and many goroutines sharing handles.
func TestRWMutexExclusion(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		name := lockName(t)
		handles := []*rlock.RWMutex{
			lockClient(t, tp, rlock.Options{}).RWMutex(name),
			lockClient(t, tp, rlock.Options{}).RWMutex(name),
		}
		// Readers share: both clients hold a read hold at once.
		r0, err := handles[0].RLock(ctx)
		require.NoError(t, err)
		r1, ok, err := handles[1].TryRLock(ctx)
		require.NoError(t, err)
		require.True(t, ok, "a second reader was refused")
		require.NoError(t, handles[0].RUnlock(r0))
		require.NoError(t, handles[1].RUnlock(r1))

		var readers, writers atomic.Int64
		var wg sync.WaitGroup
		for g := range 8 {
			rw := handles[g%2]
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 40 {
					if (g+i)%5 == 0 {
						wctx, err := rw.Lock(ctx)
						require.NoError(t, err)
						require.Equal(t, int64(1), writers.Add(1), "two writers at once")
						require.Zero(t, readers.Load(), "a reader while a writer holds")
						writers.Add(-1)
						require.NoError(t, rw.Unlock(wctx))
						continue
					}
					rctx, err := rw.RLock(ctx)
					require.NoError(t, err)
					readers.Add(1)
					require.Zero(t, writers.Load(), "a writer while a reader holds")
					readers.Add(-1)
					require.NoError(t, rw.RUnlock(rctx))
				}
			}()
		}
		wg.Wait()
		requireNoLeftovers(t, tp, name)
	})
}

// TestRWMutexReentryAndDowngrade: a reader re-enters, a writer re-enters
// and reads, keeps its read hold after the write Unlock (downgrade), and a
// reader asking for the write lock gets ErrUpgrade at once.
func TestRWMutexReentryAndDowngrade(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx := context.Background()
		name := lockName(t)
		rw := lockClient(t, tp, rlock.Options{}).RWMutex(name)
		other := lockClient(t, tp, rlock.Options{}).RWMutex(name)

		r1, err := rw.RLock(ctx)
		require.NoError(t, err)
		r2, err := rw.RLock(r1)
		require.NoError(t, err, "a reader re-enters")
		_, err = rw.Lock(r2)
		require.ErrorIs(t, err, rlock.ErrUpgrade)
		_, ok, err := other.TryLock(ctx)
		require.NoError(t, err)
		require.False(t, ok, "a writer got in beside a reader")
		require.NoError(t, rw.RUnlock(r2))
		require.NoError(t, rw.RUnlock(r1))
		require.ErrorIs(t, rw.RUnlock(r1), rlock.ErrNotHeld, "a second RUnlock of a level")

		w1, err := rw.Lock(ctx)
		require.NoError(t, err)
		w2, err := rw.Lock(w1)
		require.NoError(t, err, "a writer re-enters")
		tok1, err := rw.Token(w1)
		require.NoError(t, err)
		tok2, err := rw.Token(w2)
		require.NoError(t, err)
		require.Equal(t, tok1, tok2, "re-entries share the grant's token")
		rd, err := rw.RLock(w2)
		require.NoError(t, err, "a writer may read")
		require.NoError(t, rw.Unlock(w2))
		_, ok, err = other.TryRLock(ctx)
		require.NoError(t, err)
		require.False(t, ok, "a reader got in while the write hold had a level left")
		require.NoError(t, rw.Unlock(w1))

		// Downgraded: other readers share, writers wait.
		r3, ok, err := other.TryRLock(ctx)
		require.NoError(t, err)
		require.True(t, ok, "the downgrade kept readers out")
		_, ok, err = other.TryLock(ctx)
		require.NoError(t, err)
		require.False(t, ok, "a writer got in beside the downgraded reader")
		require.NoError(t, other.RUnlock(r3))
		// Checked after those round trips: a read hold tied to the write
		// hold's contexts would have ended by now.
		require.NoError(t, rd.Err(), "the downgraded read hold ended with the write Unlock")
		require.NoError(t, rw.RUnlock(rd))
		w3, ok, err := other.TryLock(ctx)
		require.NoError(t, err)
		require.True(t, ok)
		tok3, err := other.Token(w3)
		require.NoError(t, err)
		require.Greater(t, tok3, tok1, "tokens rise from grant to grant")
		require.NoError(t, other.Unlock(w3))
		requireNoLeftovers(t, tp, name)
	})
}

// TestRWMutexWriterPreferred: once a writer waits, a new reader queues
// behind it; the writer gets the lock when the readers before it leave,
// and the reader after the writer's Unlock.
func TestRWMutexWriterPreferred(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		name := lockName(t)
		att := newAttempts()
		a := lockClient(t, tp, rlock.Options{}).RWMutex(name)
		w := lockClient(t, tp, att.options(rlock.Options{})).RWMutex(name)
		r := lockClient(t, tp, rlock.Options{}).RWMutex(name)

		r1, err := a.RLock(ctx)
		require.NoError(t, err)
		got := make(chan context.Context, 1)
		reached := att.reached(name, 2) // the writer's plain try and its queued one
		go func() {
			wctx, err := w.Lock(ctx)
			if err == nil {
				got <- wctx
			}
		}()
		await(t, reached, 10*time.Second, "the writer queued")
		_, ok, err := r.TryRLock(ctx)
		require.NoError(t, err)
		require.False(t, ok, "a new reader overtook the waiting writer")
		readerDone := make(chan context.Context, 1)
		go func() {
			rctx, err := r.RLock(ctx)
			if err == nil {
				readerDone <- rctx
			}
		}()
		require.NoError(t, a.RUnlock(r1))
		var wctx context.Context
		select {
		case wctx = <-got:
		case <-ctx.Done():
			t.Fatal("the writer was not woken by the last read release")
		}
		select {
		case <-readerDone:
			t.Fatal("a reader got in while the writer held")
		default:
		}
		require.NoError(t, w.Unlock(wctx))
		select {
		case rctx := <-readerDone:
			require.NoError(t, r.RUnlock(rctx))
		case <-ctx.Done():
			t.Fatal("the queued reader was not woken by the write release")
		}
		requireNoLeftovers(t, tp, name)
	})
}

// TestRWMutexDeadReaderLapsesAlone: a reader whose client stops renewing
// loses its hold within its lease while another reader's, renewed, stays;
// a writer then gets in once the live reader leaves.
func TestRWMutexDeadReaderLapsesAlone(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		name := lockName(t)
		opts := rlock.Options{WatchdogTimeout: time.Second, WatchdogInterval: 200 * time.Millisecond}
		dead := lockClient(t, tp, opts)
		live := lockClient(t, tp, opts).RWMutex(name)
		w := lockClient(t, tp, opts).RWMutex(name)

		dctx, err := dead.RWMutex(name).RLock(ctx)
		require.NoError(t, err)
		keepHeld(t, dctx) // its lease must lapse, not be released
		rl, err := live.RLock(ctx)
		require.NoError(t, err)
		require.NoError(t, dead.Close()) // stops its watchdog: its read hold lapses
		wdone := make(chan context.Context, 1)
		go func() {
			wctx, err := w.Lock(ctx)
			if err == nil {
				wdone <- wctx
			}
		}()
		// Past the dead reader's lease, the live reader still holds.
		awaitCond(t, 10*time.Second, "the dead reader's hold lapsed", func() bool {
			return !leaseLive(t, redisClient(t, tp), "latchkey:{"+name+"}:rw:rd:e", dead.ID()+":1")
		})
		require.NoError(t, rl.Err(), "the live reader lost its hold with the dead one")
		select {
		case <-wdone:
			t.Fatal("the writer got in beside the live reader")
		default:
		}
		require.NoError(t, live.RUnlock(rl))
		select {
		case wctx := <-wdone:
			require.NoError(t, w.Unlock(wctx))
		case <-ctx.Done():
			t.Fatal("the writer never got in")
		}
		requireNoLeftovers(t, tp, name)
	})
}

// TestRWMutexLossAndClose: a lost write hold ends its context with
// ErrLockLost; Close ends a read hold's context with ErrClosed and makes a
// waiting reader return ErrClosed.
func TestRWMutexLossAndClose(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx := context.Background()
		name := lockName(t)
		c := lockClient(t, tp, rlock.Options{})
		rw := c.RWMutex(name)
		wctx, err := rw.Lock(ctx, rlock.WithLease(300*time.Millisecond))
		require.NoError(t, err)
		requireLost(t, wctx, 5*time.Second, "the leased write hold")
		require.ErrorIs(t, rw.Unlock(wctx), rlock.ErrNotHeld)

		rctx, err := rw.RLock(ctx)
		require.NoError(t, err)
		holder := lockClient(t, tp, rlock.Options{}).RWMutex(name)
		waiter := make(chan error, 1)
		att := newAttempts()
		c2 := lockClient(t, tp, att.options(rlock.Options{}))
		reached := att.reached(name, 2)
		hctx, err := holder.RLock(ctx)
		require.NoError(t, err)
		keepHeld(t, hctx)
		go func() {
			_, err := c2.RWMutex(name).Lock(ctx)
			waiter <- err
		}()
		await(t, reached, 10*time.Second, "the writer queued")
		require.NoError(t, c2.Close())
		require.ErrorIs(t, recvErr(t, waiter, 10*time.Second, "the waiting writer"), rlock.ErrClosed)
		require.NoError(t, c.Close())
		require.ErrorIs(t, context.Cause(rctx), rlock.ErrClosed)
		require.NoError(t, rw.RUnlock(rctx), "RUnlock works after Close")
		require.NoError(t, holder.RUnlock(hctx))
		requireNoLeftovers(t, tp, name)
	})
}

// TestRWMutexBadInput: typed errors before any I/O.
func TestRWMutexBadInput(t *testing.T) {
	tp := topologies()[0]
	c := lockClient(t, tp, rlock.Options{})
	ctx := context.Background()
	_, err := c.RWMutex("").RLock(ctx)
	require.ErrorIs(t, err, rlock.ErrInvalidName)
	_, err = c.RWMutex("a{b").Lock(ctx)
	require.ErrorIs(t, err, rlock.ErrInvalidName)
	//nolint:staticcheck // a nil context on purpose
	_, err = c.RWMutex("x").RLock(nil)
	require.ErrorIs(t, err, rlock.ErrInvalidArgument)
	_, err = c.RWMutex("x").Lock(ctx, rlock.WithWait(time.Second))
	require.ErrorIs(t, err, rlock.ErrInvalidArgument)
	_, _, err = c.RWMutex("x").TryRLock(ctx, rlock.WithLease(-time.Second))
	require.ErrorIs(t, err, rlock.ErrInvalidArgument)
	require.ErrorIs(t, c.RWMutex("x").RUnlock(ctx), rlock.ErrNotHeld)
	require.ErrorIs(t, c.RWMutex("x").Unlock(ctx), rlock.ErrNotHeld)
	_, err = c.RWMutex("x").Token(ctx)
	require.ErrorIs(t, err, rlock.ErrNotHeld)
}

// requireNoLeftovers checks that no key of the locks (and other
// primitives) called names is left in Redis but their fencing counters,
// which stay by design. Channels are not checked here: a client that
// waited keeps its inbox subscribed for the hub's linger
// (notify.DefaultLinger) so that its next wait costs no SUBSCRIBE; the
// notify tests show a linger ends, and checkServersClean that no channel
// outlives the clients, which every test closes.
func requireNoLeftovers(t *testing.T, tp topology, names ...string) {
	t.Helper()
	admins := nodeClients(t, tp.addrs)
	rc := redisClient(t, tp)
	for _, name := range names {
		base := "latchkey:{" + name + "}" // a Mutex's own key, and the start of every other
		awaitCond(t, 5*time.Second, "no keys of "+name+" left", func() bool {
			left, err := leftovers(context.Background(), admins, base)
			require.NoError(t, err)
			return !slices.ContainsFunc(left, func(l string) bool { return strings.HasPrefix(l, "key ") }) && !exists(t, rc, base)
		})
	}
}

// TestRLockerAndWriteLocker: a shared RLocker lets goroutines read at once
// while the write side's Locker excludes them; and misuse panics.
func TestRLockerAndWriteLocker(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		name := lockName(t)
		rw := lockClient(t, tp, rlock.Options{}).RWMutex(name)
		rl := rlock.RLocker(ctx, rw)
		wl := rlock.Locker(ctx, lockClient(t, tp, rlock.Options{}).RWMutex(name))

		// Two readers through one RLocker at once.
		rl.Lock()
		rl.Lock()
		_, ok, err := lockClient(t, tp, rlock.Options{}).RWMutex(name).TryLock(ctx)
		require.NoError(t, err)
		require.False(t, ok, "a writer got in beside the RLocker's readers")
		rl.Unlock()
		rl.Unlock()
		require.Panics(t, rl.Unlock, "an Unlock of an unlocked RLocker")

		var readers, writers, bad atomic.Int32
		var wg sync.WaitGroup
		for g := range 6 {
			wg.Go(func() {
				for range 15 {
					if g == 0 {
						wl.Lock()
						if writers.Add(1) != 1 || readers.Load() != 0 {
							bad.Add(1)
						}
						writers.Add(-1)
						wl.Unlock()
						continue
					}
					rl.Lock()
					readers.Add(1)
					if writers.Load() != 0 {
						bad.Add(1)
					}
					readers.Add(-1)
					rl.Unlock()
				}
			})
		}
		wg.Wait()
		require.Zero(t, bad.Load(), "a reader and a writer overlapped")
		requireNoLeftovers(t, tp, name)
	})
}

// TestSpinRWMutex: the spin variant excludes like the notified one, and
// interoperates with it on the same name.
func TestSpinRWMutex(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		name := lockName(t)
		spin := lockClient(t, tp, rlock.Options{}).SpinRWMutex(name)
		notified := lockClient(t, tp, rlock.Options{}).RWMutex(name)
		var inside, bad atomic.Int32
		var wg sync.WaitGroup
		for g := range 4 {
			rw := spin
			if g%2 == 1 {
				rw = notified
			}
			wg.Go(func() {
				for range 20 {
					wctx, err := rw.Lock(ctx)
					if !assert.NoError(t, err) {
						return
					}
					if inside.Add(1) != 1 {
						bad.Add(1)
					}
					inside.Add(-1)
					assert.NoError(t, rw.Unlock(wctx))
				}
			})
		}
		wg.Wait()
		require.Zero(t, bad.Load(), "two writers overlapped")
		r1, err := spin.RLock(ctx)
		require.NoError(t, err)
		r2, ok, err := notified.TryRLock(ctx)
		require.NoError(t, err)
		require.True(t, ok, "a notified reader was refused beside a spinning one")
		require.NoError(t, spin.RUnlock(r1))
		require.NoError(t, notified.RUnlock(r2))
		requireNoLeftovers(t, tp, name)
	})
}

// TestRWMutexDeadQueuedWriter: a writer's client that queued and went away
// without leaving (its process died) does not hold back readers: the first
// reader's try prods the queue, which drops the client nobody listens for,
// and then admits the reader (before TestRegressRWDeadWriterFirst's fix it
// refused it, with no bound on its wait).
func TestRWMutexDeadQueuedWriter(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		name := lockName(t)
		rc := redisClient(t, tp)
		qw := "latchkey:{" + name + "}:rw:qw"
		require.NoError(t, rc.Do(ctx, rc.B().Zadd().Key(qw).ScoreMember().ScoreMember(1, "dead-client").Build()).Error())
		require.NoError(t, rc.Do(ctx, rc.B().Pexpire().Key(qw).Milliseconds(60000).Build()).Error())
		rw := lockClient(t, tp, rlock.Options{}).RWMutex(name)
		rctx, ok, err := rw.TryRLock(ctx)
		require.NoError(t, err)
		require.True(t, ok, "the dead writer held readers back")
		require.NoError(t, rw.RUnlock(rctx))
		requireNoLeftovers(t, tp, name)
	})
}

// TestRWMutexTryWaitLeaves: a TryLock whose wait runs out takes its client
// off the queue, so that readers are no longer held back by it.
func TestRWMutexTryWaitLeaves(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx := context.Background()
		name := lockName(t)
		a := lockClient(t, tp, rlock.Options{}).RWMutex(name)
		b := lockClient(t, tp, rlock.Options{}).RWMutex(name)
		r1, err := a.RLock(ctx)
		require.NoError(t, err)
		_, ok, err := b.TryLock(ctx, rlock.WithWait(100*time.Millisecond))
		require.NoError(t, err)
		require.False(t, ok)
		r2, ok, err := a.TryRLock(ctx)
		require.NoError(t, err)
		require.True(t, ok, "the writer that gave up still held readers back")
		require.NoError(t, a.RUnlock(r2))
		require.NoError(t, a.RUnlock(r1))
		requireNoLeftovers(t, tp, name)
	})
}

// TestRWMutexLostReader: a reader whose hold is gone learns it at its next
// re-entry (ErrLockLost); its RUnlock reports ErrNotHeld; Token of a write
// hold survives its loss but not its release.
func TestRWMutexLostReader(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx := context.Background()
		name := lockName(t)
		rc := redisClient(t, tp)
		c := lockClient(t, tp, rlock.Options{})
		rw := c.RWMutex(name)
		rctx, err := rw.RLock(ctx)
		require.NoError(t, err)
		// The reader's lease runs out.
		readers, err := rc.Do(ctx, rc.B().Hkeys().Key("latchkey:{"+name+"}:rw:rd").Build()).AsStrSlice()
		require.NoError(t, err)
		require.Len(t, readers, 1)
		require.True(t, endLease(t, rc, "latchkey:{"+name+"}:rw:rd:e", readers[0]))
		_, err = rw.RLock(rctx)
		require.ErrorIs(t, err, rlock.ErrLockLost)
		require.ErrorIs(t, context.Cause(rctx), rlock.ErrLockLost)
		require.ErrorIs(t, rw.RUnlock(rctx), rlock.ErrNotHeld)

		wctx, err := rw.Lock(ctx, rlock.WithLease(200*time.Millisecond))
		require.NoError(t, err)
		tok, err := rw.Token(wctx)
		require.NoError(t, err)
		requireLost(t, wctx, 5*time.Second, "the leased write hold")
		lostTok, err := rw.Token(wctx)
		require.NoError(t, err, "a lost write hold keeps its token")
		require.Equal(t, tok, lostTok)
		w2, err := rw.Lock(ctx)
		require.NoError(t, err)
		require.NoError(t, rw.Unlock(w2))
		_, err = rw.Token(w2)
		require.ErrorIs(t, err, rlock.ErrNotHeld, "Token of a released hold")
		requireNoLeftovers(t, tp, name)
	})
}
