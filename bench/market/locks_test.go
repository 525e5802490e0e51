package main

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/rlock"
)

// TestSetnxGuard checks the seed's lock: a busy lock is retried and
// counted until the acquire timeout, a free one is taken at once, and a
// release that finds someone else's id fails without deleting it.
func TestSetnxGuard(t *testing.T) {
	rc := newTestClient(t)
	ctx := context.Background()
	require.NoError(t, rc.Do(ctx, rc.B().Flushall().Build()).Error())
	conn, release := rc.Dedicate()
	defer release()
	w := &worker{id: "b1", conn: conn}
	g := setnxGuard{timeout: 20 * time.Millisecond, sleep: time.Millisecond}

	key := setnxPrefix + "item"
	require.NoError(t, rc.Do(ctx, rc.B().Set().Key(key).Value("someone").Build()).Error())
	_, failed, err := g.acquire(ctx, w, "item")
	assert.ErrorIs(t, err, errLockTimeout)
	assert.GreaterOrEqual(t, failed, int64(2), "a busy lock is tried again until the timeout")

	require.NoError(t, rc.Do(ctx, rc.B().Del().Key(key).Build()).Error())
	h, failed, err := g.acquire(ctx, w, "item")
	require.NoError(t, err)
	assert.Zero(t, failed)
	require.NoError(t, h.release())
	n, err := rc.Do(ctx, rc.B().Exists().Key(key).Build()).AsInt64()
	require.NoError(t, err)
	assert.Zero(t, n, "release deletes the lock")

	h, _, err = g.acquire(ctx, w, "item")
	require.NoError(t, err)
	require.NoError(t, rc.Do(ctx, rc.B().Set().Key(key).Value("thief").Build()).Error())
	assert.ErrorIs(t, h.release(), errLockNotHeld)
	v, err := rc.Do(ctx, rc.B().Get().Key(key).Build()).ToString()
	require.NoError(t, err)
	assert.Equal(t, "thief", v, "a release must not delete someone else's lock")
}

// TestLatchkeyGuardCountsRetries holds an item's lock, lets a guarded
// acquire wait for it and checks that its failed attempts reach the run's
// retry count through OnAttempt, and that the wait ends at the release.
func TestLatchkeyGuardCountsRetries(t *testing.T) {
	rc := newTestClient(t)
	ctx := context.Background()
	require.NoError(t, rc.Do(ctx, rc.B().Flushall().Build()).Error())
	s := &sim{rc: rc, cfg: config{acquireTimeout: 30 * time.Second, lease: time.Minute}}
	g, free, err := newLatchkey(s)
	require.NoError(t, err)
	defer free()

	locks, err := rlock.NewClient(rc, rlock.Options{})
	require.NoError(t, err)
	defer locks.Close()
	holder := locks.Mutex(itemLock("s1-0.s1"))
	hctx, err := holder.Lock(ctx)
	require.NoError(t, err)

	type acquired struct {
		h   held
		err error
	}
	got := make(chan acquired, 1)
	go func() {
		h, _, err := g.acquire(ctx, nil, itemLock("s1-0.s1"))
		got <- acquired{h, err}
	}()
	require.Eventually(t, func() bool { return s.retries.Load() >= 1 }, 10*time.Second, time.Millisecond,
		"the waiter's first attempt fails and is counted")
	select {
	case a := <-got:
		t.Fatalf("acquired while the lock was held: %v", a.err)
	default:
	}
	require.NoError(t, holder.Unlock(hctx))
	a := <-got
	require.NoError(t, a.err)
	require.NoError(t, a.h.release())
	assert.GreaterOrEqual(t, s.retries.Load(), int64(1))
}

func TestLatchkeyGuardTimesOut(t *testing.T) {
	rc := newTestClient(t)
	ctx := context.Background()
	s := &sim{rc: rc, cfg: config{acquireTimeout: 50 * time.Millisecond, lease: time.Minute}}
	g, free, err := newLatchkey(s)
	require.NoError(t, err)
	defer free()
	h, _, err := g.acquire(ctx, nil, "busy")
	require.NoError(t, err)
	defer h.release()

	_, _, err = g.acquire(ctx, nil, "busy")
	assert.True(t, errors.Is(err, errLockTimeout), "got %v", err)
}

func TestCheckLoopback(t *testing.T) {
	for _, ok := range []string{"127.0.0.1:6379", "[::1]:6379", "localhost:6379", "127.5.5.5:1"} {
		assert.NoError(t, checkLoopback(ok), ok)
	}
	for _, bad := range []string{"10.0.0.1:6379", "redis:6379", "127.0.0.1", ""} {
		assert.ErrorIs(t, checkLoopback(bad), errNotLoopback, bad)
	}
}
