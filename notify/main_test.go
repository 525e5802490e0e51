package notify

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/internal/redistest"
)

// Servers shared by every test of the package. Tests do not run in parallel:
// some of them kill the server side of pub/sub connections, which would hit
// other tests' subscriptions too.
var (
	redisAddr    string   // standalone Redis
	clusterAddrs []string // 3 masters, Addrs[i] owns the i-th third of the slots
)

// Generous bounds for events that should happen at once; they only guard
// against hangs and make no claim about how fast anything is.
const (
	eventually = 10 * time.Second // server-side state, awaited waiters
	tick       = 5 * time.Millisecond
	longWait   = 30 * time.Second // a Wait bound that must not be what ends a Wait
)

// Options.Linger for tests of the unsubscribe itself: noLinger ends a
// channel at its last Release, shortLinger soon after it, well within
// eventually.
const (
	noLinger    = -1
	shortLinger = 20 * time.Millisecond
)

// TestMain gets real servers from the harness; RunTests checks for leaked
// goroutines with goleak once they are closed.
func TestMain(m *testing.M) {
	os.Exit(redistest.RunTests(m, "notify", true, func(e redistest.Env) {
		redisAddr, clusterAddrs = e.Standalone.Addr, e.Cluster.Addrs
	}, nil))
}

// newClient connects to addrs (a standalone server, or cluster seeds) without
// client-side caching and closes the client when the test ends.
func newClient(t *testing.T, addrs ...string) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: addrs, DisableCache: true})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

// newNodeClient talks to exactly one cluster node, for per-node state such
// as PUBSUB SHARDNUMSUB.
func newNodeClient(t *testing.T, addr string) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true, ForceSingleClient: true})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

// newHub returns a hub closed when the test ends (before its client, since
// cleanups run last-in first-out).
func newHub(t *testing.T, c rueidis.Client, opts Options) *Hub {
	t.Helper()
	h := NewHub(c, opts)
	t.Cleanup(h.Close)
	return h
}

var channelSeq atomic.Uint64

// uniqueChannel returns a channel name no other test (or run, with -count)
// uses on the same server.
func uniqueChannel(t *testing.T) string {
	return fmt.Sprintf("latchkey:notify-test:%s:%d", t.Name(), channelSeq.Add(1))
}

// numsubOf is PUBSUB NUMSUB (or SHARDNUMSUB) for one channel, as seen by the
// server c talks to. It does not fail the test, so it suits Eventually.
func numsubOf(ctx context.Context, c rueidis.Client, sharded bool, channel string) (int64, error) {
	var cmd rueidis.Completed
	if sharded {
		cmd = c.B().PubsubShardnumsub().Channel(channel).Build()
	} else {
		cmd = c.B().PubsubNumsub().Channel(channel).Build()
	}
	arr, err := c.Do(ctx, cmd).ToArray()
	if err != nil {
		return 0, err
	}
	if len(arr) != 2 {
		return 0, fmt.Errorf("NUMSUB reply has %d elements, want 2", len(arr))
	}
	if name, err := arr[0].ToString(); err != nil || name != channel {
		return 0, fmt.Errorf("NUMSUB reply names %q (%v), want %q", name, err, channel)
	}
	return arr[1].AsInt64()
}

func numsub(t *testing.T, c rueidis.Client, channel string) int64 {
	t.Helper()
	n, err := numsubOf(t.Context(), c, false, channel)
	require.NoError(t, err)
	return n
}

func requireNumsubEventually(t *testing.T, c rueidis.Client, sharded bool, channel string, want int64) {
	t.Helper()
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		n, err := numsubOf(context.Background(), c, sharded, channel)
		assert.NoError(ct, err)
		assert.Equal(ct, want, n, "subscribers of %q", channel)
	}, eventually, tick)
}

// publish publishes one message and returns how many subscribed connections
// the server delivered it to.
func publish(t *testing.T, c rueidis.Client, channel string) int64 {
	t.Helper()
	n, err := c.Do(t.Context(), c.B().Publish().Channel(channel).Message("released").Build()).AsInt64()
	require.NoError(t, err)
	return n
}

// commandCalls reads cmdstat_<name>:calls from INFO commandstats.
func commandCalls(t *testing.T, c rueidis.Client, name string) int64 {
	t.Helper()
	info, err := c.Do(t.Context(), c.B().Info().Section("commandstats").Build()).ToString()
	require.NoError(t, err)
	prefix := "cmdstat_" + name + ":calls="
	for line := range strings.Lines(info) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), prefix); ok {
			v, _, _ := strings.Cut(rest, ",")
			n, err := strconv.ParseInt(v, 10, 64)
			require.NoError(t, err, "parsing %q", line)
			return n
		}
	}
	return 0 // never called since the server started
}

// await returns the next value from ch, failing the test if none comes within
// the bound (a hang guard, not a timing claim).
func await[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	timer := time.NewTimer(eventually)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		require.FailNowf(t, "timed out", "waiting for %s", what)
		panic("unreachable")
	}
}

// pendingSubscribe starts a Subscribe to channel on another goroutine and
// returns once the hub has registered the channel: with a tapClient whose
// gate is closed, the Subscribe is then pending. Its result arrives on the
// returned channel; a Subscription it got is released at once.
func pendingSubscribe(t *testing.T, h *Hub, channel string) <-chan error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		s, err := h.Subscribe(context.Background(), channel)
		if err == nil {
			s.Release()
		}
		done <- err
	}()
	// The channel is registered in the same critical section that counts the
	// waiter, so from here on the Subscribe is (about to be) pending.
	require.Eventually(t, func() bool { return len(h.Channels()) == 1 }, eventually, tick)
	return done
}

// waitResult is what a waiter goroutine reports.
type waitResult struct {
	id   int
	wake Wake
	err  error
}

// startWaiters starts one goroutine per subscription that takes a Mark,
// reports readiness and then Waits with bound max. It returns once every
// goroutine has taken its Mark, so that any event from then on counts for
// all of them. Results arrive on the returned channel, which has room for all.
func startWaiters(t *testing.T, subs []*Subscription, max time.Duration) <-chan waitResult {
	t.Helper()
	results := make(chan waitResult, len(subs))
	ready := make(chan struct{}, len(subs))
	for i, s := range subs {
		go func() {
			mark := s.Mark()
			ready <- struct{}{}
			w, err := s.Wait(context.Background(), mark, max)
			results <- waitResult{id: i, wake: w, err: err}
		}()
	}
	for range subs {
		await(t, ready, "waiters to take their marks")
	}
	return results
}

func subscribeN(t *testing.T, h *Hub, channel string, n int) []*Subscription {
	t.Helper()
	subs := make([]*Subscription, n)
	for i := range subs {
		s, err := h.Subscribe(t.Context(), channel)
		require.NoError(t, err)
		t.Cleanup(s.Release)
		subs[i] = s
	}
	return subs
}

// tapClient wraps a client for the hub. It counts, per channel, the messages
// the hub's handler has finished with, so a test can know a published message
// was handled without guessing a delay; and, while gate is open (non-nil and
// not closed), it holds every Receive back before anything is sent, so that a
// Subscribe stays pending.
type tapClient struct {
	rueidis.Client
	gate chan struct{}

	mu      sync.Mutex
	handled map[string]int
}

func newTap(c rueidis.Client) *tapClient {
	return &tapClient{Client: c, handled: make(map[string]int)}
}

func (c *tapClient) Receive(ctx context.Context, subscribe rueidis.Completed, fn func(rueidis.PubSubMessage)) error {
	if c.gate != nil {
		select {
		case <-c.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return c.Client.Receive(ctx, subscribe, func(m rueidis.PubSubMessage) {
		fn(m)
		c.mu.Lock()
		c.handled[m.Channel]++
		c.mu.Unlock()
	})
}

func (c *tapClient) handledOn(channel string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.handled[channel]
}

// requireHandled waits until the hub has handled n messages on channel.
func (c *tapClient) requireHandled(t *testing.T, channel string, n int) {
	t.Helper()
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		assert.GreaterOrEqual(ct, c.handledOn(channel), n, "messages the hub handled on %q", channel)
	}, eventually, tick)
	require.Equal(t, n, c.handledOn(channel), "more messages handled than published on %q", channel)
}
