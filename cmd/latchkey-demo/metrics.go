package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// workerMetrics is a worker's OpenTelemetry pipeline: the SDK's meter
// provider, read by the Prometheus exporter into a registry of the
// worker's own, served at URL (loopback, a free port) for as long as the
// worker runs. The library only sees the MeterProvider.
type workerMetrics struct {
	Provider *sdkmetric.MeterProvider
	URL      string
	reg      *prometheus.Registry
	srv      *http.Server
	served   chan error
}

func startMetrics() (*workerMetrics, error) {
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo(), otelprom.WithoutTargetInfo())
	if err != nil {
		return nil, fmt.Errorf("the Prometheus exporter: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listening for /metrics: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	m := &workerMetrics{Provider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp)), URL: "http://" + ln.Addr().String() + "/metrics",
		reg: reg, srv: &http.Server{Handler: mux}, served: make(chan error, 1)}
	go func() { m.served <- m.srv.Serve(ln) }()
	return m, nil
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
	Waits     map[string]uint64 `json:"waits"` // latchkey_lock_wait_duration_seconds count by outcome
	Contended float64           `json:"contended"`
	Acquired  float64           `json:"acquired"`
	Reentries float64           `json:"reentries"`
	Lost      float64           `json:"lost"`
	Renewals  float64           `json:"renewals"`
	Wakeups   float64           `json:"wakeups"`
	Unclaimed float64           `json:"unclaimed"`
	Series    int               `json:"series"` // latchkey_ series served
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
				s.Waits[labels["latchkey_outcome"]] += mt.GetHistogram().GetSampleCount()
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
			case "latchkey_watchdog_renewals_total":
				s.Renewals += v
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
	s.Contended += o.Contended
	s.Acquired += o.Acquired
	s.Reentries += o.Reentries
	s.Lost += o.Lost
	s.Renewals += o.Renewals
	s.Wakeups += o.Wakeups
	s.Unclaimed += o.Unclaimed
	s.Series += o.Series
}
