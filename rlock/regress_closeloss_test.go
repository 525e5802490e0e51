package rlock

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/internal/luascripts"
	"github.com/latchkey/latchkey/internal/redistest"
)

// lostRenewReply runs the renew script, while on, and reports its reply
// lost: an Extend of unseen outcome.
type lostRenewReply struct {
	rueidis.Client
	sha string
	on  *atomic.Bool
}

func (c lostRenewReply) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	args := cmd.Commands()
	if !c.on.Load() || len(args) < 2 || args[0] != "EVALSHA" || args[1] != c.sha {
		return c.Client.Do(ctx, cmd)
	}
	c.Client.Do(ctx, cmd)
	return rueidis.NewErrorResult(io.ErrUnexpectedEOF)
}

// TestRegressCloseAtLossReleases: a Close called as a fixed-lease hold
// whose Extend had an unseen outcome is lost (its context has ended) still
// releases what that Extend set in Redis. The loss registered its release
// only after ending the contexts, and a Close in between skipped it: the
// lock stayed held for the Extend's lease, with nobody holding it. The
// window is a few instructions wide: afterLossHint stages the Close in it.
func TestRegressCloseAtLossReleases(t *testing.T) {
	const (
		lease    = 300 * time.Millisecond
		newLease = time.Minute
	)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv, err := redistest.StartProcess(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	plain, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr}, DisableCache: true})
	require.NoError(t, err)
	t.Cleanup(plain.Close)

	sum := sha1.Sum([]byte(luascripts.Renew.Source()))
	var on atomic.Bool
	c, err := NewClient(lostRenewReply{Client: plain, sha: hex.EncodeToString(sum[:]), on: &on}, Options{})
	require.NoError(t, err)
	rival, err := NewClient(plain, Options{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, rival.Close()) })

	closed := make(chan error, 1)
	afterLossHint = func() {
		go func() { closed <- c.Close() }()
		<-c.closing.Done() // Close is under way: it has seen no release to await
	}
	t.Cleanup(func() { afterLossHint = nil })

	m := c.Mutex(t.Name())
	lctx, err := m.Lock(ctx, WithLease(lease))
	require.NoError(t, err)
	require.NoError(t, m.Extend(lctx, lease)) // loads the script: the next call is an EVALSHA
	on.Store(true)
	require.ErrorIs(t, m.Extend(lctx, newLease), io.ErrUnexpectedEOF)
	<-lctx.Done()
	require.ErrorIs(t, context.Cause(lctx), ErrLockLost)
	require.NoError(t, <-closed)

	rctx, ok, err := rival.Mutex(t.Name()).TryLock(ctx)
	require.NoError(t, err)
	require.True(t, ok, "the lock is still held in Redis after Close returned, for the lost Extend's lease")
	require.NoError(t, rival.Mutex(t.Name()).Unlock(rctx))
}
