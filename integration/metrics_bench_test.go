package integration

import (
	"context"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/latchkey/latchkey/rlock"
)

// BenchmarkLockUnlockMetrics: an uncontended Lock+Unlock on standalone
// Redis without providers (the default: no instrument is touched), with
// the OTel SDK's metrics, and with metrics and a tracer. Compare allocs/op
// and ns/op between the three:
//
//	cd integration && go test -run '^$' -bench LockUnlockMetrics -benchmem .
func BenchmarkLockUnlockMetrics(b *testing.B) {
	tp := topologies()[0]
	for _, bc := range []struct {
		name string
		opts func() rlock.Options
	}{
		{"off", func() rlock.Options { return rlock.Options{} }},
		{"metrics", func() rlock.Options {
			return rlock.Options{MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))}
		}},
		{"metrics+traces", func() rlock.Options {
			return rlock.Options{MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader())),
				TracerProvider: sdktrace.NewTracerProvider()}
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			m := lockClient(b, tp, bc.opts()).Mutex(lockName(b))
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				lctx, err := m.Lock(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if err := m.Unlock(lctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
