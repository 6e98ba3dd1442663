package batchclient

import metrics "github.com/rcrowley/go-metrics"

// clientMetrics are the client's go-metrics instruments, all named
// "rpcxbatch.client.*".
type clientMetrics struct {
	calls, casts, sends, frames     metrics.Counter
	fallbacks, reconnects           metrics.Counter
	batchSize                       metrics.Histogram
	queueDepth                      metrics.Gauge
	errOverload, errConn, errStale  metrics.Counter
	errService, errDown, errTimeout metrics.Counter
	errCodec, errPushDropped        metrics.Counter
	errDrain                        metrics.Counter
	// lanesOpen is the lanes open to every peer; lanesAdded and
	// lanesRetired count those opened beyond a pool's first and those
	// retired for want of load.
	lanesOpen                metrics.Gauge
	lanesAdded, lanesRetired metrics.Counter
}

func newClientMetrics(r metrics.Registry) *clientMetrics {
	c := func(name string) metrics.Counter { return metrics.GetOrRegisterCounter("rpcxbatch.client."+name, r) }
	return &clientMetrics{
		calls: c("calls"), casts: c("casts"), sends: c("sends"), frames: c("frames"),
		fallbacks: c("fallbacks"), reconnects: c("reconnects"),
		batchSize:   metrics.GetOrRegisterHistogram("rpcxbatch.client.batch_size", r, metrics.NewExpDecaySample(1028, 0.015)),
		queueDepth:  metrics.GetOrRegisterGauge("rpcxbatch.client.queue_depth", r),
		errOverload: c("errors.overload"), errConn: c("errors.connection"), errStale: c("errors.stale_incarnation"),
		errService: c("errors.service"), errDown: c("errors.peer_down"), errTimeout: c("errors.timeout"),
		errCodec: c("errors.codec"), errPushDropped: c("errors.push_dropped"),
		errDrain:   c("errors.draining"),
		lanesOpen:  metrics.GetOrRegisterGauge("rpcxbatch.client.lanes.open", r),
		lanesAdded: c("lanes.added"), lanesRetired: c("lanes.retired"),
	}
}
