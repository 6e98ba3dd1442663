package batchserver

import (
	"slices"
	"sync"

	metrics "github.com/rcrowley/go-metrics"

	"github.com/rpcxbatch/rpcxbatch/codec"
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
	errRefused, errUnrun     metrics.Counter
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
		errRefused: c("errors.refused"), errUnrun: c("errors.unrun"),
		memoryReleases: c("memory_releases"),
	}
}

// countEntries counts a frame's calls, casts and sends before any of them
// starts (a call is counted before its reply can reach the caller), with
// one add per counter: the counters are shared by every connection's
// deliveries and every core. The lane's own fences are not calls.
func (m *serverMetrics) countEntries(entries []codec.Entry) {
	var calls, casts, sends int64
	for i := range entries {
		switch e := &entries[i]; e.Kind {
		case codec.KindCall:
			if e.ServicePath != codec.ServicePath || e.ServiceMethod != codec.MethodFence {
				calls++
			}
		case codec.KindCast:
			casts++
		case codec.KindSend:
			sends++
		}
	}
	if calls > 0 {
		m.calls.Inc(calls)
	}
	if casts > 0 {
		m.casts.Inc(casts)
	}
	if sends > 0 {
		m.sends.Inc(sends)
	}
}

// registerGauges adds the plugin to the gauges of its registry, read on
// demand: the connections the plugins keep batch state for, and the
// goroutines their workers keep parked for reuse. Plugins that share a
// registry (WithMetrics) are summed, as their counters are; the gauge
// itself holds the plugins, so they live as long as the registry.
func (p *Plugin) registerGauges() {
	r := p.opts.Registry
	for name, f := range map[string]func(*Plugin) int64{
		"rpcxbatch.server.connections": func(p *Plugin) int64 {
			p.connMu.Lock()
			defer p.connMu.Unlock()
			return int64(len(p.conns))
		},
		"rpcxbatch.server.workers.parked": func(p *Plugin) int64 { return int64(p.workers.idleCount()) },
	} {
		if g, ok := r.GetOrRegister(name, func() metrics.Gauge { return &pluginGauge{read: f} }).(*pluginGauge); ok {
			g.add(p)
		}
	}
}

// unregisterGauges takes the plugin out of its registry's gauges.
func (p *Plugin) unregisterGauges() {
	for _, name := range []string{"rpcxbatch.server.connections", "rpcxbatch.server.workers.parked"} {
		if g, ok := p.opts.Registry.Get(name).(*pluginGauge); ok {
			g.remove(p)
		}
	}
}

// pluginGauge is a gauge that sums read over the plugins reporting to its
// registry.
type pluginGauge struct {
	read    func(*Plugin) int64
	mu      sync.Mutex // guards plugins
	plugins []*Plugin
}

func (g *pluginGauge) add(p *Plugin) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.plugins = append(g.plugins, p)
}

func (g *pluginGauge) remove(p *Plugin) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if i := slices.Index(g.plugins, p); i >= 0 {
		g.plugins = slices.Delete(g.plugins, i, i+1)
	}
}

// Value sums the gauge over its plugins.
func (g *pluginGauge) Value() int64 {
	g.mu.Lock()
	ps := append([]*Plugin(nil), g.plugins...)
	g.mu.Unlock()
	var n int64
	for _, p := range ps {
		n += g.read(p)
	}
	return n
}

// Snapshot returns the gauge's value now, as go-metrics' gauges do.
func (g *pluginGauge) Snapshot() metrics.Gauge { return metrics.GaugeSnapshot(g.Value()) }

// Update panics, as a functional gauge's does: the plugins set it.
func (g *pluginGauge) Update(int64) { panic("Update called on a pluginGauge") }
