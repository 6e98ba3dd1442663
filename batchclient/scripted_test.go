package batchclient_test

import (
	"net"
	"sync"
	"testing"

	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/share"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/codec"
)

// scriptedIncarnation is the incarnation a scripted server announces.
const scriptedIncarnation = 7

// scriptedServer speaks the batch protocol on loopback from a script
// instead of running services, so that a test can send what a real server
// never would: reply frames of another incarnation, replies held back,
// replies to a call whose caller gave up. It announces one lane and
// incarnation 7, answers heartbeats, and hands every batch frame's
// entries to onFrame with a function that writes a reply frame. It is
// stopped when the test ends.
type scriptedServer struct {
	ln      net.Listener
	onFrame func(entries []codec.Entry, reply func(inc uint64, rs ...codec.Reply))

	mu    sync.Mutex // serialises writes to the connection
	wg    sync.WaitGroup
	conns []net.Conn
}

func startScripted(t *testing.T, onFrame func(entries []codec.Entry, reply func(inc uint64, rs ...codec.Reply))) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := &scriptedServer{ln: ln, onFrame: onFrame}
	s.wg.Add(1)
	go s.accept()
	t.Cleanup(func() {
		ln.Close()
		s.mu.Lock()
		for _, c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
	return ln.Addr().String()
}

func (s *scriptedServer) accept() {
	defer s.wg.Done()
	for {
		conn, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.conns = append(s.conns, conn)
		s.mu.Unlock()
		s.wg.Add(1)
		go s.serve(conn)
	}
}

func (s *scriptedServer) write(conn net.Conn, b []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	conn.Write(b) // a failed write ends the connection's reader too
}

func (s *scriptedServer) serve(conn net.Conn) {
	defer s.wg.Done()
	defer conn.Close()
	reply := func(inc uint64, rs ...codec.Reply) {
		b := codec.AppendReplyHeader(nil, inc, len(rs))
		for i := range rs {
			b = codec.AppendReply(b, &rs[i])
		}
		var h protocol.Header
		h[0] = protocol.MagicNumber()
		h.SetMessageType(protocol.Request)
		h.SetOneway(true)
		h.SetSerializeType(protocol.SerializeNone)
		s.write(conn, codec.AppendMessage(nil, &h, codec.ServicePath, codec.MethodReply, nil, b))
	}
	for {
		msg, _, err := codec.ReadMessage(conn, 64<<20, nil)
		if err != nil {
			return
		}
		h := msg.Header
		switch {
		case h.IsHeartbeat():
			h.SetMessageType(protocol.Response)
			s.write(conn, codec.AppendMessage(nil, &h, "", "", nil, nil))
		case msg.ServiceMethod == codec.MethodHandshake:
			h.SetMessageType(protocol.Response)
			hs := codec.Handshake{Version: codec.Version, PoolSize: 1, BatchCap: 1000, MaxFrameBytes: 16 << 20,
				Incarnation: scriptedIncarnation, Window: 1 << 20}
			s.write(conn, codec.AppendMessage(nil, &h, msg.ServicePath, msg.ServiceMethod, nil, codec.AppendHandshake(nil, &hs)))
		case msg.ServiceMethod == codec.MethodBatch:
			_, entries, err := codec.DecodeBatch(msg.Payload, 0)
			if err != nil {
				return
			}
			for i := range entries {
				entries[i].Payload = append([]byte(nil), entries[i].Payload...)
			}
			s.onFrame(entries, reply)
		}
	}
}

// msgpackDecode decodes b as rpcx's msgpack codec does.
func msgpackDecode(b []byte, v any) error {
	return share.Codecs[protocol.MsgPack].Decode(b, v)
}

// msgpackOf encodes v as rpcx's msgpack codec does (v is a test value
// the codec always encodes).
func msgpackOf(v any) []byte {
	b, err := share.Codecs[protocol.MsgPack].Encode(v)
	if err != nil {
		panic(err)
	}
	return b
}
