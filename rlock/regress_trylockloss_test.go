package rlock

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRegressTryLockAtLoss: a holder that reacts to ErrLockLost (its
// context's end) with TryLock finds the lock free, as it is, locally and
// in Redis. lose ended the hold's contexts before it passed the turn's
// baton on, and a TryLock in between found the turn busy: false, nil, with
// nobody holding the lock. The window is a few instructions wide:
// afterLossHint, which runs once the contexts have ended, makes the TryLock
// there.
func TestRegressTryLockAtLoss(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	plain := privateRedis(ctx, t)
	c, err := NewClient(plain, Options{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close()) })
	m := c.Mutex(t.Name())

	lctx, err := m.Lock(ctx)
	require.NoError(t, err)
	require.NoError(t, plain.Do(ctx, plain.B().Del().Key(m.keys.Lock).Build()).Error())

	var (
		hinted bool
		tctx   context.Context
		ok     bool
		tryErr error
	)
	afterLossHint = func() {
		hinted = true
		tctx, ok, tryErr = m.TryLock(context.Background())
	}
	t.Cleanup(func() { afterLossHint = nil })

	_, err = m.Lock(lctx) // the re-entry finds the hold gone: lose
	require.ErrorIs(t, err, ErrLockLost)
	require.ErrorIs(t, context.Cause(lctx), ErrLockLost)
	require.True(t, hinted)
	require.NoError(t, tryErr)
	require.True(t, ok, "TryLock refused at the loss a lock that nobody holds")
	require.NoError(t, m.Unlock(tctx))
}
