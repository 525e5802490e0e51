package rlock

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.opentelemetry.io/otel/metric/noop"
)

// TestObserverOff: without providers a client has no observer, and every
// hook on a nil observer, for every kind, allocates nothing: the metrics
// cost a Lock nothing unless asked for.
func TestObserverOff(t *testing.T) {
	ob, err := newObserver(Options{MetricsLockName: true})
	if err != nil || ob != nil {
		t.Fatalf("newObserver without providers = %v, %v; want nil, nil", ob, err)
	}
	ctx := context.Background()
	for k := range numKinds {
		allocs := testing.AllocsPerRun(100, func() {
			a := ob.begin(ctx, k, "name")
			a.waiting()
			a.end(ctx, nil)
			a.endWait(ctx, nil)
			ob.add(acquisitions, k, "name", 1, reentry)
			ob.add(wakeups, k, "name", 1, plain)
			ob.ended(k, "name", time.Time{}, errFoundGone)
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations per acquire with metrics off, want 0", kindNames[k], allocs)
		}
	}
}

// TestObserverSets: without Options.MetricsLockName every measurement's
// attribute set is built once, at NewClient, and none names the lock.
func TestObserverSets(t *testing.T) {
	for _, named := range []bool{false, true} {
		ob, err := newObserver(Options{MeterProvider: noop.NewMeterProvider(), MetricsLockName: named})
		if err != nil {
			t.Fatal(err)
		}
		for k := range numKinds {
			for v := range numVariants {
				built := ob.sets[k][v] != nil
				if built == named {
					t.Errorf("MetricsLockName %v: set of %s/%d built: %v", named, kindNames[k], v, built)
				}
				want := 1 // the kind
				if named {
					want++
				}
				if v != plain {
					want++
				}
				if got := len(attrList(k, "name", named, v)); got != want {
					t.Errorf("MetricsLockName %v: %s/%d has %d attributes, want %d", named, kindNames[k], v, got, want)
				}
			}
		}
	}
}

// TestOutcome: how an acquire's result is classified.
func TestOutcome(t *testing.T) {
	live := context.Background()
	cancelled, cancel := context.WithCancel(live)
	cancel()
	expired, stop := context.WithDeadline(live, time.Now().Add(-time.Second))
	defer stop()
	for _, c := range []struct {
		ctx  context.Context
		err  error
		want variant
	}{
		{live, nil, outAcquired},
		{live, fmt.Errorf("%w: after 1s", errBusy), outTimeout},
		{expired, context.DeadlineExceeded, outTimeout},
		{expired, errors.New("a reply cut short by the deadline"), outTimeout},
		{cancelled, context.Canceled, outCancelled},
		{live, ErrClosed, outCancelled},
		{live, errors.New("NOSCRIPT"), outError},
	} {
		if got := outcome(c.ctx, c.err); got != c.want {
			t.Errorf("outcome(%v, %v) = %v, want %v", c.ctx.Err(), c.err, variantAttrs[got].Value.Emit(), variantAttrs[c.want].Value.Emit())
		}
	}
}
