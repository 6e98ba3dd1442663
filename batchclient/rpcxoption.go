package batchclient

import (
	"errors"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/protocol"
)

// ErrInvalidOption is returned by New for an option it cannot honour.
var ErrInvalidOption = errors.New("batchclient: invalid option")

// WithCompress compresses entries with ct, as rpcx's client compresses
// requests with Option.CompressType: each entry whose encoded arguments
// are larger than rpcx's threshold (codec.CompressThreshold, 1 KiB) is
// compressed alone, the server inflates it itself, and compresses the
// reply to it when larger than the threshold, as rpcx's server compresses
// the response to a compressed request. With a server of an older release
// (which does not answer codec.MetaEntryCompress in the handshake), whole
// frames are compressed instead, in the frame's rpcx header. ct must have
// a compressor in rpcx's protocol.Compressors (protocol.Gzip has). The
// plain fallback compresses with ct too.
func WithCompress(ct protocol.CompressType) Option {
	return func(o *Options) { o.CompressType = ct }
}

// WithTCPKeepAlive sets the TCP keep-alive period of lanes over plain TCP
// (over TLS they keep Go's default, as rpcx's connections do); 0 keeps
// Go's default, and a negative period turns keep-alive off, over TLS too.
func WithTCPKeepAlive(d time.Duration) Option {
	return func(o *Options) { o.TCPKeepAlivePeriod = d }
}

// FromRPCX maps the fields of an rpcx client.Option that have a meaning on
// lanes onto the batch options, and makes option the plain fallback's
// option (as WithRPCXOption). Options given after it override what it
// set. NewXClient applies it to its option argument.
//
//   - SerializeType, TLSConfig and CompressType apply to lanes as to rpcx.
//   - ConnectTimeout, when not zero, bounds each lane's dial and TLS
//     handshake (DialTimeout), as in rpcx. The lane handshake with the
//     batch plugin is an rpcx request, which waits for a worker of a
//     server pool as rpcx's calls do: HandshakeTimeout bounds it.
//   - TCPKeepAlivePeriod, when above zero, is the keep-alive period of
//     lanes over plain TCP, as rpcx applies it to a *net.TCPConn only;
//     over TLS, and with a period of zero or below, lanes keep Go's
//     default keep-alive, as rpcx's connection does.
//   - Heartbeat with a HeartbeatInterval above zero tunes the lanes' own
//     heartbeat: a lane quiet for HeartbeatInterval sends one, and a peer
//     heard nothing from for HeartbeatInterval + MaxWaitForHeartbeat
//     (rpcx's default 30 s when zero) is given up, as rpcx's client closes
//     a connection whose heartbeat got no answer within
//     MaxWaitForHeartbeat. Lanes always heartbeat; without Heartbeat they
//     keep their own defaults.
//
// The fields that keep rpcx's meaning above the lanes (Retries,
// RetryInterval, BackupLatency, GenBreaker, Group, Sticky: rpcx's XClient
// applies them) and those that do not apply to lanes are documented in
// the README's options table.
func FromRPCX(option client.Option) Option {
	return func(o *Options) {
		o.RPCX = option
		o.SerializeType = option.SerializeType
		o.CompressType = option.CompressType
		if option.TLSConfig != nil {
			o.TLSConfig = option.TLSConfig
		}
		if option.ConnectTimeout > 0 {
			o.DialTimeout = option.ConnectTimeout
		}
		if option.TCPKeepAlivePeriod > 0 {
			o.TCPKeepAlivePeriod = option.TCPKeepAlivePeriod
		}
		if option.Heartbeat && option.HeartbeatInterval > 0 {
			wait := option.MaxWaitForHeartbeat
			if wait <= 0 {
				wait = 30 * time.Second // rpcx's own default (Client.heartbeat)
			}
			o.HeartbeatInterval = option.HeartbeatInterval
			o.HeartbeatTimeout = option.HeartbeatInterval + wait
		}
	}
}
