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
}

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
		return nil, hs, err
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
			return nil, hs, err
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
	return conn, hs, nil
}
