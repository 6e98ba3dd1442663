package batchserver_test

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"

	metrics "github.com/rcrowley/go-metrics"
	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/log"
	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/server"
	"github.com/smallnest/rpcx/share"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/codec"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/childproc"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testenv"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// The shared test helpers.
var (
	newClient     = testenv.NewClient
	waitConnected = testenv.WaitConnected
	ctxT          = testenv.Ctx
	concurrently  = testenv.Concurrently
)

func TestMain(m *testing.M) {
	// The malformed-frame tests make rpcx and the plugin log warnings on
	// purpose; keep the test output readable, and the lines for the tests
	// that check them.
	log.SetLogger(rpcxLog)
	// rpcx's process-wide cap on a message, set as a user sets it, before
	// any server serves (batchserver.New leaves it alone): without it rpcx
	// allocates what a message declares (TestHugeDeclaredMessageLength).
	protocol.MaxMessageLength = batchserver.DefaultMaxFrameBytes + 64<<10
	childproc.RunIfChild() // a server in a child process (depth_test.go)
	os.Exit(m.Run())
}

// newServer returns an rpcx server with Arith registered before the batch
// plugin is added and Echo after it.
func newServer(t testing.TB, opts ...batchserver.Option) (*server.Server, *batchserver.Plugin) {
	t.Helper()
	s := server.NewServer()
	require.NoError(t, s.RegisterName("Arith", new(testsvc.Arith), ""))
	p, err := batchserver.New(s, opts...)
	require.NoError(t, err)
	require.NoError(t, s.RegisterName("Echo", new(testsvc.Echo), ""))
	return s, p
}

// serve starts s on loopback and closes it when the test ends, once its
// connections are gone (testsvc.StopWhenIdle: TestBusyPingSkipsAStuckLane
// failed once on a data race inside rpcx's Close).
func serve(t testing.TB, s *server.Server) string {
	t.Helper()
	addr, stop, err := testsvc.Serve(s)
	require.NoError(t, err)
	t.Cleanup(testsvc.StopWhenIdle(s, stop))
	return addr
}

// startServer is newServer plus serve.
func startServer(t testing.TB, opts ...batchserver.Option) (string, *server.Server, *batchserver.Plugin) {
	t.Helper()
	s, p := newServer(t, opts...)
	return serve(t, s), s, p
}

// plainClient is rpcx's own client connected to addr.
func plainClient(t testing.TB, addr string) *client.Client {
	t.Helper()
	pc := client.NewClient(client.DefaultOption)
	require.NoError(t, pc.Connect("tcp", addr))
	t.Cleanup(func() { pc.Close() })
	return pc
}

// withToken returns ctx carrying rpcx request metadata with an auth token.
func withToken(ctx context.Context, token string) context.Context {
	return context.WithValue(ctx, share.ReqMetaDataKey, map[string]string{share.AuthKey: token})
}

// counter reads a counter of the plugin's registry. A counter that does
// not exist fails the test: after a rename, a check that it is zero must
// not pass by reading nothing.
func counter(t testing.TB, r metrics.Registry, name string) int64 {
	t.Helper()
	c, ok := r.Get(name).(metrics.Counter)
	if !ok {
		t.Fatalf("no counter %q in the registry", name)
	}
	return c.Count()
}

// eventually polls cond every few milliseconds until it holds or d passes.
func eventually(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// ---- raw connections ----

func rawDial(t testing.TB, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 3*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

func reqHeader(oneway bool) *protocol.Header {
	var h protocol.Header
	h[0] = protocol.MagicNumber()
	h.SetMessageType(protocol.Request)
	h.SetOneway(oneway)
	h.SetSerializeType(protocol.SerializeNone)
	return &h
}

// batchMessage wraps a batch frame payload in an rpcx message to the batch
// service, as a lane writes it.
func batchMessage(payload []byte) []byte {
	return codec.AppendMessage(nil, reqHeader(true), codec.ServicePath, codec.MethodBatch, nil, payload)
}

// frame encodes a batch frame with the given sequence number and entries.
func frame(seq uint64, entries ...codec.Entry) []byte {
	b := codec.AppendBatchHeader(nil, seq, len(entries))
	for i := range entries {
		b = codec.AppendEntry(b, &entries[i])
	}
	return b
}

func rawWrite(t testing.TB, c net.Conn, b []byte) {
	t.Helper()
	require.NoError(t, c.SetWriteDeadline(time.Now().Add(3*time.Second)))
	_, err := c.Write(b)
	require.NoError(t, err)
}

// rawHandshake performs the batch handshake on a raw connection.
func rawHandshake(t testing.TB, c net.Conn) codec.Handshake {
	t.Helper()
	rawWrite(t, c, codec.AppendMessage(nil, reqHeader(false), codec.ServicePath, codec.MethodHandshake, nil, nil))
	require.NoError(t, c.SetReadDeadline(time.Now().Add(3*time.Second)))
	for i := 0; i < 16; i++ {
		msg, _, err := codec.ReadMessage(c, 1<<20, nil)
		require.NoError(t, err)
		if msg.Header.MessageType() != protocol.Response || msg.Header.IsHeartbeat() {
			continue
		}
		require.NotEqual(t, protocol.Error, msg.Header.MessageStatusType(), msg.Metadata[protocol.ServiceError])
		hs, err := codec.DecodeHandshake(msg.Payload)
		require.NoError(t, err)
		return hs
	}
	t.Fatal("no handshake response")
	return codec.Handshake{}
}

// rawReadReplies reads reply frames from c until want replies arrived or
// the time is up; it returns the replies by id and the incarnations seen.
func rawReadReplies(t testing.TB, c net.Conn, want int, d time.Duration) (map[uint64]codec.Reply, []uint64) {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(d)))
	got := make(map[uint64]codec.Reply)
	var incs []uint64
	for i := 0; i < 1000 && len(got) < want; i++ {
		msg, _, err := codec.ReadMessage(c, 1<<24, nil)
		require.NoError(t, err, "after %d of %d replies", len(got), want)
		if msg.Header.MessageType() != protocol.Request || msg.ServicePath != codec.ServicePath || msg.ServiceMethod != codec.MethodReply {
			continue
		}
		inc, replies, err := codec.DecodeReplies(msg.Payload, 0, nil)
		require.NoError(t, err)
		incs = append(incs, inc)
		for _, rp := range replies {
			rp.Payload = append([]byte(nil), rp.Payload...)
			got[rp.ID] = rp
		}
	}
	return got, incs
}

// requireClosedByPeer asserts that the server closes c within d: a read
// returns EOF or a reset rather than timing out.
func requireClosedByPeer(t testing.TB, c net.Conn, d time.Duration) {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(d)))
	buf := make([]byte, 4096)
	for i := 0; i < 1<<16; i++ {
		_, err := c.Read(buf)
		if err == nil {
			continue // whatever the server wrote before closing
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("server did not close the connection within %v", d)
		}
		if !errors.Is(err, io.EOF) {
			t.Logf("connection ended with %v", err)
		}
		return
	}
	t.Fatal("server kept writing and never closed the connection")
}

// Counter is a service that counts how often Inc ran.
type Counter struct{ n atomic.Int64 }

// Inc counts one execution and replies with the count.
func (c *Counter) Inc(_ context.Context, _ *testsvc.Args, r *testsvc.Reply) error {
	r.C = int(c.n.Add(1))
	return nil
}

// Add is a plain function registered with RegisterFunction.
func Add(_ context.Context, a *testsvc.Args, r *testsvc.Reply) error {
	r.C = a.A + a.B
	return nil
}

// mustMsgpack encodes v as rpcx's msgpack codec does.
func mustMsgpack(v any) []byte {
	b, err := share.Codecs[protocol.MsgPack].Encode(v)
	if err != nil {
		panic(err)
	}
	return b
}
