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
// the OTel SDK's metrics, and with metrics and a tracer; and a SpinMutex's
// without providers. Compare allocs/op and ns/op between them, and with
// the commit before the instrumentation (aeb6ec3: 32 allocs/op for both
// kinds):
//
//	cd integration && go test -run '^$' -bench LockUnlockMetrics -benchmem .
func BenchmarkLockUnlockMetrics(b *testing.B) {
	tp := topologies()[0]
	for _, bc := range []struct {
		name string
		spin bool
		opts func() rlock.Options
	}{
		{"off", false, func() rlock.Options { return rlock.Options{} }},
		{"metrics", false, func() rlock.Options {
			return rlock.Options{MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))}
		}},
		{"metrics+traces", false, func() rlock.Options {
			return rlock.Options{MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader())),
				TracerProvider: sdktrace.NewTracerProvider()}
		}},
		{"spin-off", true, func() rlock.Options { return rlock.Options{} }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c := lockClient(b, tp, bc.opts())
			m := c.Mutex(lockName(b))
			if bc.spin {
				m = c.SpinMutex(lockName(b))
			}
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
