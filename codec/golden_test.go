package codec_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/share"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/codec"
)

// updateGolden rewrites the golden files from today's encoders. Run it
// only for a change the compatibility rule allows (docs/wire.md),
// and never to make a failing TestWireGolden pass.
var updateGolden = flag.Bool("update-golden", false, "rewrite testdata/wire from today's encoders")

// The values the golden messages carry: each field a value of its own, so
// that a decoder that reads one field for another is caught.
const (
	goldenIncarnation = 0x1122334455667788
	goldenFrameSeq    = 7
)

// goldenHandshake is the handshake the golden response carries.
var goldenHandshake = codec.Handshake{
	Version:       1,
	PoolSize:      4,
	BatchCap:      1000,
	MaxFrameBytes: 4 << 20,
	Incarnation:   goldenIncarnation,
	Window:        16384,
}

// goldenEntries are the entries of the golden batch frame: a call with a
// deadline and request metadata, a cast without either, a send whose
// deadline had passed.
var goldenEntries = []codec.Entry{
	{Kind: codec.KindCall, ID: 1, ServicePath: "Arith", ServiceMethod: "Mul",
		Metadata: map[string]string{"trace": "t-1"}, SerializeType: uint8(protocol.MsgPack),
		Payload: []byte{0x82, 0xa1, 'A', 0x02, 0xa1, 'B', 0x03}, TimeoutMicros: 1500000},
	{Kind: codec.KindCast, ServicePath: "Arith", ServiceMethod: "Mul",
		SerializeType: uint8(protocol.JSON),
		Payload:       []byte(`{"A":4,"B":5}`)},
	{Kind: codec.KindSend, ServicePath: "slow",
		SerializeType: uint8(protocol.MsgPack),
		Payload:       []byte("hello"), TimeoutMicros: -1},
}

// goldenReplies are the replies of the golden reply frame: a result, and
// an error with the reply its handler filled in and response metadata.
var goldenReplies = []codec.Reply{
	{ID: 1, Status: codec.StatusOK, Payload: []byte{0x81, 0xa1, 'C', 0x06}},
	{ID: 2, Status: codec.StatusError, Error: "partial failure",
		Metadata: map[string]string{"k": "v"}, Payload: []byte{0x81, 0xa1, 'C', 0x2a}},
}

// goldenMessage is one recorded message: how today's code writes it, and
// what a reader must find in it.
type goldenMessage struct {
	file  string
	write func() []byte
	// header checks the rpcx header the message must carry.
	header func(t *testing.T, h protocol.Header)
	path   string
	method string
	meta   map[string]string
	// payload checks that the payload decodes to the recorded values.
	payload func(t *testing.T, p []byte)
}

func goldenMessages() []goldenMessage {
	oneway := func(seq uint64) func(t *testing.T, h protocol.Header) {
		return func(t *testing.T, h protocol.Header) {
			require.Equal(t, protocol.Request, h.MessageType())
			require.True(t, h.IsOneway())
			require.False(t, h.IsHeartbeat())
			require.Equal(t, protocol.SerializeNone, h.SerializeType())
			require.Equal(t, protocol.None, h.CompressType())
			require.Equal(t, seq, h.Seq())
		}
	}
	frame := func(method string, meta map[string]string, seq uint64, payload func(b []byte) []byte) func() []byte {
		return func() []byte {
			h := codec.OnewayHeader(seq)
			b, mark := codec.StartMessage(nil, &h, codec.ServicePath, method, meta)
			b = payload(b)
			codec.FinishMessage(b, mark)
			return b
		}
	}
	return []goldenMessage{
		{
			// What a lane writes first (batchclient/internal/dial).
			file: "handshake-request.bin",
			write: func() []byte {
				h := codec.HandshakeHeader()
				meta := map[string]string{codec.MetaMaxFrame: "4194304", codec.MetaByteCredits: "1", codec.MetaCompress: "1", share.AuthKey: "token"}
				return codec.AppendMessage(nil, &h, codec.ServicePath, codec.MethodHandshake, meta, nil)
			},
			header: func(t *testing.T, h protocol.Header) {
				require.Equal(t, protocol.Request, h.MessageType())
				require.False(t, h.IsOneway())
				require.False(t, h.IsHeartbeat())
				require.Equal(t, protocol.SerializeNone, h.SerializeType())
			},
			path: codec.ServicePath, method: codec.MethodHandshake,
			meta:    map[string]string{codec.MetaMaxFrame: "4194304", codec.MetaByteCredits: "1", codec.MetaCompress: "1", share.AuthKey: "token"},
			payload: func(t *testing.T, p []byte) { require.Empty(t, p) },
		},
		{
			// What the server answers, as rpcx's server writes its
			// response (the handshake in the payload, the later
			// parameters in the metadata; rpcx also echoes the
			// request's metadata, left out here).
			file: "handshake-response.bin",
			write: func() []byte {
				h := codec.HandshakeHeader()
				h.SetMessageType(protocol.Response)
				meta := map[string]string{codec.MetaWindowBytes: "67108864", codec.MetaReadTimeout: "30s"}
				return codec.AppendMessage(nil, &h, codec.ServicePath, codec.MethodHandshake, meta, codec.AppendHandshake(nil, &goldenHandshake))
			},
			header: func(t *testing.T, h protocol.Header) {
				require.Equal(t, protocol.Response, h.MessageType())
				require.Equal(t, protocol.Normal, h.MessageStatusType())
			},
			path: codec.ServicePath, method: codec.MethodHandshake,
			meta: map[string]string{codec.MetaWindowBytes: "67108864", codec.MetaReadTimeout: "30s"},
			payload: func(t *testing.T, p []byte) {
				hs, err := codec.DecodeHandshake(p)
				require.NoError(t, err)
				require.Equal(t, goldenHandshake, hs)
			},
		},
		{
			file: "batch.bin",
			write: frame(codec.MethodBatch, map[string]string{share.AuthKey: "token"}, goldenFrameSeq, func(b []byte) []byte {
				b = codec.AppendBatchHeader(b, goldenFrameSeq, len(goldenEntries))
				for i := range goldenEntries {
					b = codec.AppendEntry(b, &goldenEntries[i])
				}
				return b
			}),
			header: oneway(goldenFrameSeq),
			path:   codec.ServicePath, method: codec.MethodBatch,
			meta: map[string]string{share.AuthKey: "token"},
			payload: func(t *testing.T, p []byte) {
				seq, entries, err := codec.DecodeBatch(p, 0)
				require.NoError(t, err)
				require.Equal(t, uint64(goldenFrameSeq), seq)
				require.Equal(t, goldenEntries, entries)
			},
		},
		{
			file: "reply.bin",
			write: frame(codec.MethodReply, nil, 0, func(b []byte) []byte {
				b = codec.AppendReplyHeader(b, goldenIncarnation, len(goldenReplies))
				for i := range goldenReplies {
					b = codec.AppendReply(b, &goldenReplies[i])
				}
				return b
			}),
			header: oneway(0),
			path:   codec.ServicePath, method: codec.MethodReply,
			meta: nil,
			payload: func(t *testing.T, p []byte) {
				inc, replies, err := codec.DecodeReplies(p, 0, nil)
				require.NoError(t, err)
				require.Equal(t, uint64(goldenIncarnation), inc)
				require.Equal(t, goldenReplies, replies)
			},
		},
		{
			// The three-field credit, for a lane that did not announce
			// byte credits.
			file: "credit.bin",
			write: frame(codec.MethodCredit, nil, 0, func(b []byte) []byte {
				return codec.AppendCredit(b, goldenIncarnation, 5)
			}),
			header: oneway(0),
			path:   codec.ServicePath, method: codec.MethodCredit,
			meta: nil,
			payload: func(t *testing.T, p []byte) {
				inc, n, err := codec.DecodeCredit(p)
				require.NoError(t, err)
				require.Equal(t, [2]uint64{goldenIncarnation, 5}, [2]uint64{inc, n})
				inc, n, freed, err := codec.DecodeCreditBytes(p)
				require.NoError(t, err)
				require.Equal(t, [3]uint64{goldenIncarnation, 5, 0}, [3]uint64{inc, n, freed})
			},
		},
		{
			// The four-field credit, for a lane that announced them.
			file: "credit-bytes.bin",
			write: frame(codec.MethodCredit, nil, 0, func(b []byte) []byte {
				return codec.AppendCreditBytes(b, goldenIncarnation, 5, 70000)
			}),
			header: oneway(0),
			path:   codec.ServicePath, method: codec.MethodCredit,
			meta: nil,
			payload: func(t *testing.T, p []byte) {
				inc, n, freed, err := codec.DecodeCreditBytes(p)
				require.NoError(t, err)
				require.Equal(t, [3]uint64{goldenIncarnation, 5, 70000}, [3]uint64{inc, n, freed})
			},
		},
		{
			file: "drain.bin",
			write: frame(codec.MethodDrain, nil, 0, func(b []byte) []byte {
				return codec.AppendDrain(b, goldenIncarnation)
			}),
			header: oneway(0),
			path:   codec.ServicePath, method: codec.MethodDrain,
			meta: nil,
			payload: func(t *testing.T, p []byte) {
				inc, err := codec.DecodeDrain(p)
				require.NoError(t, err)
				require.Equal(t, uint64(goldenIncarnation), inc)
			},
		},
		{
			file: "unrun.bin",
			write: frame(codec.MethodUnrun, nil, 0, func(b []byte) []byte {
				return codec.AppendUnrun(b, goldenIncarnation, []uint64{7, 300, 70000})
			}),
			header: oneway(0),
			path:   codec.ServicePath, method: codec.MethodUnrun,
			meta: nil,
			payload: func(t *testing.T, p []byte) {
				inc, ids, err := codec.DecodeUnrun(p)
				require.NoError(t, err)
				require.Equal(t, uint64(goldenIncarnation), inc)
				require.Equal(t, []uint64{7, 300, 70000}, ids)
			},
		},
		{
			// A lane's heartbeat, which rpcx's server answers.
			file: "heartbeat-lane.bin",
			write: func() []byte {
				h := codec.HeartbeatHeader()
				return codec.AppendMessage(nil, &h, "", "", nil, nil)
			},
			header: func(t *testing.T, h protocol.Header) {
				require.Equal(t, protocol.Request, h.MessageType())
				require.True(t, h.IsHeartbeat())
				require.False(t, h.IsOneway())
				require.Equal(t, uint64(0), h.Seq())
			},
			meta:    nil,
			payload: func(t *testing.T, p []byte) { require.Empty(t, p) },
		},
		{
			// The server's heartbeat to a lane (batchserver/busyping.go).
			file: "heartbeat-server.bin",
			write: func() []byte {
				h := codec.OnewayHeader(0)
				h.SetHeartbeat(true)
				return codec.AppendMessage(nil, &h, "", "", nil, nil)
			},
			header: func(t *testing.T, h protocol.Header) {
				require.Equal(t, protocol.Request, h.MessageType())
				require.True(t, h.IsHeartbeat())
				require.True(t, h.IsOneway())
			},
			meta:    nil,
			payload: func(t *testing.T, p []byte) { require.Empty(t, p) },
		},
	}
}

// TestWireGolden: the messages this version writes are recorded under
// testdata/wire. Each recorded message still reads as recorded (rpcx's
// header, path, method, metadata, and the payload's every field), and
// today's encoder writes it byte for byte (metadata, which Go's maps put
// in any order, compared as a set of pairs). Clients and servers of
// different releases meet during every rolling upgrade: a failure here
// is a break of the wire format (docs/wire.md says what a change
// must keep).
func TestWireGolden(t *testing.T) {
	for _, g := range goldenMessages() {
		t.Run(g.file, func(t *testing.T) {
			path := filepath.Join("testdata", "wire", g.file)
			written := g.write()
			if *updateGolden {
				require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
				require.NoError(t, os.WriteFile(path, written, 0o644))
			}
			recorded, err := os.ReadFile(path)
			require.NoError(t, err, "run go test ./codec -run TestWireGolden -update-golden once to record it")

			msg, _, err := codec.ReadMessage(bytes.NewReader(recorded), 1<<20, nil)
			require.NoError(t, err)
			g.header(t, msg.Header)
			require.Equal(t, g.path, msg.ServicePath)
			require.Equal(t, g.method, msg.ServiceMethod)
			require.Equal(t, g.meta, msg.Metadata)
			g.payload(t, msg.Payload)

			// rpcx's own reader takes it as any message.
			rm := protocol.NewMessage()
			require.NoError(t, rm.Decode(bytes.NewReader(recorded)))
			require.Equal(t, g.path, rm.ServicePath)
			require.Equal(t, g.method, rm.ServiceMethod)

			if len(g.meta) <= 1 {
				require.Equal(t, recorded, written, "today's encoder writes %s differently", g.file)
				return
			}
			got, _, err := codec.ReadMessage(bytes.NewReader(written), 1<<20, nil)
			require.NoError(t, err)
			require.Equal(t, len(recorded), len(written))
			require.Equal(t, msg.Header, got.Header)
			require.Equal(t, msg.ServicePath, got.ServicePath)
			require.Equal(t, msg.ServiceMethod, got.ServiceMethod)
			require.Equal(t, msg.Metadata, got.Metadata)
			require.Equal(t, msg.Payload, got.Payload)
		})
	}
}
