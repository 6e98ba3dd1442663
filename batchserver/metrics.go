package batchserver

import (
	"sync"

	metrics "github.com/rcrowley/go-metrics"
)

// serverMetrics are the plugin's go-metrics instruments, all named
// "rpcxbatch.server.*".
type serverMetrics struct {
	frames, replyFrames      metrics.Counter
	calls, casts, sends      metrics.Counter
	batchSize, replyBatch    metrics.Histogram
	errMalformed, errAuth    metrics.Counter
	errUnknown, errPanic     metrics.Counter
	errDeadline, errWrite    metrics.Counter
	errUnknownSend, errCodec metrics.Counter
	errRefused               metrics.Counter
	// memoryReleases counts WithIdleMemoryRelease's releases.
	memoryReleases metrics.Counter
}

func newServerMetrics(r metrics.Registry) *serverMetrics {
	c := func(name string) metrics.Counter { return metrics.GetOrRegisterCounter("rpcxbatch.server."+name, r) }
	h := func(name string) metrics.Histogram {
		return metrics.GetOrRegisterHistogram("rpcxbatch.server."+name, r, metrics.NewExpDecaySample(1028, 0.015))
	}
	return &serverMetrics{
		frames: c("frames"), replyFrames: c("reply_frames"),
		calls: c("calls"), casts: c("casts"), sends: c("sends"),
		batchSize: h("batch_size"), replyBatch: h("reply_batch_size"),
		errMalformed: c("errors.malformed"), errAuth: c("errors.auth"),
		errUnknown: c("errors.unknown_service"), errPanic: c("errors.panic"),
		errDeadline: c("errors.deadline"), errWrite: c("errors.write"),
		errUnknownSend: c("errors.unknown_send"), errCodec: c("errors.codec"),
		errRefused:     c("errors.refused"),
		memoryReleases: c("memory_releases"),
	}
}

// registerGauges adds the plugin to the gauges of its registry, read on
// demand: the connections the plugins keep batch state for, and the
// goroutines their workers keep parked for reuse. Plugins that share a
// registry (WithMetrics) are summed, as their counters are.
func (p *Plugin) registerGauges() {
	v, _ := gaugeSets.LoadOrStore(p.opts.Registry, &gaugeSet{})
	gs := v.(*gaugeSet)
	gs.mu.Lock()
	gs.plugins = append(gs.plugins, p)
	gs.mu.Unlock()
	r := p.opts.Registry
	r.GetOrRegister("rpcxbatch.server.connections", metrics.NewFunctionalGauge(func() int64 {
		return gs.sum(func(p *Plugin) int64 {
			p.connMu.Lock()
			defer p.connMu.Unlock()
			return int64(len(p.conns))
		})
	}))
	r.GetOrRegister("rpcxbatch.server.workers.parked", metrics.NewFunctionalGauge(func() int64 {
		return gs.sum(func(p *Plugin) int64 { return int64(p.workers.idleCount()) })
	}))
}

// unregisterGauges takes the plugin out of its registry's gauges.
func (p *Plugin) unregisterGauges() {
	v, ok := gaugeSets.Load(p.opts.Registry)
	if !ok {
		return
	}
	gs := v.(*gaugeSet)
	gs.mu.Lock()
	defer gs.mu.Unlock()
	for i, q := range gs.plugins {
		if q == p {
			gs.plugins = append(gs.plugins[:i], gs.plugins[i+1:]...)
			break
		}
	}
}

// gaugeSets holds, per registry, the plugins its gauges sum over.
var gaugeSets sync.Map // metrics.Registry -> *gaugeSet

// gaugeSet is the plugins that report to one registry.
type gaugeSet struct {
	mu      sync.Mutex // guards plugins
	plugins []*Plugin
}

// sum adds up f over the set's plugins.
func (gs *gaugeSet) sum(f func(*Plugin) int64) int64 {
	gs.mu.Lock()
	ps := append([]*Plugin(nil), gs.plugins...)
	gs.mu.Unlock()
	var n int64
	for _, p := range ps {
		n += f(p)
	}
	return n
}
