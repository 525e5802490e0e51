package integration

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/internal/luascripts"
	"github.com/latchkey/latchkey/rlock"
)

// TestRegressAbandonedAcquire (the torture's quiescence flake, seed
// 1795627275179852447): a waiter's acquire is in flight when its context
// ends or its client closes. rueidis returns at once, but sends the queued
// command all the same, and on one of several connections chosen at random,
// so the leave script (or the undo) that followed on another connection
// used to reach Redis first: the late acquire queued the client again after
// it had left, or granted it a hold nobody knew. Here that acquire always
// travels a slow connection and everything else a fast one, so the late
// arrival is certain; after Close no queue entry and no hold may remain.
func TestRegressAbandonedAcquire(t *testing.T) {
	for _, granted := range []bool{false, true} {
		for _, byClose := range []bool{false, true} {
			t.Run(fmt.Sprintf("granted=%v/close=%v", granted, byClose), func(t *testing.T) {
				testAbandonedAcquire(t, granted, byClose)
			})
		}
	}
}

func testAbandonedAcquire(t *testing.T, granted, byClose bool) {
	ctx := context.Background()
	tp := topologies()[0]
	split, rc, name := slowScript(t, luascripts.Acquire)
	key := lockKey(name)

	holder := lockClient(t, tp, rlock.Options{}).Mutex(name)
	hctx := mustLock(t, ctx, holder)
	att := newAttempts()
	waiter, err := rlock.NewClient(split, att.options(rlock.Options{}))
	require.NoError(t, err)
	t.Cleanup(func() { waiter.Close() })
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	got := make(chan error, 1)
	go func() {
		_, err := waiter.Mutex(name).Lock(wctx)
		got <- err
	}()
	await(t, att.reached(waitKey(name), 1), 10*time.Second, "the waiter to queue and wait")
	requireQueued(t, rc, key, waiter.ID())

	// Wake the waiter into its next acquire, which takes the slow way.
	sent := split.divertNext()
	if granted {
		require.NoError(t, holder.Unlock(hctx)) // frees the lock and wakes the waiter
	} else {
		publish(t, rc, tp, key+":ch:"+waiter.ID(), "wake")
	}
	await(t, sent, 10*time.Second, "the waiter's acquire to be sent")

	if byClose {
		require.NoError(t, waiter.Close())
		require.ErrorIs(t, recvErr(t, got, 10*time.Second, "Lock to return"), rlock.ErrClosed)
	} else {
		cancel()
		require.ErrorIs(t, recvErr(t, got, 10*time.Second, "Lock to return"), context.Canceled)
		require.NoError(t, waiter.Close())
	}
	split.wait() // the diverted acquire has run on the server: nothing can land later

	require.False(t, exists(t, rc, key+":q"), "the wait queue outlived the client: %v", queueMembers(t, rc, key))
	if granted {
		require.False(t, exists(t, rc, key), "a hold nobody knows: %v", hgetall(t, rc, key))
		return
	}
	require.Len(t, lockOwners(t, rc, key), 1, "only the holder holds")
	require.NoError(t, holder.Unlock(hctx))
}

// slowScript is the fixture of the abandoned-call tests: a client whose
// diverted calls of s reach standalone Redis 500 ms late (see splitClient),
// the plain client, and a lock name whose keys go when the test fails.
func slowScript(t *testing.T, s *luascripts.Script) (*splitClient, rueidis.Client, string) {
	x, rc := resetFixture(t)
	name := lockName(t)
	cleanupIfFailed(t, rc, lockKey(name))
	slow, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{x.Addr}, DisableCache: true, PipelineMultiplex: -1})
	require.NoError(t, err)
	t.Cleanup(slow.Close)
	x.add(t, toxic{Name: "slow", Type: "latency", Stream: "upstream", Attributes: map[string]int{"latency": 500}})
	return newSplitClient(t, redisClient(t, topologies()[0]), slow, s), rc, name
}

// splitClient is a rueidis client whose one diverted call of a script
// goes to slow, and every other command to fast. As rueidis does, a call
// whose context ends returns at once, and the command it queued is sent
// all the same.
type splitClient struct {
	rueidis.Client // fast
	slow           rueidis.Client
	sha            string

	mu     sync.Mutex
	divert chan struct{} // closed once the diverted call is sent; nil when none is armed
	calls  sync.WaitGroup
}

func newSplitClient(t *testing.T, fast, slow rueidis.Client, s *luascripts.Script) *splitClient {
	sum := sha1.Sum([]byte(s.Source()))
	c := &splitClient{Client: fast, slow: slow, sha: hex.EncodeToString(sum[:])}
	t.Cleanup(c.wait)
	return c
}

// divertNext arms the diversion of the next call of the script; the
// channel closes once it is sent.
func (c *splitClient) divertNext() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.divert = make(chan struct{})
	return c.divert
}

// wait returns once every diverted call has had its reply.
func (c *splitClient) wait() { c.calls.Wait() }

func (c *splitClient) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	args := cmd.Commands()
	c.mu.Lock()
	sent := c.divert
	if sent == nil || len(args) < 2 || args[0] != "EVALSHA" || args[1] != c.sha {
		c.mu.Unlock()
		return c.Client.Do(ctx, cmd)
	}
	c.divert = nil
	c.calls.Add(1)
	c.mu.Unlock()
	out := make(chan rueidis.RedisResult, 1)
	go func() {
		defer c.calls.Done()
		out <- c.slow.Do(context.WithoutCancel(ctx), cmd)
	}()
	close(sent)
	select {
	case r := <-out:
		return r
	case <-ctx.Done():
		return rueidis.NewErrorResult(ctx.Err())
	}
}

// TestRegressAbandonedReentry: the same race for a re-entry. Its context
// ends while the reenter script travels a slow connection; the undo that
// followed used to run first (the count as yet unchanged reads as "done"),
// so the late re-entry left one hold more in Redis than the holder knew of,
// and the holder's last Unlock was refused with the lock still held.
func TestRegressAbandonedReentry(t *testing.T) {
	ctx := context.Background()
	split, rc, name := slowScript(t, luascripts.Reenter)
	key := lockKey(name)

	c, err := rlock.NewClient(split, rlock.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	m := c.Mutex(name)
	lctx := mustLock(t, ctx, m)

	rctx, cancel := context.WithCancel(lctx)
	sent := split.divertNext()
	got := make(chan error, 1)
	go func() {
		_, err := m.Lock(rctx)
		got <- err
	}()
	await(t, sent, 10*time.Second, "the re-entry to be sent")
	cancel()
	require.ErrorIs(t, recvErr(t, got, 10*time.Second, "Lock to return"), context.Canceled)
	split.wait() // the diverted re-entry has run on the server

	require.NoError(t, m.Unlock(lctx), "the holder's last Unlock")
	require.False(t, exists(t, rc, key), "a hold outlived the last Unlock: %v", hgetall(t, rc, key))
	require.NoError(t, c.Close())
}
