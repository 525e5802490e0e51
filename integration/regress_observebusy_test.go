package integration

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/rlock"
)

// busyScript keeps Redis in a script for 1.5 s, reading the clock.
const busyScript = `local s = redis.call('time')
while true do
  local n = redis.call('time')
  if (n[1] - s[1]) * 1000000 + (n[2] - s[2]) > 1500000 then return 1 end
end`

// TestRegressObserveSurvivesBusy: an observer retries Redis' refusals for a
// state it passes through (here BUSY: another client's script ran past
// busy-reply-threshold). Watch ended on every Redis error reply, so a
// watcher stopped for good when Redis was loading its data after a restart,
// busy with a script, or its Cluster in failover.
func TestRegressObserveSurvivesBusy(t *testing.T) {
	ctx := context.Background()
	srv := ownServer(t) // a server of its own: the test stalls it
	tp := topology{name: "standalone", addrs: []string{srv.Addr}}
	admin := nodeClient(t, srv.Addr)
	require.NoError(t, admin.Do(ctx, admin.B().ConfigSet().ParameterValue().ParameterValue("busy-reply-threshold", "50").Build()).Error())
	e := lockClient(t, tp, rlock.Options{}).Election(lockName(t))
	_, err := e.Leader(ctx)
	require.ErrorIs(t, err, rlock.ErrNoLeader)

	other := nodeClient(t, srv.Addr)
	ran := make(chan error, 1)
	go func() { ran <- other.Do(ctx, other.B().Eval().Script(busyScript).Numkeys(0).Build()).Error() }()
	awaitCond(t, 5*time.Second, "Redis to answer BUSY", func() bool {
		err := admin.Do(ctx, admin.B().Ping().Build()).Error()
		return err != nil && strings.HasPrefix(err.Error(), "BUSY ")
	})

	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	retried, delivered, watched := make(chan error, 16), make(chan rlock.Leadership, 16), make(chan error, 1)
	go func() {
		watched <- e.Watch(wctx, func(l rlock.Leadership) error { delivered <- l; return nil }, func(err error) {
			if err != nil {
				retried <- err
			}
		})
	}()
	select {
	case err := <-retried:
		require.ErrorContains(t, err, "BUSY")
	case err := <-watched:
		t.Fatalf("Watch ended while Redis was busy: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("no retried error while Redis was busy")
	}
	require.NoError(t, <-ran)
	select {
	case l := <-delivered:
		require.Equal(t, rlock.Leadership{}, l, "nobody leads")
	case err := <-watched:
		t.Fatalf("Watch ended: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("nothing delivered 10s after Redis was busy no more")
	}
	cancel()
	require.True(t, errors.Is(<-watched, context.Canceled))
}
