package batchclient_test

import (
	"net"
	"sync"
	"testing"
	"time"

	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/share"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/codec"
)

// scriptedIncarnation is the incarnation a scripted server announces
// unless told otherwise.
const scriptedIncarnation = 7

// scriptedServer speaks the batch protocol on loopback from a script
// instead of running services, so that a test can send what a real server
// never would: reply frames of another incarnation, replies held back,
// replies to a call whose caller gave up, no credit at all. It announces
// one lane, answers heartbeats, and hands every batch frame's entries to
// onFrame with a function that writes a reply frame.
type scriptedServer struct {
	ln          net.Listener
	incarnation uint64
	window      int
	onFrame     func(entries []codec.Entry, reply func(inc uint64, rs ...codec.Reply))

	mu     sync.Mutex // serialises writes; guards conns and closed
	wg     sync.WaitGroup
	conns  []net.Conn
	closed bool
}

// startScripted starts a scripted server with incarnation 7 and a large
// window; it is stopped when the test ends.
func startScripted(t *testing.T, onFrame func(entries []codec.Entry, reply func(inc uint64, rs ...codec.Reply))) string {
	t.Helper()
	s := startScriptedAt(t, "127.0.0.1:0", scriptedIncarnation, 1<<20, onFrame)
	return s.ln.Addr().String()
}

// startScriptedAt starts a scripted server at addr with the given
// incarnation and window; stop (also run when the test ends) closes its
// listener and every connection, as a killed process's would be.
func startScriptedAt(t *testing.T, addr string, inc uint64, window int, onFrame func(entries []codec.Entry, reply func(inc uint64, rs ...codec.Reply))) *scriptedServer {
	t.Helper()
	var ln net.Listener
	var err error
	// The address of a server just stopped may take a moment to be free.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		ln, err = net.Listen("tcp", addr)
		if err == nil || time.Now().After(deadline) {
			break
		}
	}
	require.NoError(t, err)
	s := &scriptedServer{ln: ln, incarnation: inc, window: window, onFrame: onFrame}
	s.wg.Add(1)
	go s.accept()
	t.Cleanup(s.stop)
	return s
}

// stop closes the listener and every connection and waits for the
// server's goroutines.
func (s *scriptedServer) stop() {
	s.ln.Close()
	s.mu.Lock()
	s.closed = true
	for _, c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

func (s *scriptedServer) accept() {
	defer s.wg.Done()
	for {
		conn, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			conn.Close()
			return
		}
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
				Incarnation: s.incarnation, Window: s.window}
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
