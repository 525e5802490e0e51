package rlock

import (
	"context"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/internal/redistest"
	"github.com/latchkey/latchkey/notify"
)

// TestRegressCloseCutsLingerSubscribe: Close cuts a contender's Subscribe
// to a subscription that was lingering when the contender looked. The
// contender subscribed with its caller's context before Close could cancel
// its calls, so when the linger ran out just then and Redis stopped
// answering, Close, which waits for contenders, waited as long as Redis
// did (for ever under context.Background). The window between the hint and
// the Subscribe is a few instructions wide: the test stages the linger's end
// in it through afterSubscribedHint, on a private Redis it stops (SIGSTOP).
func TestRegressCloseCutsLingerSubscribe(t *testing.T) {
	for _, tc := range []struct {
		name   string
		pubsub PubSubMode
		mode   notify.Mode
	}{
		{"classic", PubSubClassic, notify.Classic},
		{"sharded", PubSubSharded, notify.Sharded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Bounds, not synchronisation: Close takes a couple of
			// UnsubscribeTimeouts at most against a stopped Redis once
			// cut, and waited until Redis answered before.
			const closeBound = 20 * time.Second
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			srv, err := redistest.StartProcess(ctx)
			require.NoError(t, err)
			t.Cleanup(func() { _ = srv.Close() })
			rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr}, DisableCache: true})
			require.NoError(t, err)
			t.Cleanup(rc.Close)
			pid, err := redistest.ProcessID(ctx, rc)
			require.NoError(t, err)

			c, err := NewClient(rc, Options{PubSub: tc.pubsub})
			require.NoError(t, err)
			// A linger that ends within the test; the client's own hub has
			// no goroutine before its first Subscribe, so it can be swapped.
			c.hub = notify.NewHub(rc, notify.Options{Mode: tc.mode, Linger: 20 * time.Millisecond})
			m := c.Mutex(t.Name())
			// Held by the test, the inbox's subscription is live: the Lock
			// below takes the hint and subscribes before its plain try.
			sub, err := c.hub.Subscribe(ctx, m.sd.inbox)
			require.NoError(t, err)

			reached, proceed := make(chan struct{}), make(chan struct{})
			var letGo, closing sync.Once
			resume := func() { letGo.Do(func() { close(proceed) }) }
			afterSubscribedHint = func() { close(reached); <-proceed }
			locked, lockDone, closed := make(chan error, 1), make(chan struct{}), make(chan struct{})
			closeAsync := func() {
				closing.Do(func() {
					go func() {
						defer close(closed)
						_ = c.Close()
					}()
				})
			}
			stopped := false
			// Whatever failed: Redis resumes, the stale Subscribe is
			// confirmed, the goroutines end, and only then the hook goes.
			t.Cleanup(func() {
				if stopped {
					_ = syscall.Kill(pid, syscall.SIGCONT)
				}
				resume()
				closeAsync()
				for _, ch := range []<-chan struct{}{closed, lockDone} {
					select {
					case <-ch:
					case <-time.After(time.Minute):
						t.Error("a goroutine of the test did not end")
					}
				}
				afterSubscribedHint = nil
			})

			go func() {
				defer close(lockDone)
				_, err := m.Lock(context.Background())
				locked <- err
			}()
			select {
			case <-reached:
			case <-time.After(10 * time.Second):
				t.Fatal("the Lock did not take the Subscribed hint")
			}
			// Redis stops answering, and the subscription the hint saw ends
			// (its linger runs out): the Subscribe waits for a new one.
			require.NoError(t, syscall.Kill(pid, syscall.SIGSTOP))
			stopped = true
			sub.Release()
			require.Eventually(t, func() bool { return !c.hub.Subscribed(m.sd.inbox) }, 10*time.Second, 5*time.Millisecond, "the linger to end")
			resume()

			closeAsync()
			select {
			case <-closed:
			case <-time.After(closeBound):
				t.Fatalf("Close still waits after %v for a contender's Subscribe, with Redis stopped", closeBound)
			}
			select {
			case err := <-locked:
				require.ErrorIs(t, err, ErrClosed)
			case <-time.After(10 * time.Second):
				t.Fatal("the Lock did not return after Close")
			}
		})
	}
}
