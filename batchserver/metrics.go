package batchserver

import metrics "github.com/rcrowley/go-metrics"

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

// registerGauges adds the gauges read on demand: the connections the
// plugin keeps batch state for, and the goroutines its workers keep
// parked for reuse.
func (p *Plugin) registerGauges() {
	r := p.opts.Registry
	r.GetOrRegister("rpcxbatch.server.connections", metrics.NewFunctionalGauge(func() int64 {
		p.connMu.Lock()
		defer p.connMu.Unlock()
		return int64(len(p.conns))
	}))
	r.GetOrRegister("rpcxbatch.server.workers.parked", metrics.NewFunctionalGauge(func() int64 {
		return int64(p.workers.idleCount())
	}))
}
