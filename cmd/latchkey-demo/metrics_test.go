package main

import (
	"context"
	"io"
	"net/http"
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
	srv, err := redistest.StartProcess(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	m, err := startMetrics()
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
	if err != nil || !strings.Contains(string(body), `latchkey_lock_acquisitions_total{latchkey_kind="mutex",latchkey_reentry="false"} 3`) {
		t.Errorf("GET %s: %v\n%s", m.URL, err, body)
	}
	s, err := m.Summary()
	if err != nil {
		t.Fatal(err)
	}
	if s.Acquired != 3 || s.Reentries != 3 || s.Waits["acquired"] != 3 || s.Lost != 0 || s.Series == 0 {
		t.Errorf("summary %+v; want 3 acquired, 3 re-entries, 3 waits acquired", s)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
}
