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
var ErrNoBatchService = errors.New("batchclient: server has no batch service")

// Dialer opens the connections of one address's lane pool: it dials,
// sets up TLS, and runs the lane handshake, within the bounds of the
// client's options, which it holds as values.
type Dialer struct {
	// Network and Addr are what is dialed ("tcp", "host:port").
	Network, Addr string
	// DialTimeout bounds the dial and the TLS handshake, as rpcx's
	// ConnectTimeout does (Options.DialTimeout).
	DialTimeout time.Duration
	// KeepAlive is the TCP keep-alive period (Options.TCPKeepAlivePeriod):
	// applied to plain TCP connections when above 0, none when negative
	// (see connect).
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
	// Created, when set, is run on each connection before the lane uses
	// it (when, see Attempt): it may return another connection (a
	// wrapper) for the lane to use, or an error, which fails the
	// connection as a failed connect. rpcx's ConnCreated plugins run
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

// UpError marks a failure after the connection was up (the TCP dial and
// TLS succeeded, and Created ran when the Dial was Early): the lane
// handshake failed, the server closed the connection or never answered.
// Conn is the connection, closed.
type UpError struct {
	Err  error
	Conn net.Conn
}

func (e *UpError) Error() string { return e.Err.Error() }

func (e *UpError) Unwrap() error { return e.Err }

// Attempt says how one Dial runs its hooks.
type Attempt struct {
	// Early runs Created as soon as the connection is up (after TCP and
	// TLS), before the lane handshake, as rpcx runs ConnCreated on the
	// connection its dial made before any request; the handshake then
	// runs over the connection Created returned. Otherwise Created runs
	// only once the handshake found the batch plugin.
	Early bool
	// Up, when set, is called with the connection once it is up (after an
	// Early Created), before the handshake.
	Up func(net.Conn)
}

// Dial opens one connection to the server and performs the lane
// handshake on it. Closing stop abandons it at once.
//
// When the server is plain (ErrNoBatchService) and the Dial was Early,
// the connection is returned open with the error, as an rpcx connection
// the plain client can take over (Created has run for it); the caller
// closes it otherwise. A failure after the connection was up is an
// *UpError.
func (d *Dialer) Dial(stop <-chan struct{}, a Attempt) (net.Conn, codec.Handshake, error) {
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
	conn, err := d.connect(dialCtx)
	if err != nil {
		return nil, hs, &ConnectError{err}
	}
	created := func() error {
		if d.Created == nil {
			return nil
		}
		wrapped, err := d.Created(conn)
		if err != nil {
			conn.Close()
			return &ConnectError{err}
		}
		conn = wrapped
		return nil
	}
	if a.Early {
		if err := created(); err != nil {
			return nil, hs, err
		}
	}
	if a.Up != nil {
		a.Up(conn)
	}
	// Stop ends ctx: the handshake's reads and writes end at once.
	interrupt := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	hs, err = handshake(d.startHandshake(ctx, conn), d.Auth(), d.MaxFrameBytes, d.CompressType)
	if !interrupt() && err == nil {
		err = ctx.Err()
	}
	if err != nil {
		if a.Early && errors.Is(err, ErrNoBatchService) && ctx.Err() == nil {
			conn.SetDeadline(time.Time{})
			return conn, hs, err
		}
		conn.Close()
		return nil, hs, &UpError{Err: err, Conn: conn}
	}
	conn.SetDeadline(time.Time{})
	if !a.Early {
		// After the handshake: a connection that only found a plain
		// server is not one the calls use (the plain rpcx client dials
		// its own, running the same plugins), so it is not reported.
		if err := created(); err != nil {
			return nil, hs, err
		}
	}
	return conn, hs, nil
}

// connect dials the server and sets up TLS within ctx. Keep-alive is as
// rpcx's client leaves it: Go's default on every connection, and
// KeepAlive, when above 0, as the period of a plain TCP connection (rpcx
// applies Option.TCPKeepAlivePeriod to a *net.TCPConn only, so not over
// TLS); a negative KeepAlive turns it off (WithTCPKeepAlive).
func (d *Dialer) connect(ctx context.Context) (net.Conn, error) {
	var nd net.Dialer
	if d.KeepAlive < 0 {
		nd.KeepAlive = -1
	}
	conn, err := nd.DialContext(ctx, d.Network, d.Addr)
	if err != nil {
		return nil, err
	}
	if tc, ok := conn.(*net.TCPConn); ok && d.KeepAlive > 0 && d.TLSConfig == nil {
		tc.SetKeepAlive(true)
		tc.SetKeepAlivePeriod(d.KeepAlive)
	}
	cfg := d.TLSConfig
	if cfg == nil {
		return conn, nil
	}
	if cfg.ServerName == "" && !cfg.InsecureSkipVerify {
		// As tls.Dial does: verify the certificate against the host
		// dialed.
		cfg = cfg.Clone()
		cfg.ServerName, _, _ = net.SplitHostPort(d.Addr)
	}
	tc := tls.Client(conn, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		conn.Close()
		return nil, err
	}
	return tc, nil
}
