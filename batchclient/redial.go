package batchclient

import "time"

// Redialling on demand. A peer that cannot connect backs off exponentially
// up to ReconnectMax, so that a server gone for good costs little. But a
// server that restarts (a rolling restart) is back a moment later, and
// plain rpcx redials it at the next call: a peer that calls ask for is
// redialled after ReconnectMin instead of waiting out the whole backoff,
// so the restarted server takes calls again at once. A peer nobody asks
// for keeps the exponential backoff.

// wanted tells the manager, without blocking, that a call found the peer
// down.
func (p *peer) wanted() {
	select {
	case p.demand <- struct{}{}:
	default:
	}
}

// waitRedial waits before the next connect attempt: backoff, or
// ReconnectMin when a call asks for the peer meanwhile. It reports false
// on Stop.
func (p *peer) waitRedial(backoff time.Duration) bool {
	t := time.NewTimer(backoff)
	defer t.Stop()
	start := time.Now()
	select {
	case <-p.stop:
		return false
	case <-t.C:
		return true
	case <-p.demand:
	}
	if wait := p.env.reconnectMin - time.Since(start); wait > 0 {
		t.Reset(wait)
		select {
		case <-p.stop:
			return false
		case <-t.C:
		}
	}
	return true
}
