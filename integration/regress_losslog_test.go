package integration

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/internal/luascripts"
	"github.com/latchkey/latchkey/internal/redistest"
	"github.com/latchkey/latchkey/rlock"
)

// stuckLog blocks every "lease lost" record until gate closes: a Logger
// whose sink is slow or stalled.
type stuckLog struct{ gate chan struct{} }

func (h stuckLog) Enabled(context.Context, slog.Level) bool { return true }
func (h stuckLog) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h stuckLog) WithGroup(string) slog.Handler            { return h }

func (h stuckLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "latchkey: lease lost" {
		<-h.gate
	}
	return nil
}

// TestRegressLossSignalledBeforeLogged: when the watchdog gives holds up,
// every holder's context ends before the losses are logged. It logged
// each loss before signalling it, so a slow or stalled Logger delayed, or
// withheld, the signal that must reach the holder before the lease ends in
// Redis.
func TestRegressLossSignalledBeforeLogged(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx := context.Background()
		const timeout = time.Second
		var on atomic.Bool
		gate := make(chan struct{}) // the held renewals'
		logGate := make(chan struct{})
		sent := new(atomic.Int64)
		wrapped := heldRenewals{Client: redisClient(t, tp), sha: shaOf(luascripts.Renew), on: &on, n: new(atomic.Int64), sent: sent, gate: gate}
		c, err := rlock.NewClient(wrapped, rlock.Options{WatchdogTimeout: timeout, Logger: slog.New(stuckLog{gate: logGate})})
		require.NoError(t, err)
		var once sync.Once
		open := func() { once.Do(func() { close(logGate); close(gate) }) }
		t.Cleanup(func() { open(); require.NoError(t, c.Close()) })
		// Two names of one Cluster slot: one renew call keeps both, so that
		// they are lost together, in one pass of the watchdog.
		first := lockName(t)
		second := first
		for i := 0; redistest.SlotOf(second) != redistest.SlotOf(first) || second == first; i++ {
			second = first + "-" + strconv.Itoa(i)
		}
		var ctxs []context.Context
		for _, name := range []string{first, second} {
			lctx, err := c.Mutex(name).Lock(ctx)
			require.NoError(t, err)
			ctxs = append(ctxs, lctx)
		}
		// One renewal of both first (one call).
		before := sent.Load()
		awaitCond(t, 2*timeout, "a renewal of both", func() bool { return sent.Load() > before })
		on.Store(true)
		for i, lctx := range ctxs {
			requireLost(t, lctx, 3*timeout, []string{"the first hold, with its loss's log stalled", "the second hold"}[i])
		}
		open()
	})
}
