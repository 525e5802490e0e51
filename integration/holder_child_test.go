package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/internal/childproc"
	"github.com/latchkey/latchkey/rlock"
	"github.com/latchkey/latchkey/rlock/fenced"
	"github.com/latchkey/latchkey/watchdog"
)

// holderConfig tells a "holder" child process what to do: its childproc
// parameters.
type holderConfig struct {
	LockAddr        string        // the Redis the lock lives on
	StoreAddr       string        // the Redis of the lock-set's fenced store
	Lock, Store     string        // the lock's and the store's names
	WatchdogTimeout time.Duration // the lock is kept by the watchdog
	Element         string        // what the child adds to the lock-set
}

// holderEvent is one JSON line a holder child writes on stdout: "claimed"
// once it holds the lock and has read the set, then "done".
type holderEvent struct {
	Event string
	Token int64

	WriteErr               string
	WriteAcked, WriteStale bool

	LossCause                                 string
	LossIsLockLost, LossIsExpired, LossIsGone bool
	LostAtUnixNano                            int64 // 0: no loss signal within holderLossWait

	UnlockErr     string
	UnlockNotHeld bool
}

// holderLossWait bounds how long a resumed holder waits for its loss signal.
const holderLossWait = 10 * time.Second

// holderChild is the "holder" role: take the lock (watchdog-kept), claim the
// lock-set and report; wait for a line on stdin, during which the parent
// pauses or kills the process; then finish the read-modify-write, wait for
// the loss signal, unlock, and report what each step returned.
func holderChild() error {
	var cfg holderConfig
	if err := childproc.Params(&cfg); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{cfg.LockAddr}, DisableCache: true})
	if err != nil {
		return err
	}
	defer rc.Close()
	sc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{cfg.StoreAddr}, DisableCache: true})
	if err != nil {
		return err
	}
	defer sc.Close()
	locks, err := rlock.NewClient(rc, rlock.Options{WatchdogTimeout: cfg.WatchdogTimeout})
	if err != nil {
		return err
	}
	defer locks.Close()

	m := locks.Mutex(cfg.Lock)
	lctx, err := m.Lock(ctx)
	if err != nil {
		return err
	}
	token, err := m.Token(lctx)
	if err != nil {
		return err
	}
	lost := whenDone(lctx)
	store := fenced.New(sc, cfg.Store)
	set, err := store.Claim(ctx, token)
	if err != nil {
		return err
	}
	out := json.NewEncoder(os.Stdout)
	if err := out.Encode(holderEvent{Event: "claimed", Token: token}); err != nil {
		return err
	}

	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		return fmt.Errorf("waiting for the parent's go-ahead: %w", err)
	}
	ev := holderEvent{Event: "done", Token: token}
	// The write the pause interrupted. It runs on a context of its own, as
	// in a holder that does not look at its lock's context: only the fence
	// can stop it.
	err = store.Write(ctx, token, strings.TrimSpace(set+" "+cfg.Element))
	ev.WriteAcked, ev.WriteStale = err == nil, errors.Is(err, fenced.ErrStale)
	if err != nil {
		ev.WriteErr = err.Error()
	}
	select {
	case at := <-lost:
		ev.LostAtUnixNano = at.UnixNano()
	case <-time.After(holderLossWait):
	}
	if cause := context.Cause(lctx); cause != nil {
		ev.LossCause = cause.Error()
		ev.LossIsLockLost = errors.Is(cause, rlock.ErrLockLost)
		ev.LossIsExpired = errors.Is(cause, watchdog.ErrExpired)
		ev.LossIsGone = errors.Is(cause, watchdog.ErrGone)
	}
	err = m.Unlock(lctx)
	ev.UnlockNotHeld = errors.Is(err, rlock.ErrNotHeld)
	if err != nil {
		ev.UnlockErr = err.Error()
	}
	return out.Encode(ev)
}

// whenDone delivers the time ctx ends.
func whenDone(ctx context.Context) <-chan time.Time {
	at := make(chan time.Time, 1)
	context.AfterFunc(ctx, func() { at <- time.Now() })
	return at
}

// holderProc is a running holder child, seen from the test.
type holderProc struct {
	proc   *childproc.Proc
	events chan holderEvent
}

// startHolder runs a holder child and returns once it holds the lock and
// reported its "claimed" event. The child is killed when the test ends.
func startHolder(t *testing.T, cfg holderConfig) (*holderProc, holderEvent) {
	t.Helper()
	h := startHolderRole(t, "holder", cfg)
	return h, h.next(t, "claimed")
}

// startHolderRole runs a child of role (a holder of some kind) with cfg as
// its parameters, and reads its events; it is killed when the test ends.
func startHolderRole(t *testing.T, role string, cfg any) *holderProc {
	t.Helper()
	h := &holderProc{events: make(chan holderEvent, 2)}
	h.proc = startChild(t, role, role+" child", cfg, t.TempDir()+"/stderr")

	read := make(chan struct{})
	go func() {
		defer close(read)
		defer close(h.events)
		lines := bufio.NewScanner(h.proc.Stdout)
		for lines.Scan() {
			var ev holderEvent
			if json.Unmarshal(lines.Bytes(), &ev) == nil && ev.Event != "" {
				h.events <- ev
			}
		}
	}()
	t.Cleanup(func() {
		h.proc.Kill() // works on a stopped process too
		<-read
	})
	return h
}

// next waits for the child's next event, which must be want.
func (h *holderProc) next(t *testing.T, want string) holderEvent {
	t.Helper()
	select {
	case ev, ok := <-h.events:
		if ok {
			require.Equal(t, want, ev.Event)
			return ev
		}
		t.Fatal(h.proc.Fail(fmt.Sprintf("waiting for %q", want), errors.New("its stdout ended")))
	case <-time.After(30 * time.Second):
		t.Fatalf("no %q from the holder child within 30s; its stderr so far:\n%s", want, h.proc.Stderr())
	}
	return holderEvent{}
}

// goAhead lets the child past its pause point, once it runs.
func (h *holderProc) goAhead(t *testing.T) {
	t.Helper()
	_, err := io.WriteString(h.proc.Stdin, "go\n")
	require.NoError(t, err)
}

func (h *holderProc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	require.NoError(t, h.proc.Signal(sig))
}
