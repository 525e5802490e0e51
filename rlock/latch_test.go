package rlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/rlock"
)

// latchCalls are every CountDownLatch method that takes a context.
var latchCalls = map[string]func(*rlock.CountDownLatch, context.Context) error{
	"TrySetCount": func(l *rlock.CountDownLatch, ctx context.Context) error { _, err := l.TrySetCount(ctx, 1); return err },
	"CountDown":   func(l *rlock.CountDownLatch, ctx context.Context) error { return l.CountDown(ctx) },
	"Count":       func(l *rlock.CountDownLatch, ctx context.Context) error { _, err := l.Count(ctx); return err },
	"Await":       func(l *rlock.CountDownLatch, ctx context.Context) error { return l.Await(ctx) },
}

// TestLatchInputIsCheckedBeforeIO: invalid names, nil and ended contexts,
// and counts below 1 are typed errors, returned before any I/O.
func TestLatchInputIsCheckedBeforeIO(t *testing.T) {
	c, _ := newNoIO(t)
	var nilCtx context.Context
	cancelled, cancel := context.WithCancelCause(context.Background())
	cancel(errors.New("the caller gave up"))
	for name, call := range latchCalls {
		t.Run(name, func(t *testing.T) {
			for _, bad := range []string{"", "a{b", "}", "{tag}", strings.Repeat("x", rlock.MaxNameLen+1)} {
				require.ErrorIs(t, call(c.CountDownLatch(bad), context.Background()), rlock.ErrInvalidName, "name %q", bad)
			}
			l := c.CountDownLatch("ok")
			require.ErrorIs(t, call(l, nilCtx), rlock.ErrInvalidArgument)
			err := call(l, cancelled)
			require.ErrorIs(t, err, context.Canceled)
			require.ErrorContains(t, err, "the caller gave up", "the cause is kept")
		})
	}
	l := c.CountDownLatch("ok")
	require.Equal(t, "ok", l.Name())
	for _, n := range []int64{0, -1, -1 << 63} {
		_, err := l.TrySetCount(context.Background(), n)
		require.ErrorIs(t, err, rlock.ErrInvalidArgument, "count %d", n)
	}
}

func TestLatchAwaitAfterCloseRefusesBeforeIO(t *testing.T) {
	c, _ := newNoIO(t)
	require.NoError(t, c.Close())
	require.ErrorIs(t, c.CountDownLatch("ok").Await(context.Background()), rlock.ErrClosed)
}
