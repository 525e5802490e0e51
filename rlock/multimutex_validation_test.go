package rlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/rlock"
)

// TestMultiMutexInputIsCheckedBeforeIO: no names, an invalid name among
// valid ones, a nil or cancelled context, bad options and a closed client
// are refused by every method with a typed error, and nothing reaches
// Redis (newNoIO counts the calls).
func TestMultiMutexInputIsCheckedBeforeIO(t *testing.T) {
	c, _ := newNoIO(t)
	ctx := context.Background()
	methods := map[string]func(*rlock.MultiMutex, context.Context) error{
		"Lock": func(mm *rlock.MultiMutex, ctx context.Context) error { _, err := mm.Lock(ctx); return err },
		"TryLock": func(mm *rlock.MultiMutex, ctx context.Context) error {
			_, ok, err := mm.TryLock(ctx, rlock.WithWait(time.Second))
			if ok {
				return errors.New("TryLock reported success")
			}
			return err
		},
		"Unlock": func(mm *rlock.MultiMutex, ctx context.Context) error { return mm.Unlock(ctx) },
		"Token": func(mm *rlock.MultiMutex, ctx context.Context) error {
			_, err := mm.Token(ctx, "ok")
			return err
		},
	}
	bad := map[string]struct {
		names []string
		want  error
	}{
		"no names":         {nil, rlock.ErrInvalidArgument},
		"empty name":       {[]string{"ok", ""}, rlock.ErrInvalidName},
		"brace":            {[]string{"a{b", "ok"}, rlock.ErrInvalidName},
		"too long":         {[]string{"ok", strings.Repeat("x", rlock.MaxNameLen+1)}, rlock.ErrInvalidName},
		"last one invalid": {[]string{"a", "b", "}"}, rlock.ErrInvalidName},
	}
	for name, tc := range bad {
		for method, call := range methods {
			t.Run(name+"/"+method, func(t *testing.T) {
				require.ErrorIs(t, call(c.MultiMutex(tc.names...), ctx), tc.want)
			})
		}
	}

	var nilCtx context.Context
	cancelled, cancel := context.WithCancelCause(ctx)
	cancel(errors.New("the caller gave up"))
	mm := c.MultiMutex("ok", "fine")
	for method, call := range methods {
		t.Run("nil context/"+method, func(t *testing.T) {
			require.ErrorIs(t, call(mm, nilCtx), rlock.ErrInvalidArgument)
		})
		if method == "Unlock" || method == "Token" {
			continue // they ignore cancellation, as Mutex's do
		}
		t.Run("cancelled context/"+method, func(t *testing.T) {
			err := call(mm, cancelled)
			require.ErrorIs(t, err, context.Canceled)
			require.ErrorContains(t, err, "the caller gave up")
		})
	}

	_, err := mm.Lock(ctx, rlock.WithWait(time.Second))
	require.ErrorIs(t, err, rlock.ErrInvalidArgument, "WithWait is TryLock's")
	_, _, err = mm.TryLock(ctx, rlock.WithLease(0))
	require.ErrorIs(t, err, rlock.ErrInvalidArgument)
	_, _, err = mm.TryLock(ctx, rlock.WithWait(-1))
	require.ErrorIs(t, err, rlock.ErrInvalidArgument)

	// A context that carries no multi hold: ErrNotHeld, no I/O.
	require.ErrorIs(t, mm.Unlock(ctx), rlock.ErrNotHeld)
	_, err = mm.Token(ctx, "ok")
	require.ErrorIs(t, err, rlock.ErrNotHeld)
	_, err = mm.Token(ctx, "not a member")
	require.ErrorIs(t, err, rlock.ErrInvalidName)

	closed, _ := newNoIO(t)
	require.NoError(t, closed.Close())
	_, err = closed.MultiMutex("ok").Lock(ctx)
	require.ErrorIs(t, err, rlock.ErrClosed)
	_, _, err = closed.MultiMutex("ok").TryLock(ctx)
	require.ErrorIs(t, err, rlock.ErrClosed)
}

// TestMultiMutexNames: duplicates are merged and the order given does not
// matter; Names is the acquisition order and a copy.
func TestMultiMutexNames(t *testing.T) {
	c, _ := newNoIO(t)
	mm := c.MultiMutex("b", "a\x00", "c", "a", "b")
	require.Equal(t, []string{"a", "a\x00", "b", "c"}, mm.Names())
	mm.Names()[0] = "changed"
	require.Equal(t, "a", mm.Names()[0], "Names hands out its own slice")
	require.Equal(t, []string{"only"}, c.MultiMutex("only", "only").Names())
}
