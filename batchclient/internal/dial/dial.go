package dial

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"time"

	"github.com/smallnest/rpcx/protocol"

	"github.com/rpcxbatch/rpcxbatch/codec"
)

// ErrNoBatchService marks a handshake answered by rpcx's "can't find
// service": the server is plain.
var ErrNoBatchService = errors.New("rpcxbatch: no batch service")

// Dialer opens the connections of one address's lane pool: it dials,
// sets up TLS, and runs the lane handshake, within the bounds of the
// client's options, which it holds as values.
type Dialer struct {
	// Network and Addr are what is dialed ("tcp", "host:port").
	Network, Addr string
	// DialTimeout bounds the dial and the TLS handshake, as rpcx's
	// ConnectTimeout does (Options.DialTimeout).
	DialTimeout time.Duration
	// KeepAlive is the TCP keep-alive period (Options.TCPKeepAlivePeriod).
	KeepAlive time.Duration
	// TLSConfig, when set, makes the connection TLS (Options.TLSConfig).
	TLSConfig *tls.Config
	// HeartbeatTimeout is the most the handshake waits with nothing read,
	// HandshakeTimeout the most it takes in all (handshake.go).
	HeartbeatTimeout, HandshakeTimeout time.Duration
	// MaxFrameBytes and CompressType are asked of the server
	// (Options.MaxFrameBytes, Options.CompressType).
	MaxFrameBytes int
	CompressType  protocol.CompressType
	// Auth returns the token the handshake presents.
	Auth func() string
	// Created, when set, is run on each connection whose handshake found
	// the batch plugin, before the lane uses it: it may return another
	// connection (a wrapper) for the lane to use, or an error, which fails
	// the connection as a failed connect. rpcx's ConnCreated plugins run
	// through it.
	Created func(net.Conn) (net.Conn, error)
}

// ConnectError marks an error of connecting itself (the TCP dial, the TLS
// handshake, or Created), as opposed to one of the lane handshake: the
// errors for which rpcx's client runs its ConnCreateFailed plugins. Its
// text is the cause's.
type ConnectError struct{ Err error }

func (e *ConnectError) Error() string { return e.Err.Error() }

func (e *ConnectError) Unwrap() error { return e.Err }

// Dial opens one connection to the server and performs the lane
// handshake on it. Closing stop abandons it at once.
func (d *Dialer) Dial(stop <-chan struct{}) (net.Conn, codec.Handshake, error) {
	var hs codec.Handshake
	// ctx ends when the peer stops. DialTimeout bounds only the dial and
	// TLS (dialCtx), as rpcx's ConnectTimeout: the handshake has bounds of
	// its own (handshake.go).
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	dialCtx, cancelDial := context.WithTimeout(ctx, d.DialTimeout)
	defer cancelDial()
	nd := net.Dialer{KeepAlive: d.KeepAlive}
	conn, err := nd.DialContext(dialCtx, d.Network, d.Addr)
	if err != nil {
		return nil, hs, &ConnectError{err}
	}
	if cfg := d.TLSConfig; cfg != nil {
		if cfg.ServerName == "" && !cfg.InsecureSkipVerify {
			// As tls.Dial does: verify the certificate against the host
			// dialed.
			cfg = cfg.Clone()
			cfg.ServerName, _, _ = net.SplitHostPort(d.Addr)
		}
		tc := tls.Client(conn, cfg)
		if err := tc.HandshakeContext(dialCtx); err != nil {
			conn.Close()
			return nil, hs, &ConnectError{err}
		}
		conn = tc
	}
	// Stop ends ctx: the handshake's reads and writes end at once.
	interrupt := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	hs, err = handshake(d.startHandshake(ctx, conn), d.Auth(), d.MaxFrameBytes, d.CompressType)
	if !interrupt() && err == nil {
		err = ctx.Err()
	}
	if err != nil {
		conn.Close()
		return nil, hs, err
	}
	conn.SetDeadline(time.Time{})
	if d.Created != nil {
		// After the handshake: a connection that only found a plain server
		// is not one the calls use (the plain rpcx client dials its own,
		// running the same plugins), so it is not reported.
		wrapped, err := d.Created(conn)
		if err != nil {
			conn.Close()
			return nil, hs, &ConnectError{err}
		}
		conn = wrapped
	}
	return conn, hs, nil
}
