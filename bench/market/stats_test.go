package main

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/bench/internal/results"
)

// TestResultLatencies checks the purchase latency columns: nearest-rank
// percentiles of every purchase, in µs to 0.1, which the histogram's 0.1%
// leaves unchanged here.
func TestResultLatencies(t *testing.T) {
	s := &sim{v: variant{name: "watch"}}
	r := s.result(load{sellers: 1, buyers: 1}, time.Second, problems{})
	assert.Equal(t, [2]float64{0, 0}, [2]float64{r.P50BuyUS, r.P99BuyUS}, "no purchase")

	for i := range 100 {
		s.latencies.Record(time.Duration(100-i) * time.Microsecond)
	}
	r = s.result(load{sellers: 1, buyers: 1}, time.Second, problems{})
	assert.Equal(t, [2]float64{50, 99}, [2]float64{r.P50BuyUS, r.P99BuyUS}, "1..100µs")
}

// TestJSONShape pins the fields the doc generator reads: exactly these
// keys, with these JSON types.
func TestJSONShape(t *testing.T) {
	r := result{
		Market: results.Market{Variant: "watch", Sellers: 5, Buyers: 1, DurationS: 5.01, Listed: 10, Bought: 9,
			Retries: 3, P50BuyUS: 12.5, P99BuyUS: 99.5, Errors: 0},
		Missed: 1, SellerRetries: 2, Problems: []string{"not exported"},
	}
	var buf bytes.Buffer
	require.NoError(t, writeJSON(&buf, []result{r}))
	var got []map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &got))
	require.Len(t, got, 1)
	assert.Equal(t, map[string]any{
		"variant": "watch", "sellers": 5.0, "buyers": 1.0, "duration_s": 5.01,
		"listed": 10.0, "bought": 9.0, "retries": 3.0,
		"p50_buy_us": 12.5, "p99_buy_us": 99.5, "errors": 0.0,
	}, got[0])

	buf.Reset()
	require.NoError(t, writeJSON(&buf, nil))
	assert.JSONEq(t, "[]", buf.String())
}

func TestTablesShowEveryRun(t *testing.T) {
	rs := []result{
		{Market: results.Market{Variant: "watch", Sellers: 1, Buyers: 1, Listed: 100, Bought: 40, Retries: 120, P50BuyUS: 900, P99BuyUS: 15000}},
		{Market: results.Market{Variant: "watch", Sellers: 5, Buyers: 5, Listed: 300, Bought: 2, Errors: 1}, Problems: []string{"money not conserved"}},
	}
	var buf bytes.Buffer
	writeTables(&buf, []string{"watch"}, rs)
	out := buf.String()
	assert.Contains(t, out, "table 6-1")
	assert.Regexp(t, `1 seller, 1 buyer\s+100\s+40\s+120\s+3\.00\s+0\s+900µs\s+15\.00ms\s+0`, out)
	assert.Regexp(t, `5 sellers, 5 buyers\s+300\s+2\s+0\s+0\.00\s+0\s+-\s+-\s+1`, out)
	assert.Contains(t, out, "! 5 sellers, 5 buyers: money not conserved")
}
