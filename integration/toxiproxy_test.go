package integration

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// netProxy is an in-process toxiproxy between the clients under test and one
// Redis: the network faults (latency, blackholes, resets, lost pub/sub
// messages) are toxics on it. No HTTP API runs; toxics go in through the
// proxy's Go API.
type netProxy struct {
	p *toxiproxy.Proxy
	// Addr is where clients connect instead of the Redis itself.
	Addr string
}

// toxiproxyGoroutineGrace is how long a stopped proxy's goroutines may take
// to end: its link goroutines notice their closed connections asynchronously.
const toxiproxyGoroutineGrace = 5 * time.Second

// startProxy starts a proxy to upstream on a free loopback port. It stops
// when the test ends, after the clients the test opened later (cleanups run
// in reverse), and the test then fails if any toxiproxy goroutine is left.
func startProxy(t *testing.T, upstream string) *netProxy {
	t.Helper()
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	p := toxiproxy.NewProxy(srv, lockName(t), "127.0.0.1:0", upstream)
	require.NoError(t, p.Start())
	t.Cleanup(func() {
		// Removing the toxics first lets each one flush or drop what it
		// holds; a toxic stopped mid-send could otherwise block forever.
		p.Toxics.ResetToxics(context.Background())
		p.Stop()
		requireNoToxiproxyGoroutines(t)
	})
	return &netProxy{p: p, Addr: p.Listen}
}

// toxic is one toxic as toxiproxy's JSON describes it.
type toxic struct {
	Name       string  `json:"name"`
	Type       string  `json:"type"`
	Stream     string  `json:"stream"` // "upstream" (to Redis) or "downstream" (to the client)
	Toxicity   float32 `json:"toxicity"`
	Attributes any     `json:"attributes,omitempty"`
}

// add installs a toxic on every current and future connection. Toxicity
// defaults to 1 (every connection).
func (x *netProxy) add(t testing.TB, tx toxic) {
	t.Helper()
	if tx.Toxicity == 0 {
		tx.Toxicity = 1
	}
	b, err := json.Marshal(tx)
	require.NoError(t, err)
	_, err = x.p.Toxics.AddToxicJson(strings.NewReader(string(b)))
	require.NoError(t, err, "adding toxic %s", b)
}

// remove takes a toxic off. For a blackhole ("timeout" toxic) that also
// closes every connection it swallowed data from: the replies are lost and
// the client sees a reset.
func (x *netProxy) remove(t testing.TB, name string) {
	t.Helper()
	require.NoError(t, x.p.Toxics.RemoveToxic(context.Background(), name))
}

// blackhole makes the proxy swallow everything sent in the given direction
// until it is removed, without closing anything.
func (x *netProxy) blackhole(t testing.TB, name, stream string) {
	x.add(t, toxic{Name: name, Type: "timeout", Stream: stream, Attributes: map[string]int{"timeout": 0}})
}

// requireNoToxiproxyGoroutines fails the test if a goroutine running
// toxiproxy code outlives the proxy's Stop. The package's goleak check would
// catch it too, but only at the very end and without saying which test.
func requireNoToxiproxyGoroutines(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(toxiproxyGoroutineGrace)
	for {
		left := slices.DeleteFunc(toxiproxyGoroutines(), orphanedStub)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("%d toxiproxy goroutine(s) still running %v after Stop:\n%s", len(left), toxiproxyGoroutineGrace, strings.Join(left, "\n\n"))
			return
		}
		time.Sleep(10 * time.Millisecond) // polling the goroutine list: no event to wait for
	}
}

// orphanedStub tells the toxiproxy goroutines the harness lets outlive
// their proxy: a link's first stub blocked for good sending to the next one
// in its chain, and the link's reader blocked sending to that stub.
// toxiproxy v2.12.0's RemoveToxic of a toxic whose Cleanup closes its stub
// (the blackhole's "timeout") returns without re-linking the stub before
// it (link.go), so a chunk that stub read meanwhile has no reader. They hold
// a chunk each and nothing else. The module run beside a CPU burner met
// them once a run (TestHarnessBlackholeRemovedUnderTraffic reproduces them).
func orphanedStub(g string) bool {
	return strings.Contains(g, " [chan send") &&
		(strings.Contains(g, "toxics.(*NoopToxic).Pipe(") || strings.Contains(g, "stream.(*ChanWriter).Write("))
}

// orphanedStubIgnores are orphanedStub for the package's final goleak
// check, which cannot see a goroutine's state: requireNoToxiproxyGoroutines,
// after each proxy, still fails on such a goroutine not blocked sending.
var orphanedStubIgnores = []goleak.Option{
	goleak.IgnoreTopFunction("github.com/Shopify/toxiproxy/v2/toxics.(*NoopToxic).Pipe"),
	goleak.IgnoreTopFunction("github.com/Shopify/toxiproxy/v2/stream.(*ChanWriter).Write"),
}

func toxiproxyGoroutines() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "github.com/Shopify/toxiproxy/") {
			out = append(out, g)
		}
	}
	return out
}

// TestHarnessBlackholeRemovedUnderTraffic: a blackhole taken off while its
// client keeps sending orphans toxiproxy stubs (orphanedStub), which made
// every later test's proxy check fail in a run under load. Fifty rounds
// orphan some (20 orphaned 9 when this was written); the proxy's own check,
// at cleanup, must pass with them and fail on anything else.
func TestHarnessBlackholeRemovedUnderTraffic(t *testing.T) {
	x := startProxy(t, standalone.Addr)
	for range 50 {
		conn, err := net.Dial("tcp", x.Addr)
		require.NoError(t, err)
		var wg sync.WaitGroup
		wg.Go(func() {
			for {
				if _, err := conn.Write([]byte("PING\r\n")); err != nil {
					return
				}
			}
		})
		wg.Go(func() { _, _ = io.Copy(io.Discard, conn) })
		x.blackhole(t, "drop", "upstream")
		x.remove(t, "drop")
		require.NoError(t, conn.Close())
		wg.Wait()
	}
}
