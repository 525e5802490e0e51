package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/redis/rueidis"

	"github.com/latchkey/latchkey/internal/latency"
	"github.com/latchkey/latchkey/internal/redisinfo"
	"github.com/latchkey/latchkey/internal/units"
	"github.com/latchkey/latchkey/rlock"
)

// phaseResult is everything measured in one phase.
type phaseResult struct {
	mode                         string
	dur                          time.Duration
	acquired, attempts, overlaps int64
	errors                       int64
	lastErr                      string
	waits                        latency.Histogram // one sample per acquisition
	counter                      int64             // the counter's final value
	commands                     int64             // redisinfo.LockCommands of cmdstats
	cmdstats                     map[string]int64  // calls per command since CONFIG RESETSTAT
	cpu0, cpuSeconds             float64           // Redis' used_cpu_sys+used_cpu_user at the start, and its increase
	metrics                      metricsSummary    // the workers' latchkey_* metrics at their end
	listing                      string            // `latchkey list` in mid-phase
}

func (r *phaseResult) exclusionOK() bool { return r.counter == r.acquired && r.overlaps == 0 }
func (r *phaseResult) ok() bool          { return r.exclusionOK() && r.errors == 0 }
func (r *phaseResult) rate() float64     { return float64(r.acquired) / r.dur.Seconds() }
func (r *phaseResult) perAcq(x float64) float64 {
	if r.acquired == 0 {
		return math.NaN()
	}
	return x / float64(r.acquired)
}

// callsPerAcq is the calls of the commands named per acquisition.
func (r *phaseResult) callsPerAcq(names []string) float64 {
	return r.perAcq(float64(redisinfo.Sum(r.cmdstats, names)))
}

// interval is all workers' reports for one second.
type interval struct {
	reports            int
	acquired, attempts int64
	waits              latency.Histogram
}

// aggregator merges the workers' reports into the phase result and prints
// one line per second once every worker has reported that second.
type aggregator struct {
	out      io.Writer
	tty      bool // overwrite the line in place
	res      *phaseResult
	procs    int
	secs     []interval // secs[k-1] is second k
	next     int        // the next second to print
	total    int64      // acquisitions printed so far
	sample   func() (int64, error)
	lastCmds int64
	lastAt   time.Time
}

// newAggregator returns an aggregator for res; sample reads Redis'
// total_commands_processed.
func newAggregator(out io.Writer, tty bool, res *phaseResult, procs int, sample func() (int64, error)) *aggregator {
	return &aggregator{out: out, tty: tty, res: res, procs: procs, secs: make([]interval, seconds(res.dur)), next: 1, sample: sample}
}

// start takes the baseline of the commands/s column.
func (a *aggregator) start() (err error) {
	a.lastCmds, err = a.sample()
	a.lastAt = time.Now()
	return err
}

func (a *aggregator) add(r report) error {
	if r.Second < 1 || r.Second > len(a.secs) {
		return fmt.Errorf("worker %d reported second %d of %d", r.Worker, r.Second, len(a.secs))
	}
	iv := &a.secs[r.Second-1]
	iv.reports++
	iv.acquired += r.Acquired
	iv.attempts += r.Attempts
	iv.waits.Merge(r.Waits)
	res := a.res
	res.acquired += r.Acquired
	res.attempts += r.Attempts
	res.overlaps += r.Overlaps
	res.errors += r.Errors
	res.waits.Merge(r.Waits)
	if r.Metrics != nil {
		res.metrics.add(r.Metrics)
	}
	if r.LastErr != "" {
		res.lastErr = r.LastErr
	}
	for ; a.next <= len(a.secs) && a.secs[a.next-1].reports == a.procs; a.next++ {
		if err := a.print(a.next); err != nil {
			return err
		}
	}
	return nil
}

func (a *aggregator) complete() bool { return a.next > len(a.secs) }

func (a *aggregator) print(k int) error {
	iv := &a.secs[k-1]
	cmds, err := a.sample()
	if err != nil {
		return err
	}
	now := time.Now()
	cmdRate := float64(cmds-a.lastCmds) / now.Sub(a.lastAt).Seconds()
	a.lastCmds, a.lastAt = cmds, now
	a.total += iv.acquired
	elapsed := min(time.Duration(k)*time.Second, a.res.dur)
	length := elapsed - time.Duration(k-1)*time.Second // the last second may be partial
	line := fmt.Sprintf("%-6s %5.1fs %7.0f acq/s  p99 wait %7s  total %7d  redis %7.0f cmd/s  %6s attempts/acq",
		a.res.mode, elapsed.Seconds(), float64(iv.acquired)/length.Seconds(), fmtWait(&iv.waits, 99),
		a.total, cmdRate, fmtFloat(float64(iv.attempts)/float64(iv.acquired), 2))
	iv.waits = latency.Histogram{} // the phase result has them too
	if a.tty {
		fmt.Fprintf(a.out, "\r%s\x1b[K", line) // \x1b[K clears what a longer line left
		if k == len(a.secs) {
			fmt.Fprintln(a.out)
		}
		return nil
	}
	_, err = fmt.Fprintln(a.out, line)
	return err
}

// fmtWait formats the p-th percentile of waits, "-" for none.
func fmtWait(waits *latency.Histogram, p float64) string {
	if waits.Count() == 0 {
		return "-"
	}
	return units.Micros(float64(waits.Quantile(p)) / float64(time.Microsecond))
}

// fmtFloat prints NaN and infinities (a division by zero acquisitions) as "-".
func fmtFloat(x float64, prec int) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return "-"
	}
	return strconv.FormatFloat(x, 'f', prec, 64)
}

// ratio formats a/b as "1.4x", with two significant digits below 0.995
// (which would round to a bare "1x").
func ratio(a, b float64) string {
	x := a / b
	switch {
	case math.IsNaN(x) || math.IsInf(x, 0):
		return "n/a"
	case x >= 10:
		return fmt.Sprintf("%.0fx", x)
	case x >= 0.995:
		return fmt.Sprintf("%.1fx", x)
	}
	return strconv.FormatFloat(x, 'g', 2, 64) + "x"
}

func printPhaseEnd(w io.Writer, r *phaseResult) {
	if r.exclusionOK() {
		fmt.Fprintf(w, "%s: counter %d = %d acquisitions: exclusion OK\n", r.mode, r.counter, r.acquired)
	} else {
		fmt.Fprintf(w, "\n!!!!!! %s: EXCLUSION VIOLATION: counter %d after %d acquisitions (%d increments lost), %d in-process overlaps !!!!!!\n\n",
			r.mode, r.counter, r.acquired, r.acquired-r.counter, r.overlaps)
	}
	if r.errors > 0 {
		fmt.Fprintf(w, "%s: %d ERRORS, the last: %s\n", r.mode, r.errors, r.lastErr)
	}
	// Largest first; the rest (client set-up, INFO, the barrier) lumped
	// together. Redis 7 also counts the commands that Lua scripts run.
	names := make([]string, 0, len(r.cmdstats))
	var other int64
	for name, calls := range r.cmdstats {
		if r.perAcq(float64(calls)) >= 0.01 {
			names = append(names, name)
		} else {
			other += calls
		}
	}
	slices.SortFunc(names, func(a, b string) int { return cmp.Compare(r.cmdstats[b], r.cmdstats[a]) })
	parts := make([]string, 0, len(names)+1)
	for _, name := range names {
		parts = append(parts, name+" "+fmtFloat(r.perAcq(float64(r.cmdstats[name])), 2))
	}
	if other > 0 {
		parts = append(parts, "other "+fmtFloat(r.perAcq(float64(other)), 3))
	}
	fmt.Fprintf(w, "%s: Redis calls per acquisition (scripts' included): %s\n", r.mode, strings.Join(parts, ", "))
	// Introspection: `latchkey list` as it was half-way through the phase.
	if r.listing != "" {
		fmt.Fprintf(w, "%s: `latchkey list` in mid-phase:\n%s", r.mode, r.listing)
	}
	printMetrics(w, r)
	fmt.Fprintln(w)
}

// printMetrics is the phase's OpenTelemetry metrics, as the workers'
// /metrics served them at the end.
func printMetrics(w io.Writer, r *phaseResult) {
	m := &r.metrics
	acquired := m.Waits["acquired"]
	fmt.Fprintf(w, "%s: OpenTelemetry metrics read back from the workers (%d latchkey_* series):\n", r.mode, m.Series)
	fmt.Fprintf(w, "  waits      %d acquired, p50 ≈ %s, p99 ≈ %s (from the histogram's buckets); %d timed out, %d cancelled, %d errors; %.0f contended\n",
		acquired, fmtQuantile(0.5, m.WaitBuckets, acquired), fmtQuantile(0.99, m.WaitBuckets, acquired),
		m.Waits["timeout"], m.Waits["cancelled"], m.Waits["error"], m.Contended)
	fmt.Fprintf(w, "  holds      %.0f acquisitions, %.0f re-entries, %.0f locks lost; watchdog renewals %.0f, failed %.0f\n",
		m.Acquired, m.Reentries, m.Lost, m.Renewals, m.RenewalFailures)
	fmt.Fprintf(w, "  wake-ups   %.0f sent, %.0f received, %.0f unclaimed\n", m.WakeupsSent, m.Wakeups, m.Unclaimed)
}

func printSummary(w io.Writer, cfg config, ps, sp *phaseResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', tabwriter.AlignRight)
	row := func(label string, f func(r *phaseResult) string) {
		fmt.Fprintf(tw, "%-22s\t%s\t%s\t\n", label, f(ps), f(sp))
	}
	ideal := "% of 1/cs"
	if cfg.cs > 0 {
		ideal = fmt.Sprintf("%% of 1/cs (%.0f/s)", 1/cfg.cs.Seconds())
	}
	row("", func(r *phaseResult) string { return r.mode })
	row("acquisitions", func(r *phaseResult) string { return strconv.FormatInt(r.acquired, 10) })
	row("acquisitions/s", func(r *phaseResult) string { return fmtFloat(r.rate(), 0) })
	row(ideal, func(r *phaseResult) string { return fmtFloat(r.rate()*cfg.cs.Seconds()*100, 1) + "%" })
	row("wait p50", func(r *phaseResult) string { return fmtWait(&r.waits, 50) })
	row("wait p99", func(r *phaseResult) string { return fmtWait(&r.waits, 99) })
	row("wait max", func(r *phaseResult) string { return fmtWait(&r.waits, 100) })
	otelWait := func(q float64) func(r *phaseResult) string {
		return func(r *phaseResult) string { return fmtQuantile(q, r.metrics.WaitBuckets, r.metrics.Waits["acquired"]) }
	}
	row("wait p50 (OTel, est.)", otelWait(0.5))
	row("wait p99 (OTel, est.)", otelWait(0.99))
	row("locks lost (OTel)", func(r *phaseResult) string { return fmtFloat(r.metrics.Lost, 0) })
	row("wake-ups sent (OTel)", func(r *phaseResult) string { return fmtFloat(r.metrics.WakeupsSent, 0) })
	row("Redis commands/acq", func(r *phaseResult) string { return fmtFloat(r.perAcq(float64(r.commands)), 2) })
	row("Redis CPU µs/acq", func(r *phaseResult) string { return fmtFloat(r.perAcq(r.cpuSeconds*1e6), 1) })
	row("SUBSCRIBE/acq", func(r *phaseResult) string { return fmtFloat(r.callsPerAcq(redisinfo.SubscribeCommands), 2) })
	row("UNSUBSCRIBE/acq", func(r *phaseResult) string { return fmtFloat(r.callsPerAcq(redisinfo.UnsubscribeCommands), 2) })
	row("attempts/acq", func(r *phaseResult) string { return fmtFloat(r.perAcq(float64(r.attempts)), 2) })
	row("errors", func(r *phaseResult) string { return strconv.FormatInt(r.errors, 10) })
	row("exclusion", func(r *phaseResult) string { return map[bool]string{true: "OK", false: "VIOLATION"}[r.exclusionOK()] })
	tw.Flush()
	fmt.Fprintln(w)
	// What finish's LockCommands counts: everything from drive's CONFIG
	// RESETSTAT to finish's INFO but the harness's and the connections'.
	fmt.Fprintln(w, "Redis commands count from the CONFIG RESETSTAT taken once every worker is at the barrier to the phase's end, INFO, CONFIG")
	fmt.Fprintln(w, "and connection handshakes left out: the lock's, scripts' included, and the demo's own: the GET and SET of its counter")
	fmt.Fprintln(w, "(2 per acquisition), the barrier's RPUSH that starts the workers, the mid-phase `latchkey list` (its SCANs and a script per")
	fmt.Fprintln(w, "lock) and the final GET of the counter; the workers' BLPOPs at the barrier count only if Redis counts them after the")
	fmt.Fprintln(w, "reset (Redis 7.0 counts one when it blocks, so one already waiting then is left out).")
	fmt.Fprintln(w, "SUBSCRIBE counts SSUBSCRIBE too, UNSUBSCRIBE SUNSUBSCRIBE. A pub/sub waiter's subscription lingers between its waits,")
	fmt.Fprintln(w, "so pub/sub makes about one of each per worker process: at its first wait, and at its Close, before the final reading.")
	fmt.Fprintln(w, verdict(ps, sp))
}

// levelBand is how close pub/sub's figure must be to spin's for the
// verdict to call them level rather than name a winner: a few percent is
// within what one run differs from the next.
const levelBand = 0.05

// figure is one figure of both phases, for the verdict.
type figure struct {
	name   string
	ps, sp float64 // NaN: not measured (no acquisition)
	higher bool    // more is better (throughput); else less is
	// detail replaces the ratio to spin's in the verdict, for a figure
	// spin may have none of.
	detail string
}

// outcome is +1 when pub/sub does better on f, -1 when it does worse, 0
// when they are level; ok is false when either figure is missing.
func (f figure) outcome() (o int, ok bool) {
	switch {
	case math.IsNaN(f.ps) || math.IsNaN(f.sp):
		return 0, false
	case f.ps == f.sp || f.sp != 0 && math.Abs(f.ps/f.sp-1) < levelBand:
		return 0, true
	case (f.ps > f.sp) == f.higher:
		return 1, true
	}
	return -1, true
}

// describe is f's name with how pub/sub compares, "throughput (1.3x
// spin's)".
func (f figure) describe() string {
	d := f.detail
	switch {
	case d != "":
	case f.sp == 0:
		d = "spin's is 0"
	default:
		d = ratio(f.ps, f.sp) + " spin's"
	}
	return f.name + " (" + d + ")"
}

// figures are what the verdict weighs: throughput, the p99 wait, Redis'
// CPU and commands per acquisition, and the pub/sub calls per acquisition.
func figures(ps, sp *phaseResult) []figure {
	wait := func(r *phaseResult) float64 {
		if r.waits.Count() == 0 {
			return math.NaN()
		}
		return float64(r.waits.Quantile(99))
	}
	subs := func(r *phaseResult) (float64, float64) {
		return r.callsPerAcq(redisinfo.SubscribeCommands), r.callsPerAcq(redisinfo.UnsubscribeCommands)
	}
	psSub, psUnsub := subs(ps)
	spSub, spUnsub := subs(sp)
	return []figure{
		{name: "throughput", ps: ps.rate(), sp: sp.rate(), higher: true},
		{name: "p99 wait", ps: wait(ps), sp: wait(sp)},
		{name: "Redis CPU per acquisition", ps: ps.perAcq(ps.cpuSeconds), sp: sp.perAcq(sp.cpuSeconds)},
		{name: "Redis commands per acquisition", ps: ps.perAcq(float64(ps.commands)), sp: sp.perAcq(float64(sp.commands))},
		// Spin subscribes to nothing, so a ratio to its figure would be
		// infinite: both are given instead.
		{name: "SUBSCRIBE+UNSUBSCRIBE per acquisition", ps: psSub + psUnsub, sp: spSub + spUnsub,
			detail: fmt.Sprintf("%s + %s against spin's %s + %s", fmtFloat(psSub, 2), fmtFloat(psUnsub, 2), fmtFloat(spSub, 2), fmtFloat(spUnsub, 2))},
	}
}

// verdict is the one-line conclusion: on which figures pub/sub does better
// than spin and on which it pays more, each with pub/sub's figure as a
// ratio of spin's, and those within levelBand of each other as level.
func verdict(ps, sp *phaseResult) string {
	var wins, pays, level []string
	for _, f := range figures(ps, sp) {
		switch o, ok := f.outcome(); {
		case !ok:
		case o > 0:
			wins = append(wins, f.describe())
		case o < 0:
			pays = append(pays, f.describe())
		default:
			level = append(level, f.describe())
		}
	}
	s := "verdict: pub/sub wins on " + listOr(wins, "nothing here") + "; it pays in " + listOr(pays, "nothing here")
	if len(level) > 0 {
		s += fmt.Sprintf("; level (within %.0f%%) on %s", levelBand*100, listOr(level, ""))
	}
	return s + "."
}

// listOr lists items as "a, b and c", or none when there are none.
func listOr(items []string, none string) string {
	switch n := len(items); n {
	case 0:
		return none
	case 1:
		return items[0]
	default:
		return strings.Join(items[:n-1], ", ") + " and " + items[n-1]
	}
}

// totalCommands is Redis' total_commands_processed.
func totalCommands(ctx context.Context, rc rueidis.Client) (int64, error) {
	m, err := redisinfo.Get(ctx, rc, "stats")
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(m["total_commands_processed"], 10, 64)
}

// isTerminal reports whether w is a character device: enough to decide
// between overwriting the live line and printing one line per second.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// listing is a `latchkey list` of every lock, as a table.
func listing(ctx context.Context, locks *rlock.Client) (string, error) {
	infos, err := locks.List(ctx, "*")
	if err != nil {
		return "", fmt.Errorf("listing the locks: %w", err)
	}
	return listTable(infos, time.Now())
}

// listTable is a row per holder of each lock in infos, and one for a lock
// nobody holds at that instant: with the pub/sub lock a short critical
// section is often between two holders, kept for the waiter the release
// woke, and its queue is what there is to see.
func listTable(infos []rlock.LockInfo, now time.Time) (string, error) {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  NAME\tHOLDER\tPID\tHOLDS\tTOKEN\tHELD FOR\tLEASE LEFT\tCLIENTS QUEUED")
	for _, info := range infos {
		for _, h := range info.Holders {
			fmt.Fprintf(tw, "  %s\t%s\t%d\t%d\t%d\t%v\t%v\t%d\n", info.Name, h.Client.Name, h.Client.PID, h.Count, h.Token,
				now.Sub(h.Since).Round(time.Microsecond), info.LeaseLeft, info.WaitersTotal)
		}
		if !info.Held() {
			free := "(free)"
			if info.ReservedFor != "" {
				free = "(free, kept for the woken waiter)"
			}
			fmt.Fprintf(tw, "  %s\t%s\t-\t-\t-\t-\t-\t%d\n", info.Name, free, info.WaitersTotal)
		}
	}
	if err := tw.Flush(); err != nil {
		return "", err
	}
	return b.String(), nil
}
