package batchclient

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/smallnest/rpcx/client"

	"github.com/rpcxbatch/rpcxbatch/batchclient/internal/dial"
)

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

// A fresh outcome for rpcx's XClient. When rpcx asks the builder for a
// server's client (GenerateClient: the first call, or a retry after a
// failure) plain rpcx dials there and then, so a server back a moment
// after a restart is found by the very next try. The drop-in waits for
// the outcome of a connect attempt made after it asked: the pool under
// way, or, when the last attempt failed before it asked, the next one,
// which it asks for (wanted: made at once, or ReconnectMin after the last
// failure). A failure it returns is that fresh attempt's, never one
// cached from before the restart.

// awaitFresh waits, within ctx, until the peer is connected or plain, or
// an attempt that was under way or begun after it was called has failed,
// and returns that view (its err is the failure).
func (p *peer) awaitFresh(ctx context.Context) (*peerView, error) {
	v := p.view.Load()
	stale := v
	for {
		p.lastUsed.Store(time.Now().UnixNano())
		switch v.state {
		case stateBatch, statePlain:
			return v, nil
		case stateDown:
			if v != stale {
				return v, v.err
			}
			// Failed before we asked: ask for another attempt now.
			p.wanted()
		case stateStopped:
			return v, ErrStopped
		case stateForgotten:
			return v, errForgotten
		}
		select {
		case <-v.changed:
		case <-ctx.Done():
			if v.err != nil {
				return v, fmt.Errorf("%w: %s: gave up waiting for a connection (%w): %w", ErrPeerDown, p.addr, ctx.Err(), v.err)
			}
			return v, fmt.Errorf("%w: %s: gave up waiting for a connection: %w", ErrPeerDown, p.addr, ctx.Err())
		}
		v = p.view.Load()
	}
}

// freshConn is what an XClient's new RPCClient for addr is made with: the
// connection it reports (a lane's, or the plain client's), and whether
// its calls ride the lanes.
type freshConn struct {
	conn     net.Conn
	viaLanes bool
}

// connectFresh starts addr if needed and waits, within ctx, for a fresh
// outcome (see awaitFresh). A failure to connect is returned as
// ErrPeerDown wrapping the cause, or as the server's refusal (its
// AuthFunc) as plain rpcx gives it; connectFailed reports whether it was
// the connect itself that failed (rpcx's ConnCreateFailed case).
func (c *Client) connectFresh(ctx context.Context, addr string) (fc freshConn, connectFailed bool, err error) {
	for try := 0; ; try++ {
		if err := c.Start(addr); err != nil {
			return fc, false, err
		}
		p, err := c.peer(addr)
		if err != nil {
			return fc, false, err
		}
		if p == nil {
			return fc, false, ErrStopped
		}
		v, err := p.awaitFresh(ctx)
		if errors.Is(err, errForgotten) && try < 3 {
			continue
		}
		if err != nil {
			var se client.ServiceError
			if v.state == stateDown && !errors.As(err, &se) {
				var ce *dial.ConnectError
				return fc, errors.As(err, &ce), fmt.Errorf("%w: %s: %w", ErrPeerDown, p.addr, err)
			}
			return fc, false, err
		}
		if v.state == stateBatch {
			return freshConn{conn: v.lanes[0].Conn(), viaLanes: true}, false, nil
		}
		// Plain: rpcx's Client would dial now; so does the fallback, and
		// its connection is the one reported.
		pr, err := p.usePlain(ctx)
		if err != nil {
			return fc, false, err
		}
		conn := pr.pc.Conn
		pr.done()
		return freshConn{conn: conn}, false, nil
	}
}
