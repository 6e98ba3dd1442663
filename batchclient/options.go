package batchclient

import (
	"crypto/tls"
	"fmt"
	"time"

	metrics "github.com/rcrowley/go-metrics"
	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/protocol"
)

// Overflow says what a caller meets when its lane's queue is full.
type Overflow int

const (
	// OverflowBlock makes the caller wait for room until its context ends;
	// it then gets the context's error. The default.
	OverflowBlock Overflow = iota
	// OverflowFailFast returns ErrOverloaded at once, without waiting for
	// room (after one yield of the processor, so that callers retrying in
	// a loop leave the lane's own goroutines their turn).
	OverflowFailFast
)

// Defaults of the client options.
const (
	DefaultBatchCap          = 1000
	DefaultMaxFrameBytes     = 16 << 20
	DefaultQueueEntries      = 16384
	DefaultQueueBytes        = 64 << 20
	DefaultHeartbeatInterval = 500 * time.Millisecond
	DefaultHeartbeatTimeout  = 2 * time.Second
	DefaultDialTimeout       = 3 * time.Second
	DefaultHandshakeTimeout  = 30 * time.Second
	DefaultReconnectMin      = 50 * time.Millisecond
	DefaultReconnectMax      = 5 * time.Second
	DefaultForgetDown        = time.Minute
	DefaultReprobePlain      = time.Minute
	DefaultMinLanes          = 1
	DefaultLaneIdle          = 10 * time.Second
	// MaxLanesCeiling bounds the lanes to one server whatever it announces
	// (a server configured with WithPoolSize(10000) by mistake must not
	// make its clients dial thousands of connections).
	MaxLanesCeiling = 256
)

// Options configure a Client. Every field has a usable zero value; the
// defaults are the Default constants above.
type Options struct {
	// Lanes, when positive, fixes the number of lanes (connections) per
	// server: all of them are opened at connect and kept. 0, the default,
	// makes lanes follow the load: a peer starts with MinLanes and opens
	// another, up to MaxLanes, when the lanes it has are saturated, and
	// retires one when the pool has been underused for LaneIdle (see the
	// README, "How lanes are sized").
	Lanes int
	// MinLanes is the lanes a peer starts with and keeps however idle.
	// Default 1.
	MinLanes int
	// MaxLanes caps the lanes per server. 0, the default, takes the pool
	// size the server's handshake announces (its GOMAXPROCS unless set
	// with batchserver.WithPoolSize); either way at most MaxLanesCeiling.
	MaxLanes int
	// LaneIdle is how long a pool must have been underused (its lanes'
	// writers busy for less than a quarter of one lane's time beyond
	// what one lane fewer would carry) before one lane is retired; a
	// retired lane takes no new entries, finishes what it holds and
	// closes. Default 10 s.
	LaneIdle time.Duration
	// BatchCap is the most entries one frame carries. Default 1000; the
	// server's cap wins when smaller.
	BatchCap int
	// MaxFrameBytes caps one frame; the server's cap wins when smaller. A
	// call or cast that cannot fit alone goes as a plain rpcx request on
	// the server's plain connection; a send fails with ErrTooLarge. A
	// reply too large comes alone in a frame of its own. Default 16 MiB.
	MaxFrameBytes int
	// QueueEntries and QueueBytes bound each lane's queue of entries not
	// yet written. Defaults 16384 entries and 64 MiB.
	QueueEntries int
	QueueBytes   int
	// Overflow picks what a caller meets at a full queue. Default
	// OverflowBlock.
	Overflow Overflow
	// HeartbeatInterval is how long a lane may hear nothing before it sends
	// a heartbeat; HeartbeatTimeout is how long before it gives up on the
	// peer and fails its calls with ErrConnection (ErrHeartbeat). It also
	// bounds each write. Defaults 500 ms and 2 s.
	HeartbeatInterval time.Duration
	HeartbeatTimeout  time.Duration
	// DialTimeout bounds connecting: the TCP dial and the TLS handshake,
	// as rpcx's Option.ConnectTimeout. Default 3 s.
	DialTimeout time.Duration
	// HandshakeTimeout bounds a lane's handshake, which the server runs as
	// an rpcx request (on its pool, with server.WithPool, behind the
	// handlers running there). Within it, a server silent for
	// HeartbeatTimeout is given up as frozen; one whose pool is busy sends
	// heartbeats meanwhile. Default 30 s.
	HandshakeTimeout time.Duration
	// ReconnectMin and ReconnectMax bound the exponential backoff between
	// attempts to reach a peer that is down. Defaults 50 ms and 5 s.
	ReconnectMin time.Duration
	ReconnectMax time.Duration
	// ForgetDown is how long an address may stay down with no call asking
	// for it before the client stops reconnecting and forgets it (Info then
	// says NotConnected), so servers that left a discovery for good are not
	// redialled forever. The next call starts afresh. A server without
	// the batch plugin is forgotten too, and its plain connection closed,
	// when at its next ReprobePlain no call has started on it for
	// ForgetDown and none is still running. Default 1 minute.
	ForgetDown time.Duration
	// ReprobePlain is how often a server found to have no batch plugin is
	// asked again, in the background, while its calls go over plain rpcx: a
	// server that gains the plugin (a rolling upgrade) is then served by
	// lanes. It is also asked at once when its plain connection breaks, as
	// it does when the server restarts. After the switch the plain
	// connection is kept as long again, then closed once the calls still
	// on it are done. Default 1 minute.
	ReprobePlain time.Duration
	// SerializeType encodes arguments and replies. Default MsgPack, as rpcx.
	SerializeType protocol.SerializeType
	// TLSConfig, when set, makes lanes (and the plain fallback) use TLS.
	TLSConfig *tls.Config
	// CompressType compresses entries as rpcx compresses requests (see
	// WithCompress). Default protocol.None.
	CompressType protocol.CompressType
	// TCPKeepAlivePeriod is the TCP keep-alive period of lanes, as rpcx's
	// Option.TCPKeepAlivePeriod: 0 leaves Go's default (keep-alive on, 15
	// s), a negative value turns keep-alive off.
	TCPKeepAlivePeriod time.Duration
	// Auth is the token sent with every frame and handshake, for servers
	// with an AuthFunc (each entry also carries its caller's metadata).
	Auth string
	// RPCX is the option the plain-rpcx fallback connects with. Its
	// SerializeType and TLSConfig are overridden by the fields above.
	RPCX client.Option
	// Registry receives the client metrics. Default: a new registry.
	Registry metrics.Registry
	// IdleMemoryRelease, when positive, returns free memory to the OS once
	// the load has been gone this long (see WithIdleMemoryRelease).
	// Default 0: never.
	IdleMemoryRelease time.Duration
}

// Option sets one client option.
type Option func(*Options)

// WithLanes fixes the lanes per server at n; 0 makes them follow the load
// (the default, see WithLaneRange).
func WithLanes(n int) Option { return func(o *Options) { o.Lanes = n } }

// WithLaneRange makes lanes follow the load between min and max per server
// (max 0: up to the pool size the server announces).
func WithLaneRange(min, max int) Option {
	return func(o *Options) { o.Lanes, o.MinLanes, o.MaxLanes = 0, min, max }
}

// WithLaneIdle sets how long a pool must have been underused before one of
// its lanes is retired.
func WithLaneIdle(d time.Duration) Option { return func(o *Options) { o.LaneIdle = d } }

// WithBatchCap sets the entry cap per frame.
func WithBatchCap(n int) Option { return func(o *Options) { o.BatchCap = n } }

// WithMaxFrameBytes sets the byte cap per frame.
func WithMaxFrameBytes(n int) Option { return func(o *Options) { o.MaxFrameBytes = n } }

// WithQueueLimits bounds each lane's queue by entries and bytes.
func WithQueueLimits(entries, bytes int) Option {
	return func(o *Options) { o.QueueEntries, o.QueueBytes = entries, bytes }
}

// WithOverflow picks the full-queue policy.
func WithOverflow(p Overflow) Option { return func(o *Options) { o.Overflow = p } }

// WithHeartbeat sets the heartbeat interval and timeout.
func WithHeartbeat(interval, timeout time.Duration) Option {
	return func(o *Options) { o.HeartbeatInterval, o.HeartbeatTimeout = interval, timeout }
}

// WithDialTimeout bounds connecting (TCP dial and TLS handshake).
func WithDialTimeout(d time.Duration) Option { return func(o *Options) { o.DialTimeout = d } }

// WithHandshakeTimeout bounds a lane's handshake with the batch plugin.
func WithHandshakeTimeout(d time.Duration) Option {
	return func(o *Options) { o.HandshakeTimeout = d }
}

// WithReconnect bounds the reconnect backoff.
func WithReconnect(min, max time.Duration) Option {
	return func(o *Options) { o.ReconnectMin, o.ReconnectMax = min, max }
}

// WithForgetDown sets how long an unused address may stay down before the
// client forgets it.
func WithForgetDown(d time.Duration) Option { return func(o *Options) { o.ForgetDown = d } }

// WithReprobePlain sets how often a plain server is asked again whether it
// has the batch plugin.
func WithReprobePlain(d time.Duration) Option { return func(o *Options) { o.ReprobePlain = d } }

// WithSerializeType sets the codec for arguments and replies.
func WithSerializeType(st protocol.SerializeType) Option {
	return func(o *Options) { o.SerializeType = st }
}

// WithTLS makes lanes and the fallback use TLS.
func WithTLS(cfg *tls.Config) Option { return func(o *Options) { o.TLSConfig = cfg } }

// WithAuth sets the token sent with frames and handshakes.
func WithAuth(token string) Option { return func(o *Options) { o.Auth = token } }

// WithRPCXOption sets the option of the plain-rpcx fallback.
func WithRPCXOption(opt client.Option) Option { return func(o *Options) { o.RPCX = opt } }

// WithMetrics sends the client metrics to r.
func WithMetrics(r metrics.Registry) Option { return func(o *Options) { o.Registry = r } }

func buildOptions(opts []Option) (Options, error) {
	o := Options{RPCX: client.DefaultOption, SerializeType: protocol.MsgPack}
	for _, opt := range opts {
		opt(&o)
	}
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	defd := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	def(&o.BatchCap, DefaultBatchCap)
	def(&o.MaxFrameBytes, DefaultMaxFrameBytes)
	def(&o.QueueEntries, DefaultQueueEntries)
	def(&o.QueueBytes, DefaultQueueBytes)
	defd(&o.HeartbeatInterval, DefaultHeartbeatInterval)
	defd(&o.HeartbeatTimeout, DefaultHeartbeatTimeout)
	defd(&o.DialTimeout, DefaultDialTimeout)
	defd(&o.HandshakeTimeout, DefaultHandshakeTimeout)
	defd(&o.ReconnectMin, DefaultReconnectMin)
	defd(&o.ReconnectMax, DefaultReconnectMax)
	defd(&o.ForgetDown, DefaultForgetDown)
	defd(&o.ReprobePlain, DefaultReprobePlain)
	def(&o.MinLanes, DefaultMinLanes)
	defd(&o.LaneIdle, DefaultLaneIdle)
	if o.MinLanes < 0 || o.MaxLanes < 0 || o.LaneIdle < 0 || (o.MaxLanes > 0 && o.MaxLanes < o.MinLanes) ||
		o.Lanes > MaxLanesCeiling || o.MinLanes > MaxLanesCeiling || o.MaxLanes > MaxLanesCeiling {
		return o, fmt.Errorf("%w: lanes: MinLanes must be at least 1 and at most MaxLanes (MaxLanes 0: the server's pool), LaneIdle positive, and no lane count above %d", ErrInvalidOption, MaxLanesCeiling)
	}
	if o.Lanes < 0 || o.BatchCap < 0 || o.MaxFrameBytes < 0 || o.QueueEntries < 0 || o.QueueBytes < 0 ||
		o.HeartbeatInterval < time.Millisecond || o.HeartbeatTimeout <= o.HeartbeatInterval ||
		o.ReconnectMin <= 0 || o.ReconnectMax < o.ReconnectMin || o.DialTimeout <= 0 || o.HandshakeTimeout <= 0 || o.ForgetDown <= 0 || o.ReprobePlain <= 0 {
		return o, fmt.Errorf("%w: sizes must not be negative, durations must be positive (HeartbeatInterval at least 1 ms), HeartbeatTimeout must exceed HeartbeatInterval, ReconnectMax must be at least ReconnectMin", ErrInvalidOption)
	}
	if o.Overflow != OverflowBlock && o.Overflow != OverflowFailFast {
		return o, fmt.Errorf("%w: unknown overflow policy %d", ErrInvalidOption, o.Overflow)
	}
	if protocol.Compressors[o.CompressType] == nil {
		return o, fmt.Errorf("%w: compress type %d has no compressor in protocol.Compressors (register it there first)", ErrInvalidOption, o.CompressType)
	}
	o.RPCX.SerializeType = o.SerializeType
	o.RPCX.CompressType = o.CompressType
	if o.TLSConfig != nil {
		o.RPCX.TLSConfig = o.TLSConfig
	}
	if o.Registry == nil {
		o.Registry = metrics.NewRegistry()
	}
	return o, checkIdleRelease(&o)
}
