package main

import (
	"bytes"
	"errors"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/latchkey/latchkey/internal/childproc"
	"github.com/latchkey/latchkey/internal/latency"
	"github.com/latchkey/latchkey/rlock"
)

// TestMain is also the demo's worker when TestDemo re-executes this test
// binary as one.
func TestMain(m *testing.M) {
	if childproc.Role() == workerRole {
		os.Exit(workerMain())
	}
	goleak.VerifyTestMain(m)
}

// TestDemo runs the demo end to end, briefly: both phases succeed, each
// says where its workers serve /metrics, and the OpenTelemetry summary
// read back from them counts the acquisitions the demo counted itself.
func TestDemo(t *testing.T) {
	var out, errs bytes.Buffer
	if code := run([]string{"-procs", "2", "-g", "2", "-dur", "1s"}, &out, &errs); code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errs.String())
	}
	report := out.String()
	served := regexp.MustCompile(`(?m)^(pubsub|spin): the workers serve their OpenTelemetry metrics during the phase at http://127\.0\.0\.1:\d+/metrics http://127\.0\.0\.1:\d+/metrics$`)
	if n := len(served.FindAllString(report, -1)); n != 2 {
		t.Errorf("%d phases said where /metrics is served, want 2:\n%s", n, report)
	}
	counted := regexp.MustCompile(`(?m)^(pubsub|spin): counter \d+ = (\d+) acquisitions: exclusion OK$`).FindAllStringSubmatch(report, -1)
	recorded := regexp.MustCompile(`(?m)^  holds +(\d+) acquisitions, \d+ re-entries, 0 locks lost;`).FindAllStringSubmatch(report, -1)
	if len(counted) != 2 || len(recorded) != 2 {
		t.Fatalf("want both phases' counts and metrics:\n%s", report)
	}
	for i := range counted {
		if counted[i][2] != recorded[i][1] || counted[i][2] == "0" {
			t.Errorf("%s: the demo counted %s acquisitions, latchkey.lock.acquisitions %s", counted[i][1], counted[i][2], recorded[i][1])
		}
	}
	for _, want := range []string{"wait p99 (OTel, est.)", "locks lost (OTel)", "pubsub: `latchkey list` in mid-phase:"} {
		if !strings.Contains(report, want) {
			t.Errorf("the report lacks %q:\n%s", want, report)
		}
	}
}

// waits is a histogram of waits given in µs.
func waits(us ...int64) *latency.Histogram {
	var h latency.Histogram
	for _, u := range us {
		h.Record(time.Duration(u) * time.Microsecond)
	}
	return &h
}

func TestFmtWait(t *testing.T) {
	for _, c := range []struct {
		h    *latency.Histogram
		p    float64
		want string
	}{{waits(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 50, "5µs"}, {waits(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 100, "10µs"},
		{waits(42), 99, "42µs"}, {waits(850, 12345), 99, "12.3ms"}, {nil, 99, "-"}, {waits(), 50, "-"}} {
		if got := fmtWait(c.h, c.p); got != c.want {
			t.Errorf("fmtWait(p%v) = %q, want %q", c.p, got, c.want)
		}
	}
}

func TestFormatting(t *testing.T) {
	for _, c := range []struct {
		a, b float64
		want string
	}{{14, 10, "1.4x"}, {2, 10, "0.2x"}, {1, 47, "0.021x"}, {250, 10, "25x"}, {997, 1000, "1.0x"}, {994, 1000, "0.99x"}, {1, 0, "n/a"}, {0, 0, "n/a"}} {
		if got := ratio(c.a, c.b); got != c.want {
			t.Errorf("ratio(%v, %v) = %q, want %q", c.a, c.b, got, c.want)
		}
	}
}

// TestAggregator feeds two workers' reports of a 1.5 s phase out of order: a
// second is printed only once both have reported it, and the last, partial
// second's rate is over its 0.5 s.
func TestAggregator(t *testing.T) {
	var out bytes.Buffer
	res := &phaseResult{mode: "spin", dur: 1500 * time.Millisecond}
	cmds := int64(0)
	a := newAggregator(&out, false, res, 2, func() (int64, error) { cmds += 100; return cmds, nil })
	if err := a.start(); err != nil {
		t.Fatal(err)
	}
	reports := []report{
		{Worker: 1, Second: 1, Acquired: 2, Waits: waits(10, 3000), Attempts: 3},
		{Worker: 1, Second: 2, Acquired: 1, Waits: waits(7), Attempts: 1, Errors: 1, LastErr: "boom"},
		{Worker: 2, Second: 1, Acquired: 1, Waits: waits(20), Attempts: 1},
		{Worker: 2, Second: 2, Acquired: 1, Waits: waits(5), Attempts: 3, Overlaps: 1},
	}
	for i, r := range reports {
		if err := a.add(r); err != nil {
			t.Fatal(err)
		}
		if lines := strings.Count(out.String(), "\n"); lines != []int{0, 0, 1, 2}[i] {
			t.Fatalf("after report %d: %d lines:\n%s", i, lines, out.String())
		}
	}
	if !a.complete() {
		t.Fatal("not complete after every report")
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	for i, want := range [][]string{
		{"spin", "1.0s", " 3 acq/s", "p99 wait   3.0ms", "total       3", "1.33 attempts/acq"},
		{"spin", "1.5s", " 4 acq/s", "p99 wait     7µs", "total       5", "2.00 attempts/acq"},
	} {
		for _, w := range want {
			if !strings.Contains(lines[i], w) {
				t.Errorf("line %d %q lacks %q", i+1, lines[i], w)
			}
		}
	}
	if res.acquired != 5 || res.attempts != 8 || res.errors != 1 || res.overlaps != 1 || res.lastErr != "boom" {
		t.Errorf("totals: %+v", res)
	}
	if w := &res.waits; w.Count() != 5 || w.Min() != 5*time.Microsecond || fmtWait(w, 50) != "10µs" || w.Max() != 3*time.Millisecond {
		t.Errorf("waits: %d, min %v, p50 %s, max %v; want all five, 5µs, 10µs, 3ms", w.Count(), w.Min(), fmtWait(w, 50), w.Max())
	}
	if err := a.add(report{Worker: 1, Second: 3}); err == nil {
		t.Error("a second past the end was accepted")
	}
}

func TestAggregatorSampleError(t *testing.T) {
	res := &phaseResult{mode: "pubsub", dur: time.Second}
	a := newAggregator(&bytes.Buffer{}, false, res, 1, func() (int64, error) { return 0, errors.New("down") })
	if err := a.add(report{Worker: 1, Second: 1}); err == nil {
		t.Error("a failed INFO was not reported")
	}
}

// TestVerdict: the verdict names, figure by figure, where pub/sub does
// better than spin and where it pays, with pub/sub's figure as a ratio of
// spin's; figures within levelBand are level, and the pub/sub calls, of
// which spin has none, are given as both phases' figures.
func TestVerdict(t *testing.T) {
	for _, c := range []struct {
		name   string
		ps, sp *phaseResult
		want   string
	}{{
		name: "pub/sub wins on all but its subscriptions",
		ps: &phaseResult{mode: "pubsub", dur: 10 * time.Second, acquired: 1400, commands: 1400 * 5, cpuSeconds: 0.14, waits: *waits(100, 200),
			cmdstats: map[string]int64{"subscribe": 700, "unsubscribe": 700, "evalsha": 2800}},
		sp: &phaseResult{mode: "spin", dur: 10 * time.Second, acquired: 1000, commands: 1000 * 25, cpuSeconds: 0.4, waits: *waits(100, 1000),
			cmdstats: map[string]int64{"evalsha": 9000}},
		want: "verdict: pub/sub wins on throughput (1.4x spin's), p99 wait (0.2x spin's), Redis CPU per acquisition (0.25x spin's) and " +
			"Redis commands per acquisition (0.2x spin's); it pays in SUBSCRIBE+UNSUBSCRIBE per acquisition (0.50 + 0.50 against spin's 0.00 + 0.00).",
	}, {
		name: "pub/sub pays in Redis' work, throughput level",
		ps: &phaseResult{mode: "pubsub", dur: 10 * time.Second, acquired: 1000, commands: 40000, cpuSeconds: 0.8, waits: *waits(100, 200),
			cmdstats: map[string]int64{"ssubscribe": 1100, "sunsubscribe": 1050}},
		sp: &phaseResult{mode: "spin", dur: 10 * time.Second, acquired: 980, commands: 15000, cpuSeconds: 0.55, waits: *waits(100, 1000)},
		want: "verdict: pub/sub wins on p99 wait (0.2x spin's); it pays in Redis CPU per acquisition (1.4x spin's), Redis commands per acquisition (2.6x spin's) " +
			"and SUBSCRIBE+UNSUBSCRIBE per acquisition (1.10 + 1.05 against spin's 0.00 + 0.00); level (within 5%) on throughput (1.0x spin's).",
	}, {
		name: "spin acquired nothing",
		ps:   &phaseResult{mode: "pubsub", dur: time.Second, acquired: 10, commands: 100, cpuSeconds: 0.001, waits: *waits(5)},
		sp:   &phaseResult{mode: "spin", dur: time.Second},
		want: "verdict: pub/sub wins on throughput (spin's is 0); it pays in nothing here.",
	}} {
		if got := verdict(c.ps, c.sp); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
	}
}

// TestSummary: the side-by-side table has the share of 1/cs, the pub/sub
// calls per acquisition and the exclusion check, and ends with the verdict.
func TestSummary(t *testing.T) {
	ps := &phaseResult{mode: "pubsub", dur: 10 * time.Second, acquired: 1400, commands: 1400 * 5, cpuSeconds: 0.14, waits: *waits(100, 200), counter: 1400,
		cmdstats: map[string]int64{"subscribe": 700, "unsubscribe": 350}}
	sp := &phaseResult{mode: "spin", dur: 10 * time.Second, acquired: 1000, commands: 1000 * 25, cpuSeconds: 0.4, waits: *waits(100, 1000), counter: 999}
	if !ps.ok() || sp.exclusionOK() {
		t.Error("exclusion check: a lost increment must be a violation")
	}
	var out bytes.Buffer
	printSummary(&out, config{cs: time.Millisecond}, ps, sp)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	for _, w := range []string{"% of 1/cs (1000/s)", "14.0%", "VIOLATION", verdict(ps, sp)} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("summary lacks %q:\n%s", w, out.String())
		}
	}
	for _, w := range [][]string{{"SUBSCRIBE/acq", "0.50", "0.00"}, {"UNSUBSCRIBE/acq", "0.25", "0.00"}} {
		found := false
		for _, l := range lines {
			if f := strings.Fields(l); len(f) == 3 && f[0] == w[0] && f[1] == w[1] && f[2] == w[2] {
				found = true
			}
		}
		if !found {
			t.Errorf("summary has no row %v:\n%s", w, out.String())
		}
	}
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "verdict: ") {
		t.Errorf("the summary ends with %q, want the verdict", last)
	}
}

// TestFlushRequired: the demo refuses a Redis of the user's unless -flush
// allows it to empty it, before it connects to anything, and -flush without
// -addr; with both it runs on that Redis, and empties it.
func TestFlushRequired(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-addr", "127.0.0.1:1"}, "give -flush as well"},
		{[]string{"-flush"}, "-flush is for a Redis given with -addr"},
	} {
		var out, errs bytes.Buffer
		if code := run(c.args, &out, &errs); code != 2 || !strings.Contains(errs.String(), c.want) || out.Len() != 0 {
			t.Errorf("run(%q): exit %d, stdout %q, stderr %q; want exit 2, nothing done and %q", c.args, code, out.String(), errs.String(), c.want)
		}
	}

	srv, rc := startRedis(t)
	if err := rc.Do(t.Context(), rc.B().Set().Key("kept").Value("1").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	var out, errs bytes.Buffer
	if code := run([]string{"-addr", srv.Addr, "-flush", "-procs", "1", "-dur", "1s"}, &out, &errs); code != 0 {
		t.Fatalf("with -flush: exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errs.String())
	}
	if n, err := rc.Do(t.Context(), rc.B().Exists().Key("kept").Build()).AsInt64(); err != nil || n != 0 {
		t.Errorf("EXISTS kept after the demo with -flush: %d, %v; want it flushed", n, err)
	}
	if !strings.Contains(out.String(), "redis: "+srv.Addr+" (from -addr, -flush)") {
		t.Errorf("the report does not say it used -addr:\n%s", out.String())
	}
}

// TestListTable: a held lock has a row per holder, and a lock between two
// holders a row that says it is free, and kept for a woken waiter when it
// is, with its queue.
func TestListTable(t *testing.T) {
	now := time.Now()
	got, err := listTable([]rlock.LockInfo{
		{Name: "held", Holders: []rlock.Holder{{Count: 1, Token: 7, Since: now.Add(-3 * time.Millisecond), Client: rlock.ClientInfo{Name: "worker 2", PID: 42}}},
			LeaseLeft: 30 * time.Second, WaitersTotal: 5},
		{Name: "handover", ReservedFor: "client-id", WaitersTotal: 31},
		{Name: "idle"},
	}, now)
	if err != nil {
		t.Fatal(err)
	}
	rows := strings.Split(strings.TrimRight(got, "\n"), "\n")
	want := [][]string{
		{"NAME", "HOLDER", "PID", "HOLDS", "TOKEN", "HELD", "FOR", "LEASE", "LEFT", "CLIENTS", "QUEUED"},
		{"held", "worker", "2", "42", "1", "7", "3ms", "30s", "5"},
		{"handover", "(free,", "kept", "for", "the", "woken", "waiter)", "-", "-", "-", "-", "-", "31"},
		{"idle", "(free)", "-", "-", "-", "-", "-", "0"},
	}
	if len(rows) != len(want) {
		t.Fatalf("%d rows, want %d:\n%s", len(rows), len(want), got)
	}
	for i, w := range want {
		if f := strings.Fields(rows[i]); !slices.Equal(f, w) {
			t.Errorf("row %d: %q, want %q", i, f, w)
		}
	}
}

// TestStatsCutOff: a Lock the phase's end cut off adds its wait, so that a
// starved waiter shows in the tail, but no acquisition, so that the counter
// check still matches acquisitions.
func TestStatsCutOff(t *testing.T) {
	var st stats
	st.acquired(time.Millisecond)
	st.cutOff(2 * time.Second)
	r := st.take(1, 1)
	if r.Acquired != 1 || r.Waits.Count() != 2 || r.Waits.Max() != 2*time.Second {
		t.Errorf("report: acquired %d, %d waits, max %v; want 1, 2, 2s", r.Acquired, r.Waits.Count(), r.Waits.Max())
	}
	if r := st.take(1, 2); r.Acquired != 0 || r.Waits != nil {
		t.Errorf("the next second starts empty, got acquired %d, waits %v", r.Acquired, r.Waits)
	}
}
