package batchclient_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/server"
	"github.com/smallnest/rpcx/share"
	"github.com/smallnest/rpcx/util"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/batchserver"
)

// rpcx v1.9.4's gzip compressor (util.Zip) returns a slice of a buffer it
// has already put back in its pool, so two messages compressed at once may
// share it: a data race, which the race detector reports for plain rpcx
// with CompressType set and concurrent calls. The tests compare against
// plain rpcx, so they install, before any test runs, a compressor that
// writes the very bytes util.Zip writes (gzip's default level, Write,
// Flush, Close), without the pool. The batch path compresses with its own
// pooled writer (codec.CompressMessage) and does not call util.Zip.
func init() { protocol.Compressors[protocol.Gzip] = rpcxGzip{} }

type rpcxGzip struct{}

func (rpcxGzip) Zip(data []byte) ([]byte, error) {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	if _, err := w.Write(data); err != nil {
		return nil, err
	}
	if err := w.Flush(); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func (rpcxGzip) Unzip(data []byte) ([]byte, error) {
	r, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(r)
}

// The stand-in writes the bytes rpcx's own compressor writes.
func TestRPCXGzipStandIn(t *testing.T) {
	for _, p := range [][]byte{compressible(1, 100<<10), incompressible(4 << 10), nil} {
		want, err := util.Zip(p)
		require.NoError(t, err)
		want = bytes.Clone(want) // util.Zip's result aliases its pool
		got, err := rpcxGzip{}.Zip(p)
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
}

// Blob echoes byte payloads.
type Blob struct{}

// Echo returns its argument.
func (Blob) Echo(_ context.Context, a *[]byte, r *[]byte) error {
	*r = append((*r)[:0], *a...)
	return nil
}

// countingListener counts the bytes its connections read and write.
type countingListener struct {
	net.Listener
	read, written atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countedConn{Conn: c, l: l}, nil
}

// bytes is what crossed the wire both ways.
func (l *countingListener) bytes() int64 { return l.read.Load() + l.written.Load() }

type countedConn struct {
	net.Conn
	l *countingListener
}

func (c *countedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.l.read.Add(int64(n))
	return n, err
}

func (c *countedConn) Write(b []byte) (int, error) {
	// Counted before the write: the client may read the bytes, and the
	// test count them, before Write returns here.
	c.l.written.Add(int64(len(b)))
	return c.Conn.Write(b)
}

// serveCounted serves Blob (with the batch plugin unless plain) on a
// counting listener.
func serveCounted(t *testing.T, plain bool, opts ...server.OptionFn) (string, *countingListener) {
	t.Helper()
	s := server.NewServer(opts...)
	if !plain {
		_, err := batchserver.New(s)
		require.NoError(t, err)
	}
	require.NoError(t, s.RegisterName("Blob", new(Blob), ""))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	cl := &countingListener{Listener: ln}
	go s.ServeListener("tcp", cl)
	t.Cleanup(func() { s.Close() })
	return ln.Addr().String(), cl
}

// xclientFor returns rpcx's XClient (plain) or the drop-in for addr.
func xclientFor(t *testing.T, plain bool, addr string, opt client.Option) client.XClient {
	t.Helper()
	d, err := client.NewPeer2PeerDiscovery("tcp@"+addr, "")
	require.NoError(t, err)
	var xc client.XClient
	if plain {
		xc = client.NewXClient("Blob", client.Failtry, client.RoundRobin, d, opt)
	} else {
		// The tests count bytes: a lane given up as frozen while a
		// starved machine (the race detector, other tests) runs gzip
		// would have its calls retried (Failtry), and counted twice.
		xc = batchclient.NewXClient("Blob", client.Failtry, client.RoundRobin, d, opt,
			batchclient.WithHeartbeat(batchclient.DefaultHeartbeatInterval, 30*time.Second))
	}
	t.Cleanup(func() { xc.Close() })
	return xc
}

// compressible returns about n bytes of text that gzip shrinks well, a
// little different for each seed.
func compressible(seed, n int) []byte {
	var sb strings.Builder
	for i := 0; sb.Len() < n; i++ {
		fmt.Fprintf(&sb, "record %d of call %d: status=ok, region=eu-west, retries=0\n", i%100, seed)
	}
	return []byte(sb.String()[:n])
}

func incompressible(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

// echoBytes makes calls to Blob.Echo with the payloads, 10 at a time, over
// rpcx's XClient or the drop-in, with compress, and returns the bytes that
// crossed the wire.
func echoBytes(t *testing.T, plain bool, ct protocol.CompressType, payloads [][]byte) int64 {
	t.Helper()
	addr, cl := serveCounted(t, plain)
	opt := client.DefaultOption
	opt.CompressType = ct
	xc := xclientFor(t, plain, addr, opt)
	ctx := ctxT(t, 30*time.Second)
	before := cl.bytes() // the drop-in's handshakes
	sem := make(chan struct{}, 10)
	concurrently(t, len(payloads), func(i int) error {
		sem <- struct{}{}
		defer func() { <-sem }()
		var r []byte
		if err := xc.Call(ctx, "Echo", &payloads[i], &r); err != nil {
			return err
		}
		if string(r) != string(payloads[i]) {
			return fmt.Errorf("call %d: reply of %d bytes differs from its %d-byte argument", i, len(r), len(payloads[i]))
		}
		return nil
	})
	n := cl.bytes() - before
	t.Logf("plain=%v compress=%v: %d calls, %d bytes on the wire (%d before the first call)", plain, ct, len(payloads), n, before)
	return n
}

// With Option.CompressType = Gzip, the drop-in's lanes carry about the
// bytes plain rpcx does for compressible payloads (rpcx compresses every
// request above 1 KiB and the response to it): 50 calls with 100 KiB
// arguments echoed back.
func TestGzipBytesOnTheWireAsPlainRPCX(t *testing.T) {
	payloads := make([][]byte, 50)
	for i := range payloads {
		payloads[i] = compressible(i, 100<<10)
	}
	plain := echoBytes(t, true, protocol.Gzip, payloads)
	batch := echoBytes(t, false, protocol.Gzip, payloads)
	uncompressed := echoBytes(t, false, protocol.None, payloads)
	assert.Less(t, plain, int64(len(payloads)*100<<10)/4, "plain rpcx compressed: the payloads are compressible")
	assert.LessOrEqual(t, batch, 2*plain, "batch path with gzip: %d bytes, plain rpcx %d", batch, plain)
	assert.Greater(t, uncompressed, 10*batch, "without CompressType the lanes send the payloads as they are")
}

// Incompressible payloads cost the lanes what they cost plain rpcx, which
// compresses them anyway, and so do the lanes, entry by entry (the
// compress flag the server's hooks see is rpcx's): each request and reply
// is allowed 32 bytes of the lane's own framing (the entry's or reply's
// fields, and the frame's rpcx header and names, which a starved machine
// makes frames of one entry each pay alone).
func TestGzipIncompressibleNoBigger(t *testing.T) {
	payloads := make([][]byte, 20)
	for i := range payloads {
		payloads[i] = incompressible(32 << 10)
	}
	plain := echoBytes(t, true, protocol.Gzip, payloads)
	batch := echoBytes(t, false, protocol.Gzip, payloads)
	framing := int64(2 * 32 * len(payloads)) // 32 bytes for each request and reply
	assert.LessOrEqual(t, batch, plain+framing, "batch path with gzip: %d bytes, plain rpcx %d", batch, plain)
}

// Entries at or under rpcx's 1 KiB threshold go uncompressed, as rpcx
// sends such requests; compression is per entry, as rpcx's per request.
func TestGzipSmallEntriesAsPlainRPCX(t *testing.T) {
	addr, cl := serveCounted(t, false)
	c := newClient(t, batchclient.WithCompress(protocol.Gzip), batchclient.WithLanes(1))
	waitConnected(t, c, addr)
	ctx := ctxT(t, 30*time.Second)
	before := cl.read.Load()
	const n = 200
	calls := make([]*client.Call, n)
	for i := range calls {
		p := compressible(i, 500)
		calls[i] = c.Go(ctx, addr, "Blob", "Echo", &p, new([]byte), make(chan *client.Call, 1))
	}
	for i, call := range calls {
		<-call.Done
		require.NoError(t, call.Error, "call %d", i)
		assert.Equal(t, compressible(i, 500), *call.Reply.(*[]byte))
	}
	sent := cl.read.Load() - before
	t.Logf("%d calls of 500 bytes: %d bytes from the client", n, sent)
	assert.Greater(t, sent, int64(n*500), "entries under the threshold are not compressed")
}

// An unknown compress type is refused up front.
func TestCompressUnknownTypeRefused(t *testing.T) {
	_, err := batchclient.New(batchclient.WithCompress(protocol.CompressType(7)))
	require.ErrorIs(t, err, batchclient.ErrInvalidOption)
}

// compressFlags records the compress flag each hook sees for Blob calls.
type compressFlags struct {
	mu   sync.Mutex
	seen []string
}

func (f *compressFlags) add(hook string, m *protocol.Message) {
	if m == nil || m.ServicePath != "Blob" {
		return
	}
	f.mu.Lock()
	f.seen = append(f.seen, fmt.Sprintf("%s:%s:%d:%d", hook, m.ServiceMethod, m.CompressType(), len(m.Payload)))
	f.mu.Unlock()
}

func (f *compressFlags) take() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.seen
	f.seen = nil
	return s
}

// serverFlags is a server plugin on PostReadRequest and PreWriteResponse.
type serverFlags struct{ *compressFlags }

func (p serverFlags) PostReadRequest(_ context.Context, r *protocol.Message, _ error) error {
	p.add("PostReadRequest", r)
	return nil
}

func (p serverFlags) PreWriteResponse(_ context.Context, _, res *protocol.Message, _ error) error {
	p.add("PreWriteResponse", res)
	return nil
}

// clientFlags is a client plugin on ClientAfterDecode.
type clientFlags struct{ *compressFlags }

func (p clientFlags) ClientAfterDecode(m *protocol.Message) error {
	p.add("ClientAfterDecode", m)
	return nil
}

// TestCompressFlagPluginsSeeAsOnPlainRPCX: with Option.CompressType =
// Gzip, the server's PostReadRequest and PreWriteResponse plugins and the
// client's ClientAfterDecode see the compress flag rpcx shows (Gzip for a
// request above 1 KiB and the response above 1 KiB to it, None below),
// with the payload inflated, on lanes as on plain rpcx. Lanes showed None
// where rpcx shows Gzip.
func TestCompressFlagPluginsSeeAsOnPlainRPCX(t *testing.T) {
	run := func(plain bool) []string {
		flags := &compressFlags{}
		s := server.NewServer()
		if !plain {
			_, err := batchserver.New(s)
			require.NoError(t, err)
		}
		s.Plugins.Add(serverFlags{flags})
		require.NoError(t, s.RegisterName("Blob", new(Blob), ""))
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		go s.ServeListener("tcp", ln)
		t.Cleanup(func() { s.Close() })
		opt := client.DefaultOption
		opt.CompressType = protocol.Gzip
		xc := xclientFor(t, plain, ln.Addr().String(), opt)
		pc := client.NewPluginContainer()
		pc.Add(clientFlags{flags})
		xc.SetPlugins(pc)
		ctx := ctxT(t, 10*time.Second)
		for _, n := range []int{4 << 10, 100} {
			p := compressible(n, n)
			var r []byte
			require.NoError(t, xc.Call(ctx, "Echo", &p, &r))
			require.Equal(t, p, r)
		}
		return flags.take()
	}
	plain, batch := run(true), run(false)
	require.Contains(t, plain, fmt.Sprintf("PostReadRequest:Echo:%d:%d", protocol.Gzip, len(msgpackBytes(t, compressible(4<<10, 4<<10)))), "plain rpcx: %q", plain)
	assert.Equal(t, plain, batch)
}

// msgpackBytes is p as rpcx's msgpack codec encodes a *[]byte.
func msgpackBytes(t *testing.T, p []byte) []byte {
	t.Helper()
	b, err := share.Codecs[protocol.MsgPack].Encode(&p)
	require.NoError(t, err)
	return b
}

// flagListener counts the rpcx messages its connections read, and those
// flagged compressed in their header, by parsing the stream.
type flagListener struct {
	net.Listener
	messages, compressed atomic.Int64
}

func (l *flagListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &flagConn{Conn: c, l: l}, nil
}

type flagConn struct {
	net.Conn
	l    *flagListener
	head []byte // the current message's header, while incomplete
	skip int    // bytes of the current message's body still to come
}

func (c *flagConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	for p := b[:n]; len(p) > 0; {
		if c.skip > 0 {
			k := min(c.skip, len(p))
			c.skip, p = c.skip-k, p[k:]
			continue
		}
		k := min(16-len(c.head), len(p))
		c.head, p = append(c.head, p[:k]...), p[k:]
		if len(c.head) == 16 {
			var h protocol.Header
			copy(h[:], c.head)
			c.l.messages.Add(1)
			if h.CompressType() != protocol.None {
				c.l.compressed.Add(1)
			}
			c.skip = int(uint32(c.head[12])<<24 | uint32(c.head[13])<<16 | uint32(c.head[14])<<8 | uint32(c.head[15]))
			c.head = c.head[:0]
		}
	}
	return n, err
}

// TestCompressedCallsAreCompressedOneByOne: 64 concurrent calls with
// 16 KiB compressible arguments and Option.CompressType = Gzip reach the
// server as 64 requests flagged compressed on plain rpcx, and on lanes in
// batch frames none of which is flagged compressed (each entry is
// compressed alone, and the plugin inflates it): rpcx's next release caps
// what one message inflates to (server.WithMaxDecompressedLength), which
// would then apply to each call on either path and never to a frame of
// many calls. On the old code every frame went compressed whole.
func TestCompressedCallsAreCompressedOneByOne(t *testing.T) {
	run := func(plain bool) (messages, compressed int64) {
		s := server.NewServer()
		if !plain {
			_, err := batchserver.New(s)
			require.NoError(t, err)
		}
		require.NoError(t, s.RegisterName("Blob", new(Blob), ""))
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		fl := &flagListener{Listener: ln}
		go s.ServeListener("tcp", fl)
		t.Cleanup(func() { s.Close() })
		opt := client.DefaultOption
		opt.CompressType = protocol.Gzip
		xc := xclientFor(t, plain, ln.Addr().String(), opt)
		ctx := ctxT(t, 30*time.Second)
		var r []byte
		require.NoError(t, xc.Call(ctx, "Echo", &[]byte{1}, &r)) // connected
		m0, c0 := fl.messages.Load(), fl.compressed.Load()
		concurrently(t, 64, func(i int) error {
			p := compressible(i, 16<<10)
			var r []byte
			if err := xc.Call(ctx, "Echo", &p, &r); err != nil {
				return err
			}
			if !bytes.Equal(r, p) {
				return fmt.Errorf("call %d: reply differs", i)
			}
			return nil
		})
		return fl.messages.Load() - m0, fl.compressed.Load() - c0
	}
	pm, pc := run(true)
	bm, bc := run(false)
	t.Logf("plain rpcx: %d messages, %d compressed; lanes: %d messages, %d compressed", pm, pc, bm, bc)
	require.Equal(t, int64(64), pc, "plain rpcx compresses each request above 1 KiB")
	assert.Zero(t, bc, "lanes flag no frame compressed")
}
