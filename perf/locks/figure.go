package main

import (
	"fmt"
	"image/color"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/rpcxbatch/rpcxbatch/internal/benchkit"
)

// The figure: one panel per design, a bar per engine (median locks/s),
// in the colours of perf's figures. Everything gonum-specific lives here.

var engineColors = map[string]color.Color{
	engineBatch: color.RGBA{R: 40, G: 90, B: 200, A: 255},
	engineLocal: color.RGBA{R: 40, G: 90, B: 200, A: 255},
	enginePlain: color.RGBA{R: 200, G: 70, B: 50, A: 255},
	engineEtcd:  color.RGBA{R: 120, G: 120, B: 120, A: 255},
	// A bound, not a competitor: pale.
	engineInproc: color.RGBA{R: 190, G: 205, B: 230, A: 255},
}

var designTitles = map[int]string{
	1: "design 1: one exclusive lock, both nodes",
	3: "design 3: ten keys in random order, both nodes",
	4: "design 4: ten shared local locks",
}

func drawFigure(file string, sums []summary) error {
	var row []*plot.Plot
	for _, d := range []int{1, 3, 4} {
		var ss []summary
		for _, s := range sums {
			if s.p.Design == d {
				ss = append(ss, s)
			}
		}
		if len(ss) == 0 {
			continue
		}
		p, err := designPlot(d, ss)
		if err != nil {
			return err
		}
		row = append(row, p)
	}
	if len(row) == 0 {
		return nil
	}
	return benchkit.SaveRow(row, 11*vg.Centimeter, file)
}

func designPlot(design int, ss []summary) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = designTitles[design]
	p.Y.Label.Text = "locks per second (median)"
	p.Y.Tick.Marker = benchkit.SITicks{}
	p.Add(plotter.NewGrid())
	names := make([]string, len(ss))
	top := 0.0
	var labels plotter.XYLabels
	for i, s := range ss {
		r := s.median()
		names[i] = shortLabel(s.p)
		bars, err := plotter.NewBarChart(plotter.Values{r.LocksPerS}, vg.Points(28))
		if err != nil {
			return nil, fmt.Errorf("figure, design %d: %w", design, err)
		}
		bars.XMin = float64(i)
		bars.Color = engineColors[s.p.Engine]
		bars.LineStyle.Width = 0
		p.Add(bars)
		top = max(top, r.LocksPerS)
		labels.XYs = append(labels.XYs, plotter.XY{X: float64(i), Y: r.LocksPerS})
		labels.Labels = append(labels.Labels, si(r.LocksPerS))
	}
	if l, err := plotter.NewLabels(labels); err == nil {
		for i := range l.TextStyle {
			l.TextStyle[i].XAlign = draw.XCenter
			l.TextStyle[i].YAlign = draw.YBottom
		}
		p.Add(l)
	}
	p.NominalX(names...)
	p.X.Min, p.X.Max = -0.6, float64(len(ss))-0.4
	p.Y.Min, p.Y.Max = 0, top*1.15
	return p, nil
}

func shortLabel(p point) string {
	switch p.Engine {
	case engineEtcd:
		return "etcd ×" + si(float64(p.Clients))
	case engineInproc:
		return "bound: no transport"
	}
	return p.Engine
}

// si labels a bar with its value, to a fixed precision: 12.3k, 1.25M.
func si(v float64) string {
	switch {
	case v >= 1e6:
		return strconv.FormatFloat(v/1e6, 'f', 2, 64) + "M"
	case v >= 1e3:
		return strconv.FormatFloat(v/1e3, 'f', 1, 64) + "k"
	}
	return strconv.FormatFloat(v, 'f', 0, 64)
}
