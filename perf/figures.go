package main

import (
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/rpcxbatch/rpcxbatch/internal/benchkit"
)

// The figures: throughput against writer count, every path, one panel
// per operation, as the ecall README draws them. Everything gonum-specific
// lives in this file.

var (
	intendedColor = color.RGBA{R: 120, G: 120, B: 120, A: 255}
	ceilingColor  = color.RGBA{R: 30, G: 150, B: 80, A: 255}
)

// figure is one written figure, for the report.
type figure struct {
	File, Alt string
}

// group is the results of one payload at one pace: one set of figures.
type group struct {
	Payload string
	PaceMS  int
}

func groupsOf(results []Result) []group {
	var gs []group
	for _, r := range results {
		g := group{r.Payload, r.PaceMS}
		if !slices.Contains(gs, g) {
			gs = append(gs, g)
		}
	}
	return gs
}

func (g group) slug() string { return fmt.Sprintf("%s-pace%d", g.Payload, g.PaceMS) }

// drawFigures writes, per payload and pace, one SVG per operation and one
// with the operations side by side on the same scale.
func drawFigures(dir string, results []Result, cs []Ceiling) ([]figure, error) {
	var figs []figure
	for _, g := range groupsOf(results) {
		var row []*plot.Plot
		ymax := 0.0
		for _, op := range allOps {
			p, top, ok := opPlot(g, op, results, cs)
			if !ok {
				continue
			}
			ymax = max(ymax, top)
			row = append(row, p)
			name := fmt.Sprintf("throughput-%s-%s.svg", op, g.slug())
			if err := p.Save(16*vg.Centimeter, 11*vg.Centimeter, filepath.Join(dir, name)); err != nil {
				return nil, fmt.Errorf("figure %s: %w", name, err)
			}
			figs = append(figs, figure{name, fmt.Sprintf("%s throughput against writers, plain rpcx's Client and XClient vs rpcxbatch's Client and drop-in XClient, %s payload, pace %d ms", op, g.Payload, g.PaceMS)})
		}
		if len(row) < 2 {
			continue
		}
		for _, p := range row {
			p.Y.Max = ymax * 1.05
		}
		name := fmt.Sprintf("throughput-%s.svg", g.slug())
		if err := benchkit.SaveRow(row, 12*vg.Centimeter, filepath.Join(dir, name)); err != nil {
			return nil, err
		}
		// The side-by-side figure goes first in the report.
		figs = append([]figure{{name, fmt.Sprintf("every operation's throughput against writers on one scale, %s payload, pace %d ms", g.Payload, g.PaceMS)}}, figs...)
	}
	return figs, nil
}

// opPlot draws one operation of one group; it returns the plot, the
// highest value on it, and false when the group has no such points.
func opPlot(g group, op string, results []Result, cs []Ceiling) (*plot.Plot, float64, bool) {
	series := map[string]plotter.XYs{}
	var intended plotter.XYs
	for _, r := range results {
		if r.Payload != g.Payload || r.PaceMS != g.PaceMS || r.Op != op {
			continue
		}
		series[r.Path] = append(series[r.Path], plotter.XY{X: float64(r.Writers), Y: r.OpsPerS})
		if r.IntendedPerS != nil && !slices.ContainsFunc(intended, func(xy plotter.XY) bool { return xy.X == float64(r.Writers) }) {
			intended = append(intended, plotter.XY{X: float64(r.Writers), Y: *r.IntendedPerS})
		}
	}
	if len(series) == 0 {
		return nil, 0, false
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s, %s payload, %s", op, g.Payload, paceText(g.PaceMS))
	p.X.Label.Text = "writers"
	p.Y.Label.Text = op + "s per second"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Y.Tick.Marker = benchkit.SITicks{}
	p.Legend.Top, p.Legend.Left = true, true
	p.Add(plotter.NewGrid())

	top, lo, hi := 0.0, math.Inf(1), 0.0
	add := func(name string, xys plotter.XYs, c color.Color, dashed bool) {
		if !benchkit.AddLine(p, name, xys, c, dashed) {
			return
		}
		for _, xy := range xys {
			top, lo, hi = max(top, xy.Y), min(lo, xy.X), max(hi, xy.X)
		}
	}
	for _, path := range allPaths {
		if len(series[path]) > 0 {
			add(benchkit.PathNames[path], series[path], benchkit.PathColors[path], false)
		}
	}
	if len(intended) > 0 {
		add("intended", intended, intendedColor, true)
	}
	// A log axis needs a range around a single writer count too.
	p.X.Min, p.X.Max = lo/1.5, hi*1.5
	// One ceiling line per codec the two paths use for this operation.
	for _, codec := range []string{codecRPCX, codecBatch} {
		if codec == codecBatch && op == "send" {
			continue
		}
		for _, c := range cs {
			if c.Payload != g.Payload || c.Codec != codec {
				continue
			}
			bound := c.OnewayPerS
			if replied(op) {
				bound = c.CallsPerS
			}
			l, err := plotter.NewLine(plotter.XYs{{X: p.X.Min, Y: bound}, {X: p.X.Max, Y: bound}})
			if err == nil {
				l.Color, l.Dashes, l.Width = ceilingColor, []vg.Length{vg.Points(2), vg.Points(2)}, vg.Points(1)
				if codec == codecBatch {
					l.Dashes = []vg.Length{vg.Points(6), vg.Points(2)}
				}
				p.Add(l)
				p.Legend.Add("codec ceiling, "+codec+" codec", l)
				top = max(top, bound)
			}
		}
	}
	p.Y.Min, p.Y.Max = 0, top*1.05
	return p, top, true
}

func paceText(ms int) string {
	if ms == 0 {
		return "closed loop"
	}
	return fmt.Sprintf("pace %d ms", ms)
}
