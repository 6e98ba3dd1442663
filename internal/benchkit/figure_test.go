package benchkit

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// TestSaveRowFormats: the row is an SVG by default and a PNG for a
// ".png" file, aligned (SaveRow) or not (SavePanels).
func TestSaveRowFormats(t *testing.T) {
	dir := t.TempDir()
	row := func() []*plot.Plot {
		var out []*plot.Plot
		for range 2 {
			p := plot.New()
			l, err := plotter.NewLine(plotter.XYs{{X: 1, Y: 1}, {X: 10, Y: 5}})
			require.NoError(t, err)
			p.Add(l)
			p.Y.Tick.Marker = SITicks{}
			out = append(out, p)
		}
		return out
	}
	svg, png := filepath.Join(dir, "f.svg"), filepath.Join(dir, "f.png")
	require.NoError(t, SaveRow(row(), 8*vg.Centimeter, svg))
	require.NoError(t, SavePanels(row(), 8*vg.Centimeter, png))
	b, err := os.ReadFile(svg)
	require.NoError(t, err)
	assert.Contains(t, string(b[:200]), "<svg")
	b, err = os.ReadFile(png)
	require.NoError(t, err)
	assert.True(t, bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")), "a PNG's signature")
}

func TestSI(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 950: "950", 1500: "1.5k", 50000: "50k", 1.5e6: "1.5M", -2000: "-2k"} {
		assert.Equal(t, want, SI(v), "%v", v)
	}
}
