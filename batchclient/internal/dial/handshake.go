package dial

import (
	"context"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/share"

	"github.com/rpcxbatch/rpcxbatch/batchclient/internal/lane"
	"github.com/rpcxbatch/rpcxbatch/codec"
)

// handshakeConn bounds a lane's handshake on conn, which rpcx's server
// runs as an ordinary request: with server.WithPool it waits for a free
// worker like every other request, and a plain rpcx client's call would
// wait too. So the handshake is not bounded by DialTimeout (rpcx's
// ConnectTimeout bounds only the dial and TLS), but by the server's signs
// of life: it gives up after HeartbeatTimeout with nothing read (a frozen
// server, as lanes judge one), and every byte read (the answer, or the
// heartbeats the batch plugin sends a lane waiting for a worker) extends
// that; HandshakeTimeout bounds it whole.
type handshakeConn struct {
	net.Conn
	ctx     context.Context
	silence time.Duration
	hard    time.Time
}

// startHandshake sets conn's deadlines for a handshake about to start and
// returns the conn to run it on; ctx ends when the handshake is abandoned
// (the peer stops). The caller clears the deadlines after.
func (d *Dialer) startHandshake(ctx context.Context, conn net.Conn) net.Conn {
	now := time.Now()
	hc := &handshakeConn{Conn: conn, ctx: ctx, silence: d.HeartbeatTimeout, hard: now.Add(d.HandshakeTimeout)}
	conn.SetWriteDeadline(hc.hard)
	conn.SetReadDeadline(hc.next(now))
	if ctx.Err() != nil {
		// Abandoned already: keep an interruption made before these
		// deadlines were set.
		conn.SetDeadline(time.Unix(1, 0))
	}
	return hc
}

// next is the read deadline after hearing from the server at now.
func (hc *handshakeConn) next(now time.Time) time.Time {
	if d := now.Add(hc.silence); d.Before(hc.hard) {
		return d
	}
	return hc.hard
}

// Read reads from the connection; anything read is a sign of life.
func (hc *handshakeConn) Read(b []byte) (int, error) {
	n, err := hc.Conn.Read(b)
	if n > 0 {
		hc.Conn.SetReadDeadline(hc.next(time.Now()))
		if hc.ctx.Err() != nil {
			// Abandoned meanwhile: a past deadline set to interrupt the
			// handshake must not stay replaced by the one just set.
			hc.Conn.SetReadDeadline(time.Unix(1, 0))
		}
	}
	return n, err
}

// handshake asks the server for its batch parameters with an ordinary rpcx
// request, so a plain rpcx server answers it with "can't find service".
func handshake(conn net.Conn, auth string, maxBytes int, ct protocol.CompressType) (codec.Handshake, error) {
	h := codec.HandshakeHeader()
	meta := map[string]string{codec.MetaMaxFrame: strconv.Itoa(maxBytes), codec.MetaByteCredits: "1", codec.MetaLargeReplies: "1"}
	if ct != protocol.None {
		// Entries compressed one by one, as rpcx compresses requests; an
		// older server knows only whole frames (codec's compress.go).
		meta[codec.MetaEntryCompress] = strconv.Itoa(int(ct))
		meta[codec.MetaCompress] = strconv.Itoa(int(ct))
	}
	if auth != "" {
		meta[share.AuthKey] = auth
	}
	if _, err := conn.Write(codec.AppendMessage(nil, &h, codec.ServicePath, codec.MethodHandshake, meta, nil)); err != nil {
		return codec.Handshake{}, err
	}
	for {
		msg, _, err := codec.ReadMessage(conn, maxBytes, nil)
		if err != nil {
			return codec.Handshake{}, err
		}
		if msg.Header.MessageType() != protocol.Response || msg.Header.IsHeartbeat() {
			continue
		}
		if msg.Header.MessageStatusType() == protocol.Error {
			text := msg.Metadata[protocol.ServiceError]
			if strings.Contains(text, "can't find service") {
				return codec.Handshake{}, ErrNoBatchService
			}
			return codec.Handshake{}, lane.ServiceError(text)
		}
		hs, err := codec.DecodeHandshake(msg.Payload)
		hs.ReadTimeout = readTimeoutOf(msg.Metadata)
		hs.WindowBytes = codec.WindowBytesOf(msg.Metadata)
		if hs.EntryCompress = codec.EntryCompressOf(msg.Metadata); hs.EntryCompress != ct {
			hs.EntryCompress = protocol.None // not what this lane asked for
		}
		return hs, err
	}
}

// readTimeoutOf returns the server read timeout a handshake response's
// metadata announces (codec.MetaReadTimeout), or 0.
func readTimeoutOf(meta map[string]string) time.Duration {
	d, err := time.ParseDuration(meta[codec.MetaReadTimeout])
	if err != nil || d < 0 {
		return 0
	}
	return d
}
