package rlock

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/internal/luascripts"
	"github.com/latchkey/latchkey/internal/redistest"
)

// scriptHooks runs each call of a hooked script through its hook, which
// sends it (once) with call: the regression tests below hold or delay a
// reply there. A script runs as EVALSHA, or EVAL after NOSCRIPT.
type scriptHooks struct {
	rueidis.Client
	hooks map[string]func(call func() rueidis.RedisResult) rueidis.RedisResult // by SHA-1
}

func newScriptHooks(rc rueidis.Client) *scriptHooks {
	return &scriptHooks{Client: rc, hooks: make(map[string]func(func() rueidis.RedisResult) rueidis.RedisResult)}
}

// on hooks s; set before the client runs any call.
func (c *scriptHooks) on(s *luascripts.Script, hook func(call func() rueidis.RedisResult) rueidis.RedisResult) {
	c.hooks[sha1Hex(s.Source())] = hook
}

func sha1Hex(s string) string {
	sum := sha1.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

func (c *scriptHooks) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	args := cmd.Commands()
	var sha string
	switch {
	case len(args) >= 2 && args[0] == "EVALSHA":
		sha = args[1]
	case len(args) >= 2 && args[0] == "EVAL":
		sha = sha1Hex(args[1])
	}
	if hook := c.hooks[sha]; hook != nil {
		return hook(func() rueidis.RedisResult { return c.Client.Do(ctx, cmd) })
	}
	return c.Client.Do(ctx, cmd)
}

// scriptHook is a hook of scriptHooks.
type scriptHook = func(call func() rueidis.RedisResult) rueidis.RedisResult

// slowedBy is a hook that sends its call d late: a window after it opens
// wide.
func slowedBy(d time.Duration) scriptHook {
	return func(call func() rueidis.RedisResult) rueidis.RedisResult {
		time.Sleep(d)
		return call()
	}
}

// grantGate holds the reply of the one call armed for it (a grant) until
// Close is under way on c: the regression tests of grants Close cuts
// short stage them with it.
type grantGate struct {
	c        *Client
	armed    atomic.Bool
	granting chan struct{} // the held grant ran in Redis
}

func newGrantGate() *grantGate { return &grantGate{granting: make(chan struct{})} }

// hook holds the armed call's reply; any other call goes through otherwise.
func (g *grantGate) hook(otherwise scriptHook) scriptHook {
	return func(call func() rueidis.RedisResult) rueidis.RedisResult {
		if !g.armed.CompareAndSwap(true, false) {
			return otherwise(call)
		}
		r := call()
		close(g.granting)
		<-g.c.closing.Done()
		return r
	}
}

// closeAtGrant awaits the held grant and closes the client.
func (g *grantGate) closeAtGrant(t *testing.T) {
	t.Helper()
	select {
	case <-g.granting:
	case <-time.After(10 * time.Second):
		t.Fatal("no grant")
	}
	require.NoError(t, g.c.Close())
}

// requireClosedErr awaits the call cut short: it returns ErrClosed.
func requireClosedErr(t *testing.T, done <-chan error, what string) {
	t.Helper()
	select {
	case err := <-done:
		require.ErrorIs(t, err, ErrClosed)
	case <-time.After(10 * time.Second):
		t.Fatalf("the %s did not return after Close", what)
	}
}

// privateRedis starts a redis-server of the test's own and connects to it.
func privateRedis(ctx context.Context, t *testing.T) rueidis.Client {
	t.Helper()
	srv, err := redistest.StartProcess(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr}, DisableCache: true})
	require.NoError(t, err)
	t.Cleanup(rc.Close)
	return rc
}

// TestRegressCloseAtGrantReleases: a grant that a Close cuts short is
// given back before Close returns. The contender stopped counting (Close
// awaits contenders) before it turned the grant into a hold, and only then
// saw the client closed and released it: after Close had returned, when a
// caller closing its rueidis client next makes the release fail, and the
// lock stays held for its lease with nobody holding it. The grant's reply
// is held until Close is under way, and each release after it is slowed
// down, so that the window is wide open: for a contender's own grant, and
// for a handover to a local heir.
func TestRegressCloseAtGrantReleases(t *testing.T) {
	for _, heir := range []bool{false, true} {
		t.Run(map[bool]string{false: "contender", true: "heir"}[heir], func(t *testing.T) {
			grantCutByClose(t, heir, 300*time.Millisecond, Options{}, func(plain rueidis.Client, m *Mutex) {
				n, err := plain.Do(context.Background(), plain.B().Exists().Key(m.keys.Lock).Build()).AsInt64()
				require.NoError(t, err)
				require.Zero(t, n, "the lock is still held in Redis after Close returned, by a grant it cut short")
			})
		})
	}
}

// grantCutByClose stages a grant that a Close cuts short, on a Redis of the
// test's own: the grant's reply (a contender's acquire, or with heir the
// release that hands a hold of the same client over to a local waiter) is
// held until Close is under way, and every other call of those scripts is
// slowed by slow, so that any window after it is wide open. It calls
// afterClose once Close has returned, then checks that the Lock returned
// ErrClosed (and the holder's Unlock nil).
func grantCutByClose(t *testing.T, heir bool, slow time.Duration, opts Options, afterClose func(plain rueidis.Client, m *Mutex)) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	plain := privateRedis(ctx, t)

	g := newGrantGate()
	hooked := newScriptHooks(plain)
	if heir {
		hooked.on(luascripts.Release, g.hook(slowedBy(slow))) // the release hands the lock over
	} else {
		hooked.on(luascripts.Acquire, g.hook(slowedBy(slow)))
		hooked.on(luascripts.Release, slowedBy(slow))
	}
	waiting := make(chan string, 1)
	opts.OnWait = func(name string) {
		select {
		case waiting <- name:
		default:
		}
	}
	var err error
	g.c, err = NewClient(hooked, opts)
	require.NoError(t, err)
	m := g.c.Mutex(t.Name())

	var holder context.Context
	unlocked := make(chan error, 1)
	if heir {
		holder, err = m.Lock(ctx)
		require.NoError(t, err)
	}
	locked := make(chan error, 1)
	g.armed.Store(!heir)
	go func() {
		_, err := m.Lock(ctx)
		locked <- err
	}()
	if heir {
		<-waiting // queued behind holder, in the turn
		g.armed.Store(true)
		go func() { unlocked <- m.Unlock(holder) }()
	}
	g.closeAtGrant(t)
	afterClose(plain, m)
	requireClosedErr(t, locked, "Lock")
	if heir {
		require.NoError(t, <-unlocked)
	}
}
