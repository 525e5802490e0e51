package rlock_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/rlock"
)

// noIO is a rueidis.Client that counts every call that could reach Redis.
// Its embedded interface is nil, so any method not listed here panics: the
// validation tests prove that bad input never gets as far as the network.
type noIO struct {
	rueidis.Client
	calls atomic.Int64
}

func (c *noIO) Mode() rueidis.ClientMode { return rueidis.ClientModeStandalone }
func (c *noIO) Do(context.Context, rueidis.Completed) rueidis.RedisResult {
	c.calls.Add(1)
	return rueidis.RedisResult{}
}

func (c *noIO) DoMulti(_ context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	c.calls.Add(1)
	return make([]rueidis.RedisResult, len(cmds))
}

func newNoIO(t *testing.T) (*rlock.Client, *noIO) {
	t.Helper()
	rc := &noIO{}
	c, err := rlock.NewClient(rc, rlock.Options{})
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, c.Close())
		require.Zero(t, rc.calls.Load(), "bad input reached Redis")
	})
	return c, rc
}

func TestNewClientRejects(t *testing.T) {
	_, err := rlock.NewClient(nil, rlock.Options{})
	require.ErrorIs(t, err, rlock.ErrInvalidOptions)
	for name, opts := range map[string]rlock.Options{
		"brace in prefix":       {Prefix: "a{b"},
		"interval >= timeout":   {WatchdogTimeout: time.Second, WatchdogInterval: time.Second},
		"negative timeout":      {WatchdogTimeout: -time.Second},
		"negative batch":        {RenewBatchSize: -1},
		"spin max below min":    {SpinBackoffMin: 10 * time.Millisecond, SpinBackoffMax: time.Millisecond},
		"negative spin min":     {SpinBackoffMin: -1},
		"negative release time": {ReleaseTimeout: -1},
		"unknown pubsub mode":   {PubSub: 7},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := rlock.NewClient(&noIO{}, opts)
			require.ErrorIs(t, err, rlock.ErrInvalidOptions)
		})
	}
}

func TestNamesAreCheckedBeforeIO(t *testing.T) {
	c, _ := newNoIO(t)
	ctx := context.Background()
	for _, name := range []string{"", "a{b", "}", "{tag}", strings.Repeat("x", rlock.MaxNameLen+1)} {
		for _, m := range []*rlock.Mutex{c.Mutex(name), c.SpinMutex(name)} {
			_, err := m.Lock(ctx)
			require.ErrorIs(t, err, rlock.ErrInvalidName)
			_, _, err = m.TryLock(ctx)
			require.ErrorIs(t, err, rlock.ErrInvalidName)
			require.ErrorIs(t, m.Unlock(ctx), rlock.ErrInvalidName)
			_, err = m.IsLocked(ctx)
			require.ErrorIs(t, err, rlock.ErrInvalidName)
			_, err = m.HoldCount(ctx)
			require.ErrorIs(t, err, rlock.ErrInvalidName)
			_, err = m.TTL(ctx)
			require.ErrorIs(t, err, rlock.ErrInvalidName)
		}
		_, err := c.ForceUnlock(ctx, name)
		require.ErrorIs(t, err, rlock.ErrInvalidName)
	}
}

func TestUnusualNamesAreKeptVerbatim(t *testing.T) {
	c, _ := newNoIO(t)
	for _, name := range []string{"a\x00b", "\xff\xfe", "*?[]", "with space", strings.Repeat("y", rlock.MaxNameLen)} {
		m := c.Mutex(name)
		require.Equal(t, "latchkey:{"+name+"}", m.Key())
		require.Equal(t, name, m.Name())
	}
	custom, err := rlock.NewClient(&noIO{}, rlock.Options{Prefix: "app:locks"})
	require.NoError(t, err)
	defer custom.Close()
	require.Equal(t, "app:locks:{job}", custom.Mutex("job").Key())
}

func TestLockOptionsAreCheckedBeforeIO(t *testing.T) {
	c, _ := newNoIO(t)
	ctx := context.Background()
	m := c.Mutex("ok")
	for name, opts := range map[string][]rlock.LockOption{
		"zero lease":      {rlock.WithLease(0)},
		"negative lease":  {rlock.WithLease(-time.Second)},
		"sub-ms lease":    {rlock.WithLease(time.Microsecond)},
		"huge lease":      {rlock.WithLease(rlock.MaxLease + time.Millisecond)},
		"overflow lease":  {rlock.WithLease(time.Duration(1<<63 - 1))},
		"negative wait":   {rlock.WithWait(-time.Second)},
		"lease and wait-": {rlock.WithLease(time.Second), rlock.WithWait(-1)},
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := m.TryLock(ctx, opts...)
			require.ErrorIs(t, err, rlock.ErrInvalidArgument)
		})
	}
	_, err := m.Lock(ctx, rlock.WithWait(time.Second))
	require.ErrorIs(t, err, rlock.ErrInvalidArgument, "WithWait is TryLock's")
}

// TestContextsAreCheckedBeforeIO: every method refuses a nil context with
// ErrInvalidArgument, and every method but Unlock an already-cancelled one
// with its error, before any I/O. Unlock ignores cancellation on purpose
// (`defer m.Unlock(lctx)` must release after lctx ended; see
// TestUnlockIgnoresCancellation in the integration tests).
func TestContextsAreCheckedBeforeIO(t *testing.T) {
	c, _ := newNoIO(t)
	var nilCtx context.Context
	cancelled, cancel := context.WithCancelCause(context.Background())
	cancel(errors.New("the caller gave up"))
	for name, call := range map[string]func(*rlock.Mutex, context.Context) error{
		"Lock": func(m *rlock.Mutex, ctx context.Context) error { _, err := m.Lock(ctx); return err },
		"TryLock": func(m *rlock.Mutex, ctx context.Context) error {
			_, _, err := m.TryLock(ctx, rlock.WithWait(time.Second))
			return err
		},
		"IsLocked":  func(m *rlock.Mutex, ctx context.Context) error { _, err := m.IsLocked(ctx); return err },
		"HoldCount": func(m *rlock.Mutex, ctx context.Context) error { _, err := m.HoldCount(ctx); return err },
		"TTL":       func(m *rlock.Mutex, ctx context.Context) error { _, err := m.TTL(ctx); return err },
		"ForceUnlock": func(m *rlock.Mutex, ctx context.Context) error {
			_, err := c.ForceUnlock(ctx, m.Name())
			return err
		},
		"Unlock": func(m *rlock.Mutex, ctx context.Context) error { return m.Unlock(ctx) },
	} {
		t.Run(name, func(t *testing.T) {
			for _, m := range []*rlock.Mutex{c.Mutex("ok"), c.SpinMutex("ok")} {
				require.ErrorIs(t, call(m, nilCtx), rlock.ErrInvalidArgument)
				if name == "Unlock" {
					continue
				}
				err := call(m, cancelled)
				require.ErrorIs(t, err, context.Canceled)
				require.ErrorContains(t, err, "the caller gave up", "the cause is kept")
			}
		})
	}
}

func TestClosedClientRefusesBeforeIO(t *testing.T) {
	c, _ := newNoIO(t)
	require.NoError(t, c.Close())
	_, err := c.Mutex("ok").Lock(context.Background())
	require.ErrorIs(t, err, rlock.ErrClosed)
	_, _, err = c.SpinMutex("ok").TryLock(context.Background())
	require.ErrorIs(t, err, rlock.ErrClosed)
}
