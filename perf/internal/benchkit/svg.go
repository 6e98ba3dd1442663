package benchkit

import (
	"fmt"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// SaveRow draws plots side by side, each width wide and 10 cm high, into
// one SVG file.
func SaveRow(row []*plot.Plot, width vg.Length, file string) error {
	w, h := vg.Length(len(row))*width, 10*vg.Centimeter
	img := vgsvg.New(w, h)
	dc := draw.New(img)
	t := draw.Tiles{Rows: 1, Cols: len(row), PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 2,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	canvases := plot.Align([][]*plot.Plot{row}, t, dc)
	for j, p := range row {
		p.Draw(canvases[0][j])
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
