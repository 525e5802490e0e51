package main

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"
	"slices"
	"strconv"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/latchkey/latchkey/bench/internal/locks"
	"github.com/latchkey/latchkey/bench/internal/results"
	"github.com/latchkey/latchkey/internal/units"
)

// The spin frontier: p99 wait against Redis CPU per acquisition, one point
// per library and retry setting, in the contended scenarios.
const (
	frontierFile        = "frontier.svg"
	frontierTitle       = "Spin frontier: p99 wait against Redis CPU per acquisition, per retry setting"
	frontierPanelHeight = 3.2 * vg.Inch
)

// errNoData reports a chart the results have nothing for; it is left out.
var errNoData = errors.New("nothing to chart")

// frontierScenarios are the scenarios of f that the frontier covers.
func frontierScenarios(f *results.File) []results.Scenario {
	var scs []results.Scenario
	for _, sc := range f.Meta.Scenarios {
		if slices.Contains(contendedScenarios, sc.Name) {
			scs = append(scs, sc)
		}
	}
	return scs
}

// sortedSettings orders one library's results by their retry setting's
// value; a default without one value (redsync's random delay) goes last.
func sortedSettings(rs []*results.Result) []*results.Result {
	rs = slices.Clone(rs)
	key := func(r *results.Result) float64 {
		if r.BackoffMS == 0 {
			return math.Inf(1)
		}
		return r.BackoffMS
	}
	slices.SortStableFunc(rs, func(a, b *results.Result) int { return cmp.Compare(key(a), key(b)) })
	return rs
}

// pointLabel names a result's setting in a few characters, "cap 32ms";
// "*" marks the library's default.
func pointLabel(r *results.Result) string {
	label := shortSetting(r)
	if isDefault(r) {
		label += "*"
	}
	return label
}

// shortSetting is locks.ShortSetting of r's setting.
func shortSetting(r *results.Result) string {
	return locks.ShortSetting(r.Lib, time.Duration(r.BackoffMS*float64(time.Millisecond)))
}

// isDefault tells whether r is a default-setting result rather than a
// sweep point.
func isDefault(r *results.Result) bool {
	return float64(locks.DefaultBackoff(r.Lib))/float64(time.Millisecond) == r.BackoffMS
}

// renderFrontier draws one panel per contended scenario.
func renderFrontier(w io.Writer, f *results.File) error {
	panels, err := frontierPanels(f)
	if err != nil {
		return err
	}
	return writeSVG(w, panels, frontierPanelHeight)
}

// frontierPanels are the frontier's panels, errNoData without any.
func frontierPanels(f *results.File) ([]*plot.Plot, error) {
	var panels []*plot.Plot
	for _, sc := range frontierScenarios(f) {
		p, ok, err := frontierPanel(f, sc)
		if err != nil {
			return nil, err
		}
		if ok {
			panels = append(panels, p)
		}
	}
	if len(panels) == 0 {
		return nil, errNoData
	}
	return panels, nil
}

// frontierPanel is one scenario: a line through each polling library's
// settings, a point for each library without one, latchkey's larger.
func frontierPanel(f *results.File, sc results.Scenario) (*plot.Plot, bool, error) {
	p := plot.New()
	p.Title.Text = panelTitle(sc)
	p.Title.TextStyle.Font = font.From(sans, 10)
	logAxis(&p.X, "Redis CPU per acquisition, µs (log)", logTicks{})
	logAxis(&p.Y, "p99 wait, ms (log)", logTicks{})
	p.Legend.Top = true
	p.Legend.TextStyle.Font = font.From(sans, 8)
	var all plotter.XYs
	var labels []string
	for i, lib := range f.Meta.Libs {
		var xys plotter.XYs
		for _, r := range sortedSettings(f.Settings(lib, sc.Name)) {
			if r.Acquisitions == 0 || r.P99US <= 0 || r.RedisCPUUSPerAcq <= 0 {
				continue
			}
			xys = append(xys, plotter.XY{X: r.RedisCPUUSPerAcq, Y: r.P99US / 1e3})
			if locks.Tunable(lib) {
				labels = append(labels, " "+pointLabel(r))
			} else {
				labels = append(labels, " "+lib)
			}
		}
		if len(xys) == 0 {
			continue
		}
		all = append(all, xys...)
		if err := addSeries(p, i, lib, lib, xys); err != nil {
			return nil, false, err
		}
	}
	if len(all) == 0 {
		return nil, false, nil
	}
	l, err := plotter.NewLabels(plotter.XYLabels{XYs: all, Labels: labels})
	if err != nil {
		return nil, false, err
	}
	for i := range l.TextStyle {
		l.TextStyle[i].Color = color.Gray{Y: 60}
		l.TextStyle[i].YAlign = draw.YCenter
		l.TextStyle[i].Font = font.From(sans, 7)
	}
	l.Offset.X = vg.Points(4) // clear of the largest glyph
	p.Add(l)
	// Room for the labels right of the points, and above them.
	xlo, xhi, ylo, yhi := plotter.XYRange(all)
	p.X.Min, p.X.Max = xlo/1.3, xhi*2
	p.Y.Min, p.Y.Max = ylo/1.5, yhi*3
	return p, true, nil
}

// logAxis makes a a logarithmic axis called label, ticked by ticks.
func logAxis(a *plot.Axis, label string, ticks plot.Ticker) {
	a.Label.Text = label
	a.Label.TextStyle.Font = font.From(sans, 9)
	a.Tick.Label.Font = font.From(sans, 8)
	a.Scale = plot.LogScale{}
	a.Tick.Marker = ticks
}

// addSeries adds lib's points xys to p, joined by a line when there are
// several, in the i-th library's colour and shape, latchkey's as larger
// black squares so that it stands out; label names them in the legend.
func addSeries(p *plot.Plot, i int, lib, label string, xys plotter.XYs) error {
	line, points, err := plotter.NewLinePoints(xys)
	if err != nil {
		return err
	}
	line.Color = plotutil.Color(i)
	points.Color = plotutil.Color(i)
	points.Shape = plotutil.Shape(i)
	points.Radius = vg.Points(3)
	if lib == locks.Latchkey {
		points.Shape = draw.BoxGlyph{}
		points.Radius = vg.Points(5)
		points.Color = color.Black
	}
	if len(xys) > 1 {
		p.Add(line)
		p.Legend.Add(label, line, points)
	} else {
		p.Legend.Add(label, points)
	}
	p.Add(points)
	return nil
}

// logTicks ticks every integer times a power of ten within the range and
// labels 1, 2 and 5 times them, or every tick when that would leave fewer
// than three labels (a range narrower than a decade).
type logTicks struct{}

func (logTicks) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	labelled := 0
	for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)); e++ {
		for m := 1.0; m <= 9; m++ {
			v := m * math.Pow(10, e)
			if v < lo || v > hi {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 || m == 2 || m == 5 {
				t.Label = tickLabel(v)
				labelled++
			}
			ticks = append(ticks, t)
		}
	}
	if labelled < 3 {
		for i := range ticks {
			ticks[i].Label = tickLabel(ticks[i].Value)
		}
	}
	return ticks
}

// tickLabel prints a log axis' tick value: "20000" rather than "2e+04",
// and at most four significant digits below 1.
func tickLabel(v float64) string {
	if v >= 1 {
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

// writeFrontier is the frontier's section: the chart and, per scenario,
// every library at every setting.
func writeFrontier(b *bytes.Buffer, f *results.File, link *chartLink) {
	scs := frontierScenarios(f)
	if len(scs) == 0 {
		return
	}
	b.WriteString("## Spin frontier\n\n")
	sweep := "This run has no sweep: each library is at its default only."
	if len(f.Meta.SweepMS) > 0 {
		sweep = fmt.Sprintf("Defaults ran %gs per repetition, sweep points %gs, all interleaved.", f.Meta.DurS, f.Meta.SweepDurS)
	}
	fmt.Fprintf(b, "Why not just spin? Each polling library (%s) ran at its default retry setting and, in the sweep, "+
		"at every other one of %s: a shorter backoff cap or retry delay buys a shorter wait with more Redis work. "+
		"Each setting is one point (Redis CPU per acquisition, p99 wait), * marks a library's default; "+
		"latchkey's pub/sub lock, which has no such setting, is one point. %s Medians over %d repetitions, min–max in parentheses.\n\n",
		joinNames(locks.Polling), sweepList(f.Meta.SweepMS), sweep, f.Meta.Reps)
	if link != nil {
		fmt.Fprintf(b, "![%s](%s)\n\n", link.title, link.path)
	}
	for _, sc := range scs {
		fmt.Fprintf(b, "**%s**\n\n", panelTitle(sc))
		b.WriteString(headerN(2, "library", "setting", "p99", "Redis CPU/acq", "mean wait", "max wait", "acq/s", "Redis cmds/acq", "errors"))
		for _, lib := range f.Meta.Libs {
			for _, r := range sortedSettings(f.Settings(lib, sc.Name)) {
				b.WriteString(row(lib, r.Setting, p99.cell(r), cpu.cell(r), spreadCell(r.MeanWaitUS, units.Micros), maxWait.cell(r), throughput.cell(r), cmds.cell(r), errorsCell(r)))
			}
		}
		b.WriteString("\n")
	}
}

// sweepList names the sweep's settings, "2ms, 8ms and 32ms".
func sweepList(ms []float64) string {
	if len(ms) == 0 {
		return "the sweep's settings"
	}
	s := make([]string, len(ms))
	for i, v := range ms {
		s[i] = strconv.FormatFloat(v, 'f', -1, 64) + "ms"
	}
	return joinNames(s)
}
