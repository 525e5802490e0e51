package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/latchkey/latchkey/internal/units"
)

// workerMetrics is a worker's OpenTelemetry pipeline: the SDK's meter
// provider, read by the Prometheus exporter into a registry of the
// worker's own, served at URL for as long as the worker runs. The library
// only sees the MeterProvider.
type workerMetrics struct {
	Provider *sdkmetric.MeterProvider
	URL      string
	reg      *prometheus.Registry
	srv      *http.Server
	served   chan error
}

// startMetrics serves /metrics at addr (host:port, port 0 for a free one).
func startMetrics(addr string) (*workerMetrics, error) {
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo(), otelprom.WithoutTargetInfo())
	if err != nil {
		return nil, fmt.Errorf("the Prometheus exporter: %w", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening for /metrics (-metrics): %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	m := &workerMetrics{Provider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp)), URL: "http://" + ln.Addr().String() + "/metrics",
		reg: reg, srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}, served: make(chan error, 1)}
	go func() { m.served <- m.srv.Serve(ln) }()
	return m, nil
}

// workerMetricsAddr is where worker id (from 1) serves: addr's port plus
// id-1, or a free port of its own when addr's port is 0.
func workerMetricsAddr(addr string, id int) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", err
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return "", fmt.Errorf("port %q: %w", port, err)
	}
	if p != 0 {
		p += id - 1
	}
	return net.JoinHostPort(host, strconv.Itoa(p)), nil
}

// Close stops serving and shuts the provider down.
func (m *workerMetrics) Close() error {
	err := m.srv.Close()
	if serr := <-m.served; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return errors.Join(err, m.Provider.Shutdown(context.Background()))
}

// metricsSummary is what the demo prints of the latchkey_* metrics, summed
// over the workers: read back from each worker's Prometheus registry, so
// it shows what a scrape of /metrics would.
type metricsSummary struct {
	Waits map[string]uint64 `json:"waits"` // latchkey_lock_wait_duration_seconds count by outcome
	// WaitBuckets are the acquired waits' histogram buckets, cumulative,
	// +Inf left out (its count is Waits["acquired"]).
	WaitBuckets     []bucket `json:"wait_buckets"`
	Contended       float64  `json:"contended"`
	Acquired        float64  `json:"acquired"`
	Reentries       float64  `json:"reentries"`
	Lost            float64  `json:"lost"`
	Renewals        float64  `json:"renewals"`
	RenewalFailures float64  `json:"renewal_failures"`
	WakeupsSent     float64  `json:"wakeups_sent"`
	Wakeups         float64  `json:"wakeups"` // received
	Unclaimed       float64  `json:"unclaimed"`
	Series          int      `json:"series"` // latchkey_ series served
}

// bucket is one histogram bucket: how many observations were at most Le.
type bucket struct {
	Le    float64 `json:"le"`
	Count uint64  `json:"count"`
}

// Summary gathers the registry.
func (m *workerMetrics) Summary() (metricsSummary, error) {
	fams, err := m.reg.Gather()
	if err != nil {
		return metricsSummary{}, err
	}
	s := metricsSummary{Waits: map[string]uint64{}}
	for _, f := range fams {
		name := f.GetName()
		if !strings.HasPrefix(name, "latchkey_") {
			continue
		}
		for _, mt := range f.GetMetric() {
			s.Series++
			labels := map[string]string{}
			for _, l := range mt.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			v := mt.GetCounter().GetValue()
			switch name {
			case "latchkey_lock_wait_duration_seconds":
				outcome := labels["latchkey_outcome"]
				s.Waits[outcome] += mt.GetHistogram().GetSampleCount()
				if outcome == "acquired" {
					var bs []bucket
					for _, b := range mt.GetHistogram().GetBucket() {
						bs = append(bs, bucket{Le: b.GetUpperBound(), Count: b.GetCumulativeCount()})
					}
					s.WaitBuckets = mergeBuckets(s.WaitBuckets, bs)
				}
			case "latchkey_lock_contended_total":
				s.Contended += v
			case "latchkey_lock_acquisitions_total":
				if labels["latchkey_reentry"] == "true" {
					s.Reentries += v
				} else {
					s.Acquired += v
				}
			case "latchkey_lock_lost_total":
				s.Lost += v
			case "latchkey_lock_wakeups_sent_total":
				s.WakeupsSent += v
			case "latchkey_watchdog_renewals_total":
				s.Renewals += v
			case "latchkey_watchdog_renewal_failures_total":
				s.RenewalFailures += v
			case "latchkey_notify_wakeups_received_total":
				s.Wakeups += v
			case "latchkey_notify_wakeups_unclaimed_total":
				s.Unclaimed += v
			}
		}
	}
	return s, nil
}

// add sums o into s.
func (s *metricsSummary) add(o *metricsSummary) {
	if s.Waits == nil {
		s.Waits = map[string]uint64{}
	}
	for k, v := range o.Waits {
		s.Waits[k] += v
	}
	s.WaitBuckets = mergeBuckets(s.WaitBuckets, o.WaitBuckets)
	s.Contended += o.Contended
	s.Acquired += o.Acquired
	s.Reentries += o.Reentries
	s.Lost += o.Lost
	s.Renewals += o.Renewals
	s.RenewalFailures += o.RenewalFailures
	s.WakeupsSent += o.WakeupsSent
	s.Wakeups += o.Wakeups
	s.Unclaimed += o.Unclaimed
	s.Series += o.Series
}

// mergeBuckets sums two cumulative histograms bound by bound; a bound only
// one of them has (none do: every worker's instrument has the same
// boundaries) takes the other's count at the bound below it.
func mergeBuckets(a, b []bucket) []bucket {
	out := make([]bucket, 0, max(len(a), len(b)))
	var ca, cb uint64 // each one's cumulative count so far
	for i, j := 0, 0; i < len(a) || j < len(b); {
		le := math.Inf(1)
		if i < len(a) {
			le = a[i].Le
		}
		if j < len(b) {
			le = min(le, b[j].Le)
		}
		if i < len(a) && a[i].Le == le {
			ca = a[i].Count
			i++
		}
		if j < len(b) && b[j].Le == le {
			cb = b[j].Count
			j++
		}
		out = append(out, bucket{Le: le, Count: ca + cb})
	}
	return out
}

// quantile estimates the q-quantile (0 < q <= 1) of total observations from
// their cumulative buckets, as Prometheus' histogram_quantile does: linearly
// within the bucket the rank falls in (the first from 0), and the highest
// bound when it falls beyond. ok is false without observations.
func quantile(q float64, buckets []bucket, total uint64) (v float64, ok bool) {
	if total == 0 {
		return 0, false
	}
	rank := q * float64(total)
	lower, below := 0.0, uint64(0)
	for _, b := range buckets {
		if float64(b.Count) >= rank && b.Count > below {
			return lower + (b.Le-lower)*(rank-float64(below))/float64(b.Count-below), true
		}
		lower, below = b.Le, b.Count
	}
	return lower, true
}

// fmtQuantile formats quantile's estimate in seconds, "-" for none.
func fmtQuantile(q float64, buckets []bucket, total uint64) string {
	v, ok := quantile(q, buckets, total)
	if !ok {
		return "-"
	}
	return units.Micros(v * 1e6)
}
