package integration

import (
	"context"
	"log/slog"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/rlock"
)

// blockingHandler is a slog handler that blocks on the Warn for a dropped
// lock context until released, as a handler writing to a stalled pipe or
// a full channel would; it reports whether that Warn came on one of the
// runtime's cleanup goroutines.
type blockingHandler struct {
	onCleanup chan bool // one value: at the Warn, before blocking
	release   chan struct{}
}

func (h *blockingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *blockingHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *blockingHandler) WithGroup(string) slog.Handler            { return h }

func (h *blockingHandler) Handle(_ context.Context, r slog.Record) error {
	if !strings.Contains(r.Message, "dropped without its Unlock") {
		return nil
	}
	select {
	case h.onCleanup <- callersHave("runtime.runCleanups"):
	default:
	}
	<-h.release
	return nil
}

// callersHave reports whether the calling goroutine's stack has a frame of
// the function fn (runtime frames included, which runtime.Stack elides).
func callersHave(fn string) bool {
	pcs := make([]uintptr, 128)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(1, pcs)])
	for {
		f, more := frames.Next()
		if f.Function == fn {
			return true
		}
		if !more {
			return false
		}
	}
}

// TestRegressLeakWarnOffCleanup: the Warn for a dropped lock context is
// logged off the runtime's cleanup goroutine. It was logged in the cleanup
// itself, so a Logger whose handler blocks stalled the goroutine that runs
// every cleanup of the process (there is one unless GOMAXPROCS is 8 or
// more), the leaked hold's unlock behind it. Checked on the Warn's own
// stack: which goroutine a stalled cleanup would hold up is the runtime's
// affair, and not a thing a test can watch without racing it.
func TestRegressLeakWarnOffCleanup(t *testing.T) {
	ctx := context.Background()
	tp := topologies()[0]
	rc := redisClient(t, tp)
	h := &blockingHandler{onCleanup: make(chan bool, 1), release: make(chan struct{})}
	released := false
	release := func() {
		if !released {
			released = true
			close(h.release)
		}
	}
	defer release() // before the Client's Close, which awaits the cleanup's unlock
	m := lockClient(t, tp, rlock.Options{Logger: slog.New(h)}).Mutex(lockName(t))
	lockAndDrop(t, ctx, rc, m)
	var onCleanup bool
	awaitCond(t, 20*time.Second, "the Warn for the dropped context", func() bool {
		runtime.GC()
		select {
		case onCleanup = <-h.onCleanup:
			return true
		default:
			return false
		}
	})
	release()
	require.False(t, onCleanup, "the Warn was logged on the runtime's cleanup goroutine")
	awaitCond(t, 20*time.Second, "the dropped hold to be released", func() bool { return !exists(t, rc, m.Key()) })
}
