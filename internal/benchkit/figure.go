package benchkit

import (
	"cmp"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// SaveRow draws plots side by side, each width wide and 10 cm high, into
// one file: an SVG, or a PNG when file ends in ".png". The plots' data
// areas are aligned (plot.Align): for panels that share a scale.
func SaveRow(row []*plot.Plot, width vg.Length, file string) error {
	return saveRow(row, width, file, true)
}

// SavePanels is SaveRow for panels of different scales, each drawn in
// its own tile as it would be alone (plot.Align would stretch a panel's
// canvas to match the other's data area, and move its legend off it).
func SavePanels(row []*plot.Plot, width vg.Length, file string) error {
	return saveRow(row, width, file, false)
}

func saveRow(row []*plot.Plot, width vg.Length, file string, align bool) error {
	w, h := vg.Length(len(row))*width, 10*vg.Centimeter
	var img interface {
		vg.CanvasSizer
		io.WriterTo
	}
	switch strings.ToLower(filepath.Ext(file)) {
	case ".png":
		// 150 dots per inch: sharp on a screen, a few hundred KB.
		img = vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(150))}
	default:
		img = vgsvg.New(w, h)
	}
	dc := draw.New(img)
	t := draw.Tiles{Rows: 1, Cols: len(row), PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 2,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	if align {
		canvases := plot.Align([][]*plot.Plot{row}, t, dc)
		for j, p := range row {
			p.Draw(canvases[0][j])
		}
	} else {
		for j, p := range row {
			p.Draw(t.At(dc, j, 0))
		}
	}
	f, err := os.Create(file)
	if err != nil {
		return fmt.Errorf("figure %s: %w", file, err)
	}
	if _, err := img.WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("figure %s: %w", file, err)
	}
	return f.Close()
}

// AddLine adds a series to p: its points sorted by X, joined by a line
// in c, dashed if asked, and in the legend under name unless name is "".
// It reports whether it added them (gonum refuses a series it cannot
// draw).
func AddLine(p *plot.Plot, name string, xys plotter.XYs, c color.Color, dashed bool) bool {
	slices.SortFunc(xys, func(a, b plotter.XY) int { return cmp.Compare(a.X, b.X) })
	l, s, err := plotter.NewLinePoints(xys)
	if err != nil {
		return false
	}
	l.Color, s.Color = c, c
	l.Width = vg.Points(1.5)
	if dashed {
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	}
	p.Add(l, s)
	if name != "" {
		p.Legend.Add(name, l, s)
	}
	return true
}

// SITicks labels a linear axis 0, 50k, 100k, 1.5M rather than 1e+05.
type SITicks struct{}

// Ticks returns plot's default ticks for the range, labelled by SI.
func (SITicks) Ticks(lo, hi float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = SI(ts[i].Value)
		}
	}
	return ts
}

// SI formats v with a k or M suffix: 1500 is "1.5k".
func SI(v float64) string {
	switch a := math.Abs(v); {
	case a >= 1e6:
		return strconv.FormatFloat(v/1e6, 'f', -1, 64) + "M"
	case a >= 1e3:
		return strconv.FormatFloat(v/1e3, 'f', -1, 64) + "k"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// PathColors are the colours the figures give each path: plain rpcx's
// Client ("plain") and XClient ("plainx"), rpcxbatch's Client ("batch")
// and drop-in XClient ("dropin").
var PathColors = map[string]color.RGBA{
	"plain":  {R: 200, G: 70, B: 50, A: 255},
	"plainx": {R: 230, G: 150, B: 40, A: 255},
	"batch":  {R: 40, G: 90, B: 200, A: 255},
	"dropin": {R: 140, G: 60, B: 180, A: 255},
}

// PathNames are the legends' names of the paths of PathColors.
var PathNames = map[string]string{
	"plain":  "plain rpcx Client",
	"plainx": "plain rpcx XClient",
	"batch":  "rpcxbatch Client",
	"dropin": "rpcxbatch drop-in XClient",
}
