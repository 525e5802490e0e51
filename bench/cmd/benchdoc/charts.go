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

// svgChart is one SVG file the document links.
type svgChart struct {
	file, title string
	render      func(w io.Writer, f *results.File) error // errNoData: left out
}

// charts are every SVG benchdoc writes: the bar charts, then the frontier
// and the fleet's, which their own sections show.
var charts = []svgChart{
	barChart{"throughput.svg", "Throughput per library and scenario", "acquisitions/s", throughput, 1}.svg(),
	barChart{"p99-wait.svg", "p99 acquire wait per library and scenario", "p99 wait, ms", p99, 1e-3}.svg(),
	barChart{"redis-cpu.svg", "Redis CPU per acquisition per library and scenario", "Redis CPU per acquisition, µs", cpu, 1}.svg(),
	{frontierFile, frontierTitle, renderFrontier},
	{fleetFile, fleetTitle, renderFleet},
}

// barChart is a figure per library at its default setting, a panel per
// scenario: the median, scaled, with its range over the repetitions.
type barChart struct {
	file, title, unit string
	m                 metric
	scale             float64
}

func (ch barChart) svg() svgChart { return svgChart{ch.file, ch.title, ch.render} }

// render draws the chart for f's scenarios as SVG on w.
func (ch barChart) render(w io.Writer, f *results.File) error {
	var panels []*plot.Plot
	for _, sc := range f.Meta.Scenarios {
		p, err := ch.panel(f, sc)
		if err != nil {
			return err
		}
		panels = append(panels, p)
	}
	if len(panels) == 0 { // a run of only some parts of the suite, f or g
		return errNoData
	}
	return writeSVG(w, panels, panelHeight)
}

// writeSVG stacks panels, each height high, into one SVG on w.
func writeSVG(w io.Writer, panels []*plot.Plot, height vg.Length) error {
	c := vgsvg.New(chartWidth, height*vg.Length(len(panels)))
	drawPanels(draw.New(c), panels)
	_, err := c.WriteTo(w)
	return err
}

// drawPanels stacks panels on dc, their axes aligned.
func drawPanels(dc draw.Canvas, panels []*plot.Plot) {
	rows := make([][]*plot.Plot, len(panels))
	for i, p := range panels {
		rows[i] = []*plot.Plot{p}
	}
	tiles := draw.Tiles{Rows: len(panels), Cols: 1, PadY: panelGap, PadTop: 2 * vg.Millimeter, PadBottom: 2 * vg.Millimeter, PadLeft: 2 * vg.Millimeter, PadRight: 4 * vg.Millimeter}
	for i, cv := range plot.Align(rows, tiles, dc) {
		panels[i].Draw(cv[0])
	}
}

// panelTitle heads a scenario's panel.
func panelTitle(sc results.Scenario) string {
	return fmt.Sprintf("(%s) %s: %d×%d, %d %s, cs %s", sc.Name, sc.Label, sc.Procs, sc.G, sc.Keys, plural(sc.Keys, "key", "keys"), units.Micros(sc.CSUS))
}

// panel is one scenario: a horizontal bar per library, latchkey's on top,
// each labelled with its value, and a whisker over its range.
func (ch barChart) panel(f *results.File, sc results.Scenario) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = panelTitle(sc)
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
	var spans plotter.XErrors
	var labels []string
	top := 0.0
	for i, lib := range libs {
		pos := float64(len(libs) - 1 - i)
		names[len(libs)-1-i] = lib
		r := f.Find(lib, sc.Name)
		if r == nil {
			continue
		}
		names[len(libs)-1-i] = libLabel(r)
		v := ch.m.get(&r.Figures) * ch.scale
		lo, hi := ch.m.get(&r.Min)*ch.scale, ch.m.get(&r.Max)*ch.scale
		if lo == 0 && hi == 0 { // a results file without ranges
			lo, hi = v, v
		}
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
		spans = append(spans, struct{ Low, High float64 }{v - lo, hi - v})
		labels = append(labels, " "+fmtNum(v))
		top = max(top, hi)
	}
	if len(xys) > 0 {
		whiskers, err := plotter.NewXErrorBars(struct {
			plotter.XYs
			plotter.XErrors
		}{xys, spans})
		if err != nil {
			return nil, err
		}
		styleWhiskers(&whiskers.LineStyle, &whiskers.CapWidth)
		p.Add(whiskers)
		// The value's label starts right of the whisker.
		for i := range xys {
			xys[i].X += spans[i].High
		}
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

// styleWhiskers gives the whiskers over a figure's range the charts' look:
// a thin grey line with caps, so that they read as error bars and not data.
func styleWhiskers(line *draw.LineStyle, capWidth *vg.Length) {
	line.Color = color.Gray{Y: 60}
	*capWidth = 2 * vg.Millimeter
}

// libLabel names r's library in a chart with its retry setting in a few
// characters, "redsync (delay 50–250ms)".
func libLabel(r *results.Result) string {
	if s := shortSetting(r); s != "" {
		return fmt.Sprintf("%s (%s)", r.Lib, s)
	}
	return r.Lib
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
