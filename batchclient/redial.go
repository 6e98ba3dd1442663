package batchclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/smallnest/rpcx/client"

	"github.com/rpcxbatch/rpcxbatch/batchclient/internal/dial"
)

// Redialling on demand. A peer that cannot connect backs off exponentially
// up to ReconnectMax, so that a server gone for good costs little; but a
// restarting server is back a moment later, and plain rpcx redials it at
// the next call. So a peer that calls ask for is redialled after
// ReconnectMin, and at once when an XClient asks (GenerateClient: a
// Failover or Failtry loop over a refusing server must cost no more than
// on rpcx, whose refused dial is cheap).
//
// A server that failed in a way a later try will meet again is redialled
// only when a call asks, never in the background: a failed TLS handshake
// (an untrusted certificate is not transient), or a connection taken and
// the lane handshake never answered (a hung process). One that took the
// connection and closed it is redialled as one that refused it (most
// often a process dying or restarting).

// redialWake is why waitRedial returned.
type redialWake int

const (
	// wakeStop: the peer is stopping.
	wakeStop redialWake = iota
	// wakeIdle: nothing asked for the peer, and it does not redial alone;
	// time to see whether it is unused (ForgetDown).
	wakeIdle
	// wakeTimer: the backoff ran out, or a call asked ReconnectMin ago.
	wakeTimer
	// wakeNow: an XClient asked for a fresh connect: at once.
	wakeNow
)

// wanted tells the manager, without blocking, that a call found the peer
// down.
func (p *peer) wanted() {
	select {
	case p.demand <- struct{}{}:
	default:
	}
}

// wantedNow tells the manager, without blocking, that an XClient waits for
// a fresh connect.
func (p *peer) wantedNow() {
	select {
	case p.demandNow <- struct{}{}:
	default:
	}
}

// waitRedial waits before the next connect attempt: backoff (when alone;
// otherwise ForgetDown, to look whether the peer went unused, wakeIdle),
// ReconnectMin when a call asks for the peer meanwhile, and not at all
// when an XClient asks.
func (p *peer) waitRedial(backoff time.Duration, alone bool) redialWake {
	timeout := backoff
	if !alone {
		timeout = p.env.forgetDown
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	start := time.Now()
	select {
	case <-p.stop:
		return wakeStop
	case <-t.C:
		if !alone {
			return wakeIdle
		}
		return wakeTimer
	case <-p.demandNow:
		return wakeNow
	case <-p.demand:
	}
	if wait := p.env.reconnectMin - time.Since(start); wait > 0 {
		t.Reset(wait)
		select {
		case <-p.stop:
			return wakeStop
		case <-p.demandNow:
			return wakeNow
		case <-t.C:
		}
	}
	return wakeTimer
}

// redialsAlone reports whether a peer whose connect failed with err
// redials in the background: not after a TLS handshake that failed, nor
// after a lane handshake that timed out (see above).
func redialsAlone(err error) bool {
	var up *dial.UpError
	var ne net.Error
	if errors.As(err, &up) && errors.As(up.Err, &ne) && ne.Timeout() {
		return false
	}
	var cv *tls.CertificateVerificationError
	var alert tls.AlertError
	var rh tls.RecordHeaderError
	var ua x509.UnknownAuthorityError
	var hn x509.HostnameError
	var ci x509.CertificateInvalidError
	return !errors.As(err, &cv) && !errors.As(err, &alert) && !errors.As(err, &rh) &&
		!errors.As(err, &ua) && !errors.As(err, &hn) && !errors.As(err, &ci)
}

// upConn is the connection of a failed attempt that an XClient waited for
// (early) and that failed once the connection was up, or nil.
func upConn(err error, early bool) net.Conn {
	var up *dial.UpError
	if early && errors.As(err, &up) {
		return up.Conn
	}
	return nil
}

// A fresh outcome for rpcx's XClient. When rpcx asks the builder for a
// server's client (GenerateClient: the first call, or a retry after a
// failure) plain rpcx dials there and then, so a server back a moment
// after a restart is found by the very next try. The drop-in waits for
// the outcome of a connect attempt made after it asked: the pool under
// way, or, when the last attempt failed before it asked, the next one,
// which it asks for at once (wantedNow). A failure it returns is that
// fresh attempt's, never one cached from before the restart. Its outcome
// is what rpcx's dial decides, no more: a connection up (TCP and TLS) is
// a success, as it is for rpcx, and the calls then wait for the lane
// handshake, each within its own context; a server that takes the
// connection and never answers costs a caller its deadline, as on rpcx,
// not the handshake's timeout.

// awaitFresh waits, within ctx, until the peer is connected or plain, the
// connection of an attempt an XClient waits for is up (unless full), or an
// attempt that was under way or begun after it was called has failed, and
// returns that view (its err is the failure). With created, the caller
// made the peer, whose first attempt is its own: a failure already there
// is its outcome, not one to ask again after.
func (p *peer) awaitFresh(ctx context.Context, full, created bool) (*peerView, error) {
	v := p.view.Load()
	stale := v
	if created {
		stale = nil
	}
	for {
		p.lastUsed.Store(time.Now().UnixNano())
		switch v.state {
		case stateBatch:
			if !v.draining() {
				return v, nil
			}
			// The server said it shuts down, and the peer has not yet
			// taken its pool off (drainPool): under load a Failtry
			// retry got here again and again, each attempt refused at
			// once with ErrDraining, where plain rpcx's retry dials the
			// server's successor. Wait for the peer's next view, as for
			// a down one (TestQuickRestartFailtryRetriesAsOnPlain).
			stale = v
			p.wantedNow()
		case statePlain:
			return v, nil
		case stateConnecting:
			if v.conn != nil && !full {
				return v, nil
			}
		case stateDown:
			if v != stale && v.early {
				return v, v.err
			}
			// Failed before we asked, or a background redial under way
			// when we asked failed (its dial ran no connection hook, as
			// rpcx makes no such redial): ask for an attempt of our own
			// now, as rpcx's call dials.
			stale = v
			p.wantedNow()
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

// draining reports whether a lane of v's pool heard its server's drain
// notice.
func (v *peerView) draining() bool {
	for _, l := range v.lanes {
		if l.Draining() {
			return true
		}
	}
	return false
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
// the connect itself that failed (rpcx's ConnCreateFailed case). A
// connection that came up is a success even if the lane handshake on it
// is under way or failed since: rpcx's dial succeeded there, and the
// calls meet the outcome. With full, the handshake's outcome is waited
// for too.
func (c *Client) connectFresh(ctx context.Context, addr string, full bool) (fc freshConn, connectFailed bool, err error) {
	for try := 0; ; try++ {
		_, existed := c.live.Load(addr)
		created := !existed
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
		v, err := p.awaitFresh(ctx, full, created)
		if errors.Is(err, errForgotten) && try < 3 {
			continue
		}
		if v.conn != nil && (v.state == stateConnecting || v.state == stateDown) {
			return freshConn{conn: v.conn, viaLanes: true}, false, nil
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
		// its connection is the one reported (the one the XClient's
		// connect made, when the plain client took it over).
		pr, err := p.usePlain(ctx)
		if err != nil {
			return fc, false, err
		}
		conn := pr.pc.Conn
		pr.done()
		return freshConn{conn: conn}, false, nil
	}
}

// ready reports whether calls to addr go out at once: its lane pool is up
// or it is plain (rpcx's dial would have returned, and its send would be
// under way).
func (c *Client) ready(addr string) bool {
	p, ok := c.live.Load(addr)
	if !ok {
		return false
	}
	s := p.(*peer).view.Load().state
	return s == stateBatch || s == statePlain
}
