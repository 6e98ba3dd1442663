package main

import (
	"fmt"
	"image/color"
	"math"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/rpcxbatch/rpcxbatch/internal/benchkit"
)

// drawFigure draws two panels side by side into cfg.Figure, as perf's
// figures are drawn: calls per second against concurrency, and p50 (solid)
// and p99 (dashed) latency against concurrency on a log scale, each path
// in perf's colour.
func drawFigure(cfg Config, rows []row) error {
	call := cfg.Service + "." + cfg.Method
	tp := newPanel(fmt.Sprintf("%s: calls per second", call), "calls per second")
	tp.Y.Tick.Marker = benchkit.SITicks{}
	lp := newPanel(fmt.Sprintf("%s: latency", call), "latency, ms (p50 solid, p99 dashed)")
	lp.Y.Scale, lp.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}

	lo, hi, top := math.Inf(1), 0.0, 0.0
	latLo, latHi := math.Inf(1), 0.0
	for _, path := range paths {
		var rate, p50, p99 plotter.XYs
		for _, r := range rows {
			x := float64(r.Concurrency)
			lo, hi = min(lo, x), max(hi, x)
			p := r.Paths[path]
			rate = append(rate, plotter.XY{X: x, Y: p.callsPerS()})
			top = max(top, p.callsPerS())
			if q := p.quantiles(); q != nil {
				p50 = append(p50, plotter.XY{X: x, Y: q[0] / 1e3})
				p99 = append(p99, plotter.XY{X: x, Y: q[1] / 1e3})
				latLo, latHi = min(latLo, q[0]/1e3), max(latHi, q[1]/1e3)
			}
		}
		name, c := benchkit.PathNames[path], benchkit.PathColors[path]
		addLine(tp, name, rate, c, false)
		// The colours are named once, in the first panel's legend: a
		// legend on the log-scaled panel squeezes its data area.
		addLine(lp, "", p50, c, false)
		addLine(lp, "", p99, c, true)
	}
	if hi == 0 {
		return fmt.Errorf("-figure: nothing to draw")
	}
	// A log axis needs a range around a single concurrency too.
	for _, p := range []*plot.Plot{tp, lp} {
		p.X.Min, p.X.Max = lo/1.5, hi*1.5
	}
	tp.Y.Min, tp.Y.Max = 0, max(top*1.1, 1)
	if latHi > 0 {
		// Whole decades: the axis ends on labelled ticks.
		lp.Y.Min, lp.Y.Max = math.Pow(10, math.Floor(math.Log10(latLo))), math.Pow(10, math.Ceil(math.Log10(latHi)))
		if lp.Y.Min == lp.Y.Max {
			lp.Y.Max *= 10
		}
	}
	if err := benchkit.SavePanels([]*plot.Plot{tp, lp}, 14*vg.Centimeter, cfg.Figure); err != nil {
		return fmt.Errorf("-figure: %w", err)
	}
	return nil
}

func newPanel(title, ylabel string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "concurrency (goroutines calling)"
	p.Y.Label.Text = ylabel
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Legend.Top, p.Legend.Left = true, true
	p.Add(plotter.NewGrid())
	return p
}

// addLine adds a series with its points, in the legend unless name is
// ""; points at 0 are left out on a log axis.
func addLine(p *plot.Plot, name string, xys plotter.XYs, c color.Color, dashed bool) {
	_, logY := p.Y.Scale.(plot.LogScale)
	xys = slices.DeleteFunc(xys, func(xy plotter.XY) bool { return logY && xy.Y <= 0 })
	if len(xys) > 0 {
		benchkit.AddLine(p, name, xys, c, dashed)
	}
}
