package main

import (
	"fmt"
	"image/color"
	"io"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/latchkey/latchkey/bench/internal/results"
	"github.com/latchkey/latchkey/internal/units"
)

// Chart geometry: one panel per scenario, stacked.
const (
	chartWidth  = 7 * vg.Inch
	panelHeight = 1.7 * vg.Inch
	panelGap    = 4 * vg.Millimeter
	barWidth    = 9 * vg.Millimeter / 3
	// headroom leaves space right of the longest bar for its label.
	headroom = 1.3
)

// chart is one SVG: a figure per library, a panel per scenario.
type chart struct {
	file, title, unit string
	value             func(r *results.Result) float64
}

var charts = []chart{
	{"throughput.svg", "Throughput per library and scenario", "acquisitions/s", func(r *results.Result) float64 { return r.AcqPerS }},
	{"p99-wait.svg", "p99 acquire wait per library and scenario", "p99 wait, ms", func(r *results.Result) float64 { return r.P99US / 1e3 }},
	{"redis-cpu.svg", "Redis CPU per acquisition per library and scenario", "Redis CPU per acquisition, µs", func(r *results.Result) float64 { return r.RedisCPUUSPerAcq }},
}

// render draws the chart for f's scenarios as SVG on w.
func (ch chart) render(w io.Writer, f *results.File) error {
	var panels [][]*plot.Plot
	for _, sc := range f.Meta.Scenarios {
		p, err := ch.panel(f, sc)
		if err != nil {
			return err
		}
		panels = append(panels, []*plot.Plot{p})
	}
	if len(panels) == 0 {
		return fmt.Errorf("%w: no scenarios to chart", results.ErrBadFile)
	}
	c := vgsvg.New(chartWidth, panelHeight*vg.Length(len(panels)))
	dc := draw.New(c)
	tiles := draw.Tiles{Rows: len(panels), Cols: 1, PadY: panelGap, PadTop: 2 * vg.Millimeter, PadBottom: 2 * vg.Millimeter, PadLeft: 2 * vg.Millimeter, PadRight: 4 * vg.Millimeter}
	for i, cv := range plot.Align(panels, tiles, dc) {
		panels[i][0].Draw(cv[0])
	}
	_, err := c.WriteTo(w)
	return err
}

// panel is one scenario: a horizontal bar per library, latchkey's on top,
// each labelled with its value.
func (ch chart) panel(f *results.File, sc results.Scenario) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("(%s) %s: %d×%d, %d %s, cs %s", sc.Name, sc.Label, sc.Procs, sc.G, sc.Keys, plural(sc.Keys, "key", "keys"), units.Micros(sc.CSUS))
	p.Title.TextStyle.Font = font.From(sans, 10)
	p.X.Label.Text = ch.unit
	p.X.Label.TextStyle.Font = font.From(sans, 9)
	p.X.Tick.Label.Font = font.From(sans, 8)
	p.Y.Tick.Label.Font = font.From(sans, 9)
	p.X.Tick.Marker = plainTicks{}
	p.X.Min = 0
	libs := f.Meta.Libs
	names := make([]string, len(libs))
	var xys plotter.XYs
	var labels []string
	top := 0.0
	for i, lib := range libs {
		pos := float64(len(libs) - 1 - i)
		names[len(libs)-1-i] = lib
		r := f.Find(lib, sc.Name)
		if r == nil {
			continue
		}
		v := ch.value(r)
		bars, err := plotter.NewBarChart(plotter.Values{v}, barWidth)
		if err != nil {
			return nil, err
		}
		bars.Horizontal = true
		bars.XMin = pos
		bars.Color = plotutil.Color(i)
		bars.LineStyle.Width = 0
		p.Add(bars)
		xys = append(xys, plotter.XY{X: v, Y: pos})
		labels = append(labels, " "+fmtNum(v))
		top = max(top, v)
	}
	if len(xys) > 0 {
		l, err := plotter.NewLabels(plotter.XYLabels{XYs: xys, Labels: labels})
		if err != nil {
			return nil, err
		}
		for i := range l.TextStyle {
			l.TextStyle[i].Color = color.Gray{Y: 40}
			l.TextStyle[i].YAlign = draw.YCenter
			l.TextStyle[i].Font = font.From(sans, 8)
		}
		p.Add(l)
	}
	p.X.Max = max(top*headroom, 1)
	p.NominalY(slices.Clone(names)...)
	return p, nil
}

// sans is the charts' typeface, one of the fonts gonum embeds.
var sans = font.Font{Typeface: "Liberation", Variant: "Sans"}

// plainTicks are gonum's default ticks labelled without trailing zeros
// ("25000", not "25000.00").
type plainTicks struct{}

func (plainTicks) Ticks(lo, hi float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ticks {
		if ticks[i].Label != "" {
			ticks[i].Label = strconv.FormatFloat(ticks[i].Value, 'f', -1, 64)
		}
	}
	return ticks
}
