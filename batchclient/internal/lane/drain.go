package lane

import (
	"fmt"

	"github.com/rpcxbatch/rpcxbatch/codec"
)

// Draining. A server that begins a graceful shutdown sends a drain notice
// (codec.MethodDrain) on every connection and reads no more from them; it
// answers every entry it read. A lane that hears the notice stops writing,
// fails the entries still queued with ErrDraining, refuses new ones with
// it, and keeps reading until every call it wrote has its reply (drained)
// or the server closes the connection (then the calls it never read fail
// with ErrConnection, which rpcx's Failover retries as well). Its peer
// takes new calls off the pool at once (ErrPeerDown wrapping ErrDraining),
// waits for the pool to drain, and reconnects.

// onDrainNotice handles a drain notice read from the server.
func (l *Lane) onDrainNotice(payload []byte) error {
	inc, err := codec.DecodeDrain(payload)
	if err != nil {
		return err
	}
	if inc == l.hs.Incarnation {
		l.Drain()
	}
	return nil
}

// onUnrun handles an unrun notice read from the server: a server that
// shuts down did not run those calls (a frame it read too late to run
// them, see codec.MethodUnrun). They fail with ErrDraining, which the
// XClient retries elsewhere, as the entries a draining lane never wrote.
func (l *Lane) onUnrun(payload []byte) error {
	inc, ids, err := codec.DecodeUnrun(payload)
	if err != nil {
		return err
	}
	if inc != l.hs.Incarnation {
		return nil
	}
	err = fmt.Errorf("%w: %s", ErrDraining, l.addr)
	for _, id := range ids {
		if call := l.Claim(id); call != nil {
			l.cfg.Metrics.ErrDrain.Inc(1)
			l.Finish(call, err)
		}
	}
	l.checkDrained()
	return nil
}

// Drain stops the lane's writing for good: queued entries fail with
// ErrDraining, and so do later ones. Calls already written stay pending.
func (l *Lane) Drain() {
	l.qmu.Lock()
	if l.deadErr != nil || l.drainErr != nil {
		l.qmu.Unlock()
		return
	}
	// Before any entry fails: their callers' retries must already find the
	// server out of selection (batchclient's skipDraining).
	l.cfg.OnDrain(l.addr)
	err := fmt.Errorf("%w: %s", ErrDraining, l.addr)
	l.drainErr = err
	queued := l.queue
	l.queue, l.qBytes = nil, 0
	l.qLen.Store(0)
	l.qBytesNow.Store(0)
	// Callers waiting for room see the error now.
	l.wakeLocked()
	l.qmu.Unlock()
	l.draining.Store(true)
	l.cfg.Metrics.ErrDrain.Inc(int64(len(queued)))
	l.failQueued(queued, err)
	select {
	case l.cfg.Down <- struct{}{}:
	default:
	}
	l.checkDrained()
}

// checkDrained closes l.drained once a draining lane has no call left
// waiting for its reply.
func (l *Lane) checkDrained() {
	if !l.draining.Load() {
		return
	}
	if l.pending.empty() {
		l.drainedOnce.Do(func() { close(l.drained) })
	}
}

// failQueued completes the queued entries of a lane that stopped writing:
// calls with err, casts and sends are dropped.
func (l *Lane) failQueued(queued []*entry, err error) {
	for _, e := range queued {
		deferred := e.deferred // e is its caller's once the call is finished
		if e.Kind == codec.KindCall {
			if call := l.Claim(e.ID); call != nil {
				l.Finish(call, err)
			}
		}
		if !deferred {
			putEntry(e)
		}
	}
}
