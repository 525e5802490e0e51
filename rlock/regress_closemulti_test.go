package rlock

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/internal/luascripts"
)

// TestRegressCloseAtMultiMutexReleases: a MultiMutex Lock that Close cuts
// short gives back the members it took before Close returns. Each member's
// own call was counted (Close awaits it), but not the MultiMutex call: once
// a member's call returned ErrClosed, the members held already were
// unlocked after Close had returned, on the rueidis client a caller closes
// next, and they stayed held for their lease with nobody holding them. The
// second member's grant is held until Close is under way, and each release
// after it is slowed down.
func TestRegressCloseAtMultiMutexReleases(t *testing.T) {
	const slowRelease = 300 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	plain := privateRedis(ctx, t)

	g := newGrantGate()
	var acquires atomic.Int32
	hooked := newScriptHooks(plain)
	held := g.hook(slowedBy(0))
	hooked.on(luascripts.Acquire, func(call func() rueidis.RedisResult) rueidis.RedisResult {
		// The second member's grant is held; a NOSCRIPT, which EVAL
		// follows, does not count.
		if acquires.Load() == 1 {
			g.armed.Store(true)
		}
		r := held(call)
		if err, ok := rueidis.IsRedisErr(r.Error()); ok && err.IsNoScript() {
			return r
		}
		acquires.Add(1)
		return r
	})
	hooked.on(luascripts.Release, slowedBy(slowRelease))
	var err error
	g.c, err = NewClient(hooked, Options{})
	require.NoError(t, err)
	mm := g.c.MultiMutex(t.Name()+"-a", t.Name()+"-b")

	locked := make(chan error, 1)
	go func() {
		_, err := mm.Lock(ctx)
		locked <- err
	}()
	g.closeAtGrant(t)
	for _, m := range mm.members {
		n, err := plain.Do(ctx, plain.B().Exists().Key(m.keys.Lock).Build()).AsInt64()
		require.NoError(t, err)
		require.Zero(t, n, "member %q is still held in Redis after Close returned, by a multi-lock it cut short", m.name)
	}

	requireClosedErr(t, locked, "Lock")
}
