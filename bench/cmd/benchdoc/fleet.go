package main

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/latchkey/latchkey/bench/internal/results"
	"github.com/latchkey/latchkey/internal/redisinfo"
	"github.com/latchkey/latchkey/internal/units"
)

// Scenario (g), the fleet: Redis CPU per acquisition against the number of
// processes, one line per library, and a table of every figure.
const (
	fleetFile        = "fleet-cpu.svg"
	fleetTitle       = "Fleet (g): Redis CPU per acquisition against the number of processes"
	fleetPanelHeight = 3.2 * vg.Inch
)

// renderFleet draws the fleet's chart, errNoData without a fleet.
func renderFleet(w io.Writer, f *results.File) error {
	p, err := fleetPanel(f)
	if err != nil {
		return err
	}
	return writeSVG(w, []*plot.Plot{p}, fleetPanelHeight)
}

// fleetPanel is one line per library through its Redis CPU per acquisition
// at each fleet size, with a whisker over its range. Both axes are
// logarithmic: the sizes grow fourfold, and the libraries' costs differ
// by more than tenfold at the largest.
func fleetPanel(f *results.File) (*plot.Plot, error) {
	fl := f.Fleet
	if fl == nil || len(fl.Scenarios) == 0 {
		return nil, errNoData
	}
	p := plot.New()
	sc := fl.Scenarios[0]
	p.Title.Text = fmt.Sprintf("(%s) %s: %s × %d, %d %s, cs %s", sc.Name, sc.Label, fleetSizeList(fl, "/"), sc.G, sc.Keys, plural(sc.Keys, "key", "keys"), units.Micros(sc.CSUS))
	p.Title.TextStyle.Font = font.From(sans, 10)
	logAxis(&p.X, "processes × 1 goroutine (log)", sizeTicks(fl))
	logAxis(&p.Y, "Redis CPU per acquisition, µs (log)", logTicks{})
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.TextStyle.Font = font.From(sans, 8)
	var all plotter.XYs
	for i, lib := range f.Meta.Libs {
		var xys plotter.XYs
		var spans plotter.YErrors
		label := lib
		for _, sc := range fl.Scenarios {
			r := fl.Find(lib, sc.Procs)
			if r == nil || r.Acquisitions == 0 || r.RedisCPUUSPerAcq <= 0 {
				continue
			}
			label = libLabel(&r.Result)
			v, lo, hi := r.RedisCPUUSPerAcq, r.Min.RedisCPUUSPerAcq, r.Max.RedisCPUUSPerAcq
			if lo <= 0 || hi < v { // a results file without ranges; a log axis has no 0
				lo, hi = v, v
			}
			xys = append(xys, plotter.XY{X: float64(sc.Procs), Y: v})
			spans = append(spans, struct{ Low, High float64 }{v - lo, hi - v})
			all = append(all, plotter.XY{X: float64(sc.Procs), Y: lo}, plotter.XY{X: float64(sc.Procs), Y: hi})
		}
		if len(xys) == 0 {
			continue
		}
		if err := addSeries(p, i, lib, label, xys); err != nil {
			return nil, err
		}
		whiskers, err := plotter.NewYErrorBars(struct {
			plotter.XYs
			plotter.YErrors
		}{xys, spans})
		if err != nil {
			return nil, err
		}
		styleWhiskers(&whiskers.LineStyle, &whiskers.CapWidth)
		p.Add(whiskers)
	}
	if len(all) == 0 {
		return nil, errNoData
	}
	// Room around the first and last sizes, and above the lines for the
	// legend.
	xlo, xhi, ylo, yhi := plotter.XYRange(all)
	p.X.Min, p.X.Max = xlo/1.5, xhi*1.5
	p.Y.Min, p.Y.Max = ylo/1.5, yhi*3
	return p, nil
}

// fleetSizeTicks ticks and labels exactly the fleet's sizes.
type fleetSizeTicks []float64

// sizeTicks are the ticks of fl's sizes.
func sizeTicks(fl *results.Fleet) fleetSizeTicks {
	ts := make(fleetSizeTicks, len(fl.Scenarios))
	for i, sc := range fl.Scenarios {
		ts[i] = float64(sc.Procs)
	}
	return ts
}

func (ts fleetSizeTicks) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	for _, v := range ts {
		if v >= lo && v <= hi {
			ticks = append(ticks, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', -1, 64)})
		}
	}
	return ticks
}

// fleetSizes lists the fleet's sizes, "4, 16 and 64".
func fleetSizes(fl *results.Fleet) string { return joinNames(sizeNames(fl)) }

// fleetSizeList lists the fleet's sizes separated by sep, "4/16/64".
func fleetSizeList(fl *results.Fleet, sep string) string { return strings.Join(sizeNames(fl), sep) }

func sizeNames(fl *results.Fleet) []string {
	sizes := make([]string, len(fl.Scenarios))
	for i, sc := range fl.Scenarios {
		sizes[i] = strconv.Itoa(sc.Procs)
	}
	return sizes
}

// fleetHeading is "(g) fleet, one goroutine per process: 4, 16 and 64
// processes × 1 goroutine, 1 key, critical section 5.0ms".
func fleetHeading(fl *results.Fleet) string {
	sc := fl.Scenarios[0]
	return fmt.Sprintf("(%s) %s: %s processes × %d %s, %d %s, critical section %s", sc.Name, sc.Label, fleetSizes(fl),
		sc.G, plural(sc.G, "goroutine", "goroutines"), sc.Keys, plural(sc.Keys, "key", "keys"), units.Micros(sc.CSUS))
}

// idealShare is r's throughput as a share of 1/cs, in percent: the most
// one holder at a time can do with nothing between two holds.
func idealShare(r *results.Result) string {
	pct := func(f *results.Figures) float64 { return f.AcqPerS * r.CSUS / 1e4 }
	return fmtSpread(pct(&r.Figures), pct(&r.Min), pct(&r.Max), func(x float64) string { return fmtNum(x) + "%" })
}

// writeFleet is (g)'s section: the chart and a table with every library at
// every size.
func writeFleet(b *bytes.Buffer, f *results.File, link *chartLink) {
	fl := f.Fleet
	if fl == nil || len(fl.Scenarios) == 0 {
		return
	}
	sc := fl.Scenarios[0]
	fmt.Fprintf(b, "## (g) Fleet\n\n**%s.** "+
		"With one goroutine per process every waiter is a Redis client of its own, so what a lock does per waiting client is paid by each: "+
		"latchkey queues each waiting process in Redis and wakes it with one message on a subscription that lingers between waits (one SUBSCRIBE per busy period), a poller sends a try per backoff, "+
		"rueidislock is woken through each client's invalidations. "+
		"Throughput is also given as a share of 1/cs (%s acquisitions/s: holds back to back, with no time between them). "+
		"Tries are the attempts to take the lock per acquisition, counted by each worker, tries of the acquires the run's end cut off included; "+
		"\"–\" for a library whose API does not show them. SUBSCRIBE counts SSUBSCRIBE too, UNSUBSCRIBE SUNSUBSCRIBE (INFO commandstats). "+
		"Runs of %gs, %s.%s\n\n",
		fleetHeading(fl), fmtNum(1e6/sc.CSUS), fl.DurS, repsClause(fl.Reps), rampClause(fl.RampS))
	if link != nil {
		fmt.Fprintf(b, "![%s](%s)\n\n", link.title, link.path)
	}
	b.WriteString(headerN(3, "processes", "library", "setting", "acq/s", "% of 1/cs", "Redis CPU/acq", "Redis cmds/acq",
		"SUBSCRIBE/acq", "UNSUBSCRIBE/acq", "tries/acq", "mean wait", "max wait", "violations", "errors"))
	for i := range fl.Results {
		r := &fl.Results[i]
		tries := "–"
		if r.AttemptsPerAcq != nil {
			tries = spreadCell(*r.AttemptsPerAcq, fmtNum)
		}
		b.WriteString(row(strconv.Itoa(r.Procs), r.Lib, r.Setting, throughput.cell(&r.Result), idealShare(&r.Result), cpu.cell(&r.Result),
			cmds.cell(&r.Result), spreadCell(r.SubscribesPerAcq, fmtNum), spreadCell(r.UnsubscribesPerAcq, fmtNum), tries,
			spreadCell(r.MeanWaitUS, units.Micros), maxWait.cell(&r.Result), fmt.Sprint(r.Violations), errorsCell(&r.Result)))
	}
	b.WriteString("\n")
}

// repsClause says what the figures of reps repetitions are: one run's, or
// medians with their ranges.
func repsClause(reps int) string {
	if reps == 1 {
		return "one repetition, so each figure is one run's and has no range"
	}
	return fmt.Sprintf("medians over %d repetitions, min–max in parentheses", reps)
}

// fleetMethod is the Method section's line on (g), "" without a fleet.
func fleetMethod(f *results.File) string {
	if f.Fleet == nil {
		return ""
	}
	return "**Fleet (g).** The same loop, with every worker process running one goroutine; each size runs every library, interleaved, before the next size. " +
		"Tries are counted in the worker: latchkey's through `rlock.Options.OnAttempt` (each run of the acquire script), redsync's as the SET commands its go-redis client sends (it tries with one SET NX and does the rest in scripts), " +
		"redislock's as its retry strategy's backoffs asked for (one after each failed try) plus the try that succeeds; rueidislock's API shows none. " +
		"The warm-up's tries are left out. SUBSCRIBE per acquisition is INFO commandstats' calls of " + commandNames(redisinfo.SubscribeCommands) +
		" over the run divided by the acquisitions, UNSUBSCRIBE per acquisition those of " + commandNames(redisinfo.UnsubscribeCommands) + "."
}

// commandNames lists commands as Redis' documentation spells them,
// "SUBSCRIBE and SSUBSCRIBE".
func commandNames(names []string) string {
	upper := make([]string, len(names))
	for i, n := range names {
		upper[i] = strings.ToUpper(n)
	}
	return joinNames(upper)
}

// rampClause says what the fleet's ramp leaves out, and what it does not
// (the waits that began in it, lockbench's hammer), if it ran one.
func rampClause(rampS float64) string {
	if rampS <= 0 {
		return ""
	}
	return fmt.Sprintf(" Each run first ramps up for %gs, left out of the counts, CPU and commands (acquisitions, tries, Redis CPU, commands, SUBSCRIBE and UNSUBSCRIBE); a wait that began in the ramp counts whole, and violations and errors in it count: the fleet starts with every process asking at once, and each one's first wait subscribes, a cost of the start of a busy period rather than of its steady state. Redis is read over the measured duration only, so the UNSUBSCRIBE of each process at its Close is left out too.", rampS)
}
