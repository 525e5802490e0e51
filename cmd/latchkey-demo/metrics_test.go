package main

import (
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/redis/rueidis"

	"github.com/latchkey/latchkey/internal/redistest"
	"github.com/latchkey/latchkey/rlock"
)

// TestWorkerMetrics: a worker's client records through the SDK into the
// Prometheus exporter, /metrics serves the latchkey_ series, and the
// summary the demo prints reads them back.
func TestWorkerMetrics(t *testing.T) {
	_, rc := startRedis(t)
	m, err := startMetrics("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c, err := rlock.NewClient(rc, rlock.Options{MeterProvider: m.Provider})
	if err != nil {
		t.Fatal(err)
	}
	mu := c.Mutex("metrics")
	ctx := context.Background()
	for range 3 {
		lctx, err := mu.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		rctx, err := mu.Lock(lctx) // a re-entry
		if err != nil {
			t.Fatal(err)
		}
		if err := mu.Unlock(rctx); err != nil {
			t.Fatal(err)
		}
		if err := mu.Unlock(lctx); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := http.Get(m.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("GET %s: %v", m.URL, err)
	}
	for _, want := range []string{
		`latchkey_lock_acquisitions_total{latchkey_kind="mutex",latchkey_reentry="false"} 3`,
		`latchkey_lock_wait_duration_seconds_count{latchkey_kind="mutex",latchkey_outcome="acquired"} 3`,
		`latchkey_lock_hold_duration_seconds_count{latchkey_kind="mutex"} 3`,
		`latchkey_watchdog_leases 0`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("GET %s lacks %s:\n%s", m.URL, want, body)
		}
	}
	s, err := m.Summary()
	if err != nil {
		t.Fatal(err)
	}
	if s.Acquired != 3 || s.Reentries != 3 || s.Waits["acquired"] != 3 || s.Lost != 0 || s.Series == 0 {
		t.Errorf("summary %+v; want 3 acquired, 3 re-entries, 3 waits acquired", s)
	}
	// The buckets are the instrument's (16 bounds, up to 60 s), cumulative,
	// with every wait below the last.
	if n := len(s.WaitBuckets); n != 16 || s.WaitBuckets[n-1].Le != 60 || s.WaitBuckets[n-1].Count != 3 {
		t.Errorf("wait buckets %+v; want 16 up to 60 s, holding all 3 waits", s.WaitBuckets)
	}
	if p99, ok := quantile(0.99, s.WaitBuckets, 3); !ok || p99 <= 0 || p99 > 60 {
		t.Errorf("p99 of the waits: %v, %v", p99, ok)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestQuantile(t *testing.T) {
	// 10 observations: 4 up to 1, 4 in (1, 2], 2 in (2, 4].
	bs := []bucket{{1, 4}, {2, 8}, {4, 10}}
	for _, c := range []struct {
		q    float64
		want float64
	}{{0.2, 0.5}, {0.4, 1}, {0.5, 1.25}, {0.9, 3}, {1, 4}} {
		if got, ok := quantile(c.q, bs, 10); !ok || got != c.want {
			t.Errorf("quantile(%v) = %v, %v; want %v", c.q, got, ok, c.want)
		}
	}
	// Two more beyond the last bound: the top quantiles are that bound.
	if got, _ := quantile(0.99, bs, 12); got != 4 {
		t.Errorf("quantile in +Inf = %v, want 4", got)
	}
	// An empty bucket before the rank is skipped, not divided by.
	if got, _ := quantile(0.5, []bucket{{1, 0}, {2, 0}, {4, 2}}, 2); got != 3 {
		t.Errorf("quantile after empty buckets = %v, want 3", got)
	}
	if _, ok := quantile(0.5, nil, 0); ok || fmtQuantile(0.5, nil, 0) != "-" {
		t.Error("a quantile of no observations")
	}
	if got := fmtQuantile(0.5, bs, 10); got != "1.25s" {
		t.Errorf("fmtQuantile = %q", got)
	}
}

func TestMergeBuckets(t *testing.T) {
	a := []bucket{{1, 1}, {2, 3}, {4, 3}}
	b := []bucket{{1, 2}, {2, 2}, {4, 5}}
	want := []bucket{{1, 3}, {2, 5}, {4, 8}}
	if got := mergeBuckets(a, b); !slices.Equal(got, want) {
		t.Errorf("merge = %v, want %v", got, want)
	}
	if got := mergeBuckets(nil, b); !slices.Equal(got, b) {
		t.Errorf("merge into none = %v, want %v", got, b)
	}
	// A bound one side lacks takes that side's count at the bound below.
	if got, want := mergeBuckets([]bucket{{1, 1}, {4, 3}}, b), []bucket{{1, 3}, {2, 3}, {4, 8}}; !slices.Equal(got, want) {
		t.Errorf("merge of other bounds = %v, want %v", got, want)
	}
}

func TestMetricsAddr(t *testing.T) {
	for _, c := range []struct {
		addr  string
		id    int
		want  string
		procs int
		ok    bool
	}{
		{"127.0.0.1:0", 3, "127.0.0.1:0", 4, true},
		{"127.0.0.1:9464", 1, "127.0.0.1:9464", 4, true},
		{"127.0.0.1:9464", 4, "127.0.0.1:9467", 4, true},
		{"[::1]:9464", 2, "[::1]:9465", 2, true},
		{"localhost:65535", 1, "localhost:65535", 2, false}, // worker 2 has no port
		{"0.0.0.0:9464", 1, "0.0.0.0:9464", 1, false},       // not loopback
		{"9464", 1, "", 1, false},
	} {
		got, _ := workerMetricsAddr(c.addr, c.id)
		if got != c.want {
			t.Errorf("workerMetricsAddr(%q, %d) = %q, want %q", c.addr, c.id, got, c.want)
		}
		if err := checkMetricsAddr(c.addr, c.procs); (err == nil) != c.ok {
			t.Errorf("checkMetricsAddr(%q, %d) = %v, want ok %v", c.addr, c.procs, err, c.ok)
		}
	}
}

// startRedis starts a redis-server process of the test's own and connects
// to it; both end with the test.
func startRedis(t *testing.T) (*redistest.Server, rueidis.Client) {
	t.Helper()
	srv, err := redistest.StartProcess(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.Close)
	return srv, rc
}
