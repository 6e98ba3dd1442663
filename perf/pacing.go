package main

import (
	"time"

	"github.com/rpcxbatch/rpcxbatch/internal/benchkit"
)

// A paced point's wall time is the first offset (the random one drawn,
// the writer's start and its first timer's lateness), the pauses, the
// latencies of the calls and how late each pause ended, summed over the
// writer that finished last. pacing keeps those sums per writer, so that a
// point that misses its intended rate says which of them it lost to: the
// path (latency) or the writers' own wake-ups (timer lateness, which is
// the scheduler's and the same for both paths).
type pacing struct {
	writers []writerPace
	late    *benchkit.Histogram // how late each pause ended
}

// writerPace is one writer's sums; only its own writer writes it.
type writerPace struct {
	offset, lat, late, end time.Duration
	// start is the point's start, which offset is measured from.
	start time.Time
	_     [8]byte // a cache line of its own (64 bytes)
}

func newPacing(writers int) *pacing {
	return &pacing{writers: make([]writerPace, writers), late: new(benchkit.Histogram)}
}

// paceSummary is a paced point's breakdown: the slowest writer's sums and
// the lateness quantiles.
type paceSummary struct {
	// Offset, Lat and Late are the writer that finished last's first
	// pause, its calls' summed latency and its pauses' summed lateness.
	Offset, Lat, Late time.Duration
	// LateP50, LateP99 are how late one pause ended, over all writers.
	LateP50, LateP99 time.Duration
	// MeanLat, MeanLate are the per-writer averages of the sums.
	MeanLat, MeanLate time.Duration
}

func (p *pacing) summary() paceSummary {
	var s paceSummary
	var last time.Duration
	var sumLat, sumLate time.Duration
	for _, w := range p.writers {
		sumLat += w.lat
		sumLate += w.late
		if w.end > last {
			last = w.end
			s.Offset, s.Lat, s.Late = w.offset, w.lat, w.late
		}
	}
	if n := len(p.writers); n > 0 {
		s.MeanLat, s.MeanLate = sumLat/time.Duration(n), sumLate/time.Duration(n)
	}
	if q := p.late.Quantiles(0.5, 0.99); q != nil {
		s.LateP50, s.LateP99 = q[0], q[1]
	}
	return s
}

// pcLate is p's lateness histogram, nil without p.
func pcLate(p *pacing) *benchkit.Histogram {
	if p == nil {
		return nil
	}
	return p.late
}
