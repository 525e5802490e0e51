package integration

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/internal/redistest"
	"github.com/latchkey/latchkey/rlock"
)

// logCapture is a slog.Handler that keeps every record's level and
// message, for tests to await.
type logCapture struct {
	mu      sync.Mutex
	records []string // "LEVEL message key=value..."
}

func (h *logCapture) Enabled(context.Context, slog.Level) bool { return true }
func (h *logCapture) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *logCapture) WithGroup(string) slog.Handler            { return h }

func (h *logCapture) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	line := r.Level.String() + " " + r.Message
	r.Attrs(func(a slog.Attr) bool {
		line += " " + a.String()
		return true
	})
	h.records = append(h.records, line)
	return nil
}

// all is a copy of the records so far, safe to print while more come.
func (h *logCapture) all() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.records)
}

// saw reports whether a record of level whose message contains text came.
func (h *logCapture) saw(level slog.Level, text string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.records {
		if strings.HasPrefix(r, level.String()+" ") && strings.Contains(r, text) {
			return true
		}
	}
	return false
}

// TestLogger: Options.Logger hears of a lease given up, a subscription
// lost under a waiter, renewals that failed, and calls of unknown outcome
// whose undo failed too.
func TestLogger(t *testing.T) {
	ctx := context.Background()
	tp := topologies()[0]
	logs := &logCapture{}
	opts := rlock.Options{Logger: slog.New(logs), WatchdogTimeout: 600 * time.Millisecond}
	c := lockClient(t, tp, opts)
	name := lockName(t)

	// A lease found gone at a renewal.
	lctx, err := c.Mutex(name).Lock(ctx)
	require.NoError(t, err)
	_, err = lockClient(t, tp, rlock.Options{}).ForceUnlock(ctx, name)
	require.NoError(t, err)
	requireLost(t, lctx, 5*time.Second, "the force-unlocked lock")
	require.True(t, logs.saw(slog.LevelError, "lease lost"), "no Error for the lease given up: %v", logs.all())

	// A subscription lost under a waiter.
	holder := c.Mutex(name)
	hctx, err := holder.Lock(ctx)
	require.NoError(t, err)
	att := newAttempts()
	waiter := lockClient(t, tp, att.options(rlock.Options{Logger: slog.New(logs)}))
	done := startWaiter(t, ctx, waiter.Mutex(name), att)
	require.Positive(t, killPubSubClients(t, tp))
	awaitCond(t, 10*time.Second, "the resubscription's log", func() bool {
		return logs.saw(slog.LevelWarn, "made again") || logs.saw(slog.LevelWarn, "subscribing again")
	})
	require.NoError(t, holder.Unlock(hctx))
	requireAcquired(t, done, 10*time.Second, "the waiter after the resubscription")

	// Renewals that fail, and an acquire whose outcome stays unknown, on a
	// server that stops answering.
	srv, err := redistest.StartProcess(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { srv.Close() })
	frozen := topology{name: "frozen", addrs: []string{srv.Addr}}
	pid, err := redistest.ProcessID(ctx, redisClient(t, frozen))
	require.NoError(t, err)
	fc := lockClient(t, frozen, rlock.Options{Logger: slog.New(logs), WatchdogTimeout: 600 * time.Millisecond, ReleaseTimeout: 300 * time.Millisecond})
	held, err := fc.Mutex(name).Lock(ctx)
	require.NoError(t, err)
	require.NoError(t, syscall.Kill(pid, syscall.SIGSTOP))
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGCONT) })
	requireLost(t, held, 5*time.Second, "the lock on the frozen server")
	// The renewal in flight fails when its context ends, which may come
	// after the loss signal (given at the lease's local deadline).
	awaitCond(t, 10*time.Second, "a Warn for the failed renewals", func() bool { return logs.saw(slog.LevelWarn, "renewal failed") })
	lockCtx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	_, err = fc.Mutex(name + "-2").Lock(lockCtx)
	require.Error(t, err)
	require.True(t, logs.saw(slog.LevelError, "could not be undone"), "no Error for the acquire left unknown: %v", logs.all())
}
