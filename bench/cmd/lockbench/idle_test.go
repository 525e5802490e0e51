package main

import (
	"math"
	"testing"
	"time"
)

// TestIdleLoad: only the reading intervals that stay the margin away from
// every event count, and their commands and CPU add up.
func TestIdleLoad(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	// A reading every 100ms for 1.2s; 10 commands and 1ms of CPU per
	// interval, but 1000 commands around the event at 650ms.
	var points []reading
	var cmds int64
	for i := 0; i <= 12; i++ {
		if i == 7 {
			cmds += 1000
		}
		points = append(points, reading{at: at(100 * i), cpu: float64(i) * 1e-3, cmds: cmds})
		cmds += 10
	}
	events := []time.Time{at(0), at(650)}
	// With a 150ms margin the event at 0 rules out [0,100] and [100,200];
	// the one at 650 rules out [400,500] to [800,900], the intervals that
	// come within 150ms of it, bounds included. Left: [200,300],
	// [300,400], [900,1000] … [1100,1200].
	idle, n, cpu := idleLoad(points, events, 150*time.Millisecond)
	if idle != 500*time.Millisecond || n != 50 || math.Abs(cpu-5e-3) > 1e-9 {
		t.Errorf("idleLoad = %v, %d commands, %v CPU s; want 500ms, 50, 0.005", idle, n, cpu)
	}
	s := &sample{start: at(0), events: []int64{at(650).UnixNano()}, points: points}
	f := s.idleFigures()
	// 250ms margin: [1000,1100] and [1100,1200] are left.
	if math.Abs(f.idleS-0.2) > 1e-9 || f.cmdsPerS != 100 || math.Abs(f.cpuMSPerS-10) > 1e-9 || f.grants != 0 {
		t.Errorf("idleFigures = %+v, want 0.2s idle, 100 cmds/s, 10 CPU ms/s", f)
	}
	if f := (&sample{start: at(0)}).idleFigures(); !math.IsNaN(f.cmdsPerS) || f.idleS != 0 {
		t.Errorf("no readings: %+v, want no idle time and NaN rates", f)
	}
}
