package batchserver_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metrics "github.com/rcrowley/go-metrics"
	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/server"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/codec"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// The attacks of a client that speaks the wire by hand (issue 42), each
// against the batch server and, where plain rpcx has an equivalent,
// against a plain rpcx server beside it. What the docs promise about the
// server's memory, parked goroutines, buffers and connections must hold on
// the server's own clock, whatever the client sends or leaves unsent.

// gauge reads a gauge of the plugin's registry; a gauge that does not
// exist fails the test.
func gauge(t testing.TB, r metrics.Registry, name string) int64 {
	t.Helper()
	g, ok := r.Get(name).(metrics.Gauge)
	if !ok {
		t.Fatalf("no gauge %q in the registry", name)
	}
	return g.Value()
}

func connStates(t testing.TB, p *batchserver.Plugin) int64 {
	return gauge(t, p.Metrics(), "rpcxbatch.server.connections")
}

func parkedWorkers(t testing.TB, p *batchserver.Plugin) int64 {
	return gauge(t, p.Metrics(), "rpcxbatch.server.workers.parked")
}

// silentLane is a raw connection that made the lane handshake and then
// sends only what the test writes: no heartbeat ever.
func silentLane(t testing.TB, addr string) net.Conn {
	t.Helper()
	c := rawDial(t, addr)
	rawHandshake(t, c)
	return c
}

// sleepCalls returns n calls of Arith.Sleep(ms), ids from first on.
func sleepCalls(n, ms int, first uint64) []codec.Entry {
	args := mustMsgpack(&testsvc.Args{A: ms, B: 1})
	es := make([]codec.Entry, n)
	for i := range es {
		es[i] = codec.Entry{Kind: codec.KindCall, ID: first + uint64(i), ServicePath: "Arith", ServiceMethod: "Sleep",
			SerializeType: uint8(protocol.MsgPack), Payload: args}
	}
	return es
}

// burst makes the server run n calls at once that each block for ms, on a
// silent lane, and reads their replies: the server's workers then hold
// about n goroutines parked.
func burst(t testing.TB, c net.Conn, seq uint64, n, ms int) {
	t.Helper()
	rawWrite(t, c, batchMessage(frame(seq, sleepCalls(n, ms, 1)...)))
	got, _ := rawReadReplies(t, c, n, 20*time.Second)
	require.Len(t, got, n)
	for _, rp := range got {
		require.Equal(t, codec.StatusOK, rp.Status, rp.Error)
	}
}

// handshakeAndClose opens n connections that each write a lane handshake
// and close at once, as a client that crashes right after connecting.
func handshakeAndClose(t testing.TB, addr string, n int) {
	t.Helper()
	hs := codec.AppendMessage(nil, reqHeader(false), codec.ServicePath, codec.MethodHandshake, nil, nil)
	for i := 0; i < n; i++ {
		c, err := net.DialTimeout("tcp", addr, 3*time.Second)
		require.NoError(t, err)
		_, err = c.Write(hs)
		require.NoError(t, err)
		c.Close()
	}
}

// TestHandshakeThenCloseLeavesNoState (issue 42, item 1): connections that
// write a lane handshake and close at once leave no batch state behind,
// as they leave no connection behind on a plain rpcx server. rpcx runs
// the handshake's handler on a goroutine of its own while its read loop
// reads EOF and runs PostConnClose, often first.
func TestHandshakeThenCloseLeavesNoState(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []server.OptionFn
	}{
		{"own workers", nil},
		{"server.WithPool", []server.OptionFn{server.WithPool(8, 1000)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const n = 400
			plain := server.NewServer(tc.opts...)
			require.NoError(t, plain.RegisterName("Arith", new(testsvc.Arith), ""))
			plainAddr := serve(t, plain)

			s := server.NewServer(tc.opts...)
			require.NoError(t, s.RegisterName("Arith", new(testsvc.Arith), ""))
			p, err := batchserver.New(s)
			require.NoError(t, err)
			addr := serve(t, s)

			handshakeAndClose(t, plainAddr, n)
			handshakeAndClose(t, addr, n)
			require.True(t, eventually(10*time.Second, func() bool {
				return len(plain.ActiveClientConn()) == 0 && len(s.ActiveClientConn()) == 0
			}), "rpcx still holds connections: plain %d, batch %d", len(plain.ActiveClientConn()), len(s.ActiveClientConn()))
			require.True(t, eventually(5*time.Second, func() bool { return connStates(t, p) == 0 }),
				"the plugin still holds the state of %d of %d closed connections", connStates(t, p), n)

			// The server still serves a lane.
			c := silentLane(t, addr)
			burst(t, c, 1, 1, 1)
		})
	}
}

// TestLastCloseReleasesParkedWorkersAfterCrashedClients (issue 42, item
// 2): once the last connection is gone the parked goroutines are released
// at once, also when clients crashed right after their handshake.
func TestLastCloseReleasesParkedWorkersAfterCrashedClients(t *testing.T) {
	addr, _, p := startServer(t)
	c := silentLane(t, addr)
	burst(t, c, 1, 300, 50)
	require.Greater(t, parkedWorkers(t, p), int64(100), "goroutines parked after the burst")
	handshakeAndClose(t, addr, 200)
	c.Close()
	// Released when the last connection closes, not by the trims that
	// halve the parked goroutines each second.
	start := time.Now()
	require.True(t, eventually(3*time.Second, func() bool { return connStates(t, p) == 0 && parkedWorkers(t, p) == 0 }),
		"%d goroutines parked, %d connection states, after every connection closed", parkedWorkers(t, p), connStates(t, p))
	t.Logf("released %v after the last close", time.Since(start).Round(time.Millisecond))
}

// TestSilentLaneLetsParkedWorkersGo (issue 42, item 3): a lane that bursts
// and then stays connected and silent (no frame, no heartbeat) does not
// keep the burst's goroutines: they end over the next seconds, halving
// every second, on the server's own clock.
func TestSilentLaneLetsParkedWorkersGo(t *testing.T) {
	addr, _, p := startServer(t)
	c := silentLane(t, addr)
	burst(t, c, 1, 1000, 100)
	parked := parkedWorkers(t, p)
	require.Greater(t, parked, int64(400), "goroutines parked after the burst")
	require.True(t, eventually(9*time.Second, func() bool { return parkedWorkers(t, p) <= parked/8 }),
		"%d of %d goroutines still parked while the lane is silent", parkedWorkers(t, p), parked)
	// The lane still works.
	burst(t, c, 2, 1, 1)
}

// TestSilentLaneLetsReplyBuffersGo (issue 42, item 5): a lane that had a
// burst of large replies and then stays silent lets the server drop its
// reply buffers, as the lane's heartbeat would.
func TestSilentLaneLetsReplyBuffersGo(t *testing.T) {
	addr, _, p := startServer(t)
	c := silentLane(t, addr)
	payload := mustMsgpack(make([]byte, 3500))
	const n = 2000
	es := make([]codec.Entry, n)
	for i := range es {
		es[i] = codec.Entry{Kind: codec.KindCall, ID: uint64(i + 1), ServicePath: "Echo", ServiceMethod: "Bytes",
			SerializeType: uint8(protocol.MsgPack), Payload: payload}
	}
	rawWrite(t, c, batchMessage(frame(1, es[:n/2]...)))
	rawWrite(t, c, batchMessage(frame(2, es[n/2:]...)))
	got, _ := rawReadReplies(t, c, n, 20*time.Second)
	require.Len(t, got, n)
	kept := batchserver.KeptReplyBytes(p)
	require.Greater(t, kept, 64<<10, "reply buffers kept right after the burst")
	require.True(t, eventually(5*time.Second, func() bool { return batchserver.KeptReplyBytes(p) == 0 }),
		"%d of %d bytes of reply buffers still kept while the lane is silent", batchserver.KeptReplyBytes(p), kept)
}

// TestHeartbeatsDoNotDriveTheTrimClock (issue 42, item 6): heartbeats,
// however many a client sends, do not trim the parked goroutines faster
// than the documented halving each second: one lane must not be able to
// empty the pool the busy lanes use.
func TestHeartbeatsDoNotDriveTheTrimClock(t *testing.T) {
	addr, _, p := startServer(t)
	c := silentLane(t, addr)
	burst(t, c, 1, 1000, 100)
	parked := parkedWorkers(t, p)
	require.Greater(t, parked, int64(400), "goroutines parked after the burst")
	hb := codec.HeartbeatHeader()
	one := codec.AppendMessage(nil, &hb, "", "", nil, nil)
	var many []byte
	for i := 0; i < 30; i++ {
		many = append(many, one...)
	}
	rawWrite(t, c, many)
	require.Equal(t, 30, readHeartbeats(t, c, 30, 5*time.Second))
	// At most one trim can have come due meanwhile.
	require.GreaterOrEqual(t, parkedWorkers(t, p), parked/2-1,
		"30 heartbeats took the parked goroutines from %d to %d", parked, parkedWorkers(t, p))
}

// readHeartbeats reads messages from c until want heartbeat responses came
// or d passed, and returns how many came.
func readHeartbeats(t testing.TB, c net.Conn, want int, d time.Duration) int {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(d)))
	n := 0
	for n < want {
		msg, _, err := codec.ReadMessage(c, 1<<20, nil)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			break
		}
		require.NoError(t, err)
		if msg.Header.IsHeartbeat() && msg.Header.MessageType() == protocol.Response {
			n++
		}
	}
	return n
}

// banGuard is a PreReadRequest plugin that refuses every read on a banned
// connection, as a server bans an abusive client.
type banGuard struct {
	mu     sync.Mutex
	banned map[string]bool // by the client's address
}

var errBanned = errors.New("banned")

func (g *banGuard) ban(addr string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.banned == nil {
		g.banned = make(map[string]bool)
	}
	g.banned[addr] = true
}

func (g *banGuard) PreReadRequest(ctx context.Context) error {
	c, _ := ctx.Value(server.RemoteConnContextKey).(net.Conn)
	if c == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.banned[c.RemoteAddr().String()] {
		return errBanned
	}
	return nil
}

// TestPlainRequestsOnALaneGetPreReadRequest (issue 42, item 4): a plain
// rpcx request written on a lane's connection goes through the server's
// PreReadRequest hooks, as it does on a plain connection: a guard that
// bans a connection stops it on the lane no later than on plain rpcx.
func TestPlainRequestsOnALaneGetPreReadRequest(t *testing.T) {
	runs := func(t *testing.T, withPlugin bool) int64 {
		s := server.NewServer()
		g := &banGuard{}
		s.Plugins.Add(g)
		cnt := new(Counter)
		require.NoError(t, s.RegisterName("Counter", cnt, ""))
		if withPlugin {
			_, err := batchserver.New(s)
			require.NoError(t, err)
		}
		addr := serve(t, s)
		c := rawDial(t, addr)
		req := func(seq uint64) []byte {
			h := reqHeader(false)
			h.SetSerializeType(protocol.MsgPack)
			h.SetSeq(seq)
			return codec.AppendMessage(nil, h, "Counter", "Inc", nil, mustMsgpack(&testsvc.Args{}))
		}
		if withPlugin {
			rawHandshake(t, c)
		} else {
			rawWrite(t, c, req(1))
			require.NoError(t, c.SetReadDeadline(time.Now().Add(3*time.Second)))
			_, _, err := codec.ReadMessage(c, 1<<20, nil)
			require.NoError(t, err)
		}
		before := cnt.n.Load()
		g.ban(c.LocalAddr().String())
		var three []byte
		for i := uint64(2); i < 5; i++ {
			three = append(three, req(i)...)
		}
		rawWrite(t, c, three)
		if !closedByPeer(c, 3*time.Second) {
			t.Logf("the server kept the banned connection open")
		}
		time.Sleep(100 * time.Millisecond) // a request read before the close may still run
		return cnt.n.Load() - before
	}
	plain := runs(t, false)
	lane := runs(t, true)
	t.Logf("requests run after the ban: plain rpcx %d of 3, on a lane %d of 3", plain, lane)
	require.LessOrEqual(t, lane, plain, "a lane ran more requests of a banned connection than plain rpcx")
}

// closedByPeer reports whether the server closes c within d, reading and
// dropping whatever it writes meanwhile.
func closedByPeer(c net.Conn, d time.Duration) bool {
	c.SetReadDeadline(time.Now().Add(d))
	buf := make([]byte, 4096)
	for {
		if _, err := c.Read(buf); err != nil {
			var ne net.Error
			return !(errors.As(err, &ne) && ne.Timeout())
		}
	}
}

// blockingLimiter is a PostReadRequest rate limiter that blocks until the
// request's turn, every gap, as rpcx's ReqRateLimitingPlugin does with
// block set.
type blockingLimiter struct {
	gap  time.Duration
	mu   sync.Mutex
	next time.Time
}

func (l *blockingLimiter) PostReadRequest(context.Context, *protocol.Message, error) error {
	l.mu.Lock()
	now := time.Now()
	if l.next.Before(now) {
		l.next = now
	}
	wait := l.next.Sub(now)
	l.next = l.next.Add(l.gap)
	l.mu.Unlock()
	time.Sleep(wait)
	return nil
}

// TestLaneHeartbeatsAndHandshakesAreRateLimited (issue 42, item 7): a
// lane's heartbeats and handshakes pass the server's rate limiter as a
// plain connection's messages do; only batch frames skip it, whose
// entries it limits one by one.
func TestLaneHeartbeatsAndHandshakesAreRateLimited(t *testing.T) {
	const n, window = 400, time.Second
	hb := codec.HeartbeatHeader()
	heartbeat := codec.AppendMessage(nil, &hb, "", "", nil, nil)
	handshake := codec.AppendMessage(nil, reqHeader(false), codec.ServicePath, codec.MethodHandshake, nil, nil)
	answered := func(t *testing.T, withPlugin bool, msg []byte) int {
		s := server.NewServer()
		s.Plugins.Add(&blockingLimiter{gap: 5 * time.Millisecond}) // 200/s
		require.NoError(t, s.RegisterName("Arith", new(testsvc.Arith), ""))
		if withPlugin {
			_, err := batchserver.New(s)
			require.NoError(t, err)
		}
		addr := serve(t, s)
		c := rawDial(t, addr)
		if withPlugin {
			rawHandshake(t, c)
		}
		var all []byte
		for i := 0; i < n; i++ {
			all = append(all, msg...)
		}
		go c.Write(all)
		require.NoError(t, c.SetReadDeadline(time.Now().Add(window)))
		got := 0
		for {
			m, _, err := codec.ReadMessage(c, 1<<20, nil)
			if err != nil {
				break
			}
			if m.Header.MessageType() == protocol.Response {
				got++
			}
		}
		return got
	}
	for _, tc := range []struct {
		name string
		msg  []byte
	}{{"heartbeats", heartbeat}, {"handshakes", handshake}} {
		t.Run(tc.name, func(t *testing.T) {
			plain := answered(t, false, tc.msg)
			lane := answered(t, true, tc.msg)
			t.Logf("%d %s answered in %v under a 200/s limiter: plain rpcx %d, lane %d", n, tc.name, window, plain, lane)
			// The limiter's own bound, which load can only lower: 200 in
			// the second, the first at once, and a lane's upkeep (one
			// heartbeat per 100 ms) beside them.
			limit := int(window/(5*time.Millisecond)) + 1
			require.LessOrEqual(t, plain, limit+5, "the limiter did not hold plain rpcx back")
			require.LessOrEqual(t, lane, limit+15, "a lane got more past the limiter than its upkeep")
		})
	}
}

// TestUnreadRepliesCountInTheWindow (issue 42, item 10): a client that
// ignores the window and never reads its replies cannot make the server
// hold more than the window's worth of them: a call holds its place in
// the window until its reply is written, and a connection beyond twice
// the window is cut, long before the write timeout would cut it.
func TestUnreadRepliesCountInTheWindow(t *testing.T) {
	const window = 128
	addr, _, p := startServer(t, batchserver.WithWindow(window), batchserver.WithWriteTimeout(60*time.Second))
	c := silentLane(t, addr)
	payload := mustMsgpack(make([]byte, 16<<10))
	var id uint64
	var sent atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for seq := uint64(1); seq <= 60; seq++ {
			es := make([]codec.Entry, 64)
			for i := range es {
				id++
				es[i] = codec.Entry{Kind: codec.KindCall, ID: id, ServicePath: "Echo", ServiceMethod: "Bytes",
					SerializeType: uint8(protocol.MsgPack), Payload: payload}
			}
			c.SetWriteDeadline(time.Now().Add(10 * time.Second))
			if _, err := c.Write(batchMessage(frame(seq, es...))); err != nil {
				return
			}
			sent.Add(64)
			// Paced, so that the calls of a frame have run before the
			// next comes: only replies left unwritten fill the window.
			time.Sleep(30 * time.Millisecond)
		}
	}()
	// Never read: the server must give the connection up on its own.
	start := time.Now()
	require.True(t, eventually(15*time.Second, func() bool {
		return counter(t, p.Metrics(), "rpcxbatch.server.errors.malformed") > 0
	}), "the server kept a connection that ignores the window and never reads (%d calls sent)", sent.Load())
	t.Logf("cut after %v, %d calls sent", time.Since(start).Round(time.Millisecond), sent.Load())
	c.Close()
	<-done
	require.True(t, eventually(5*time.Second, func() bool { return connStates(t, p) == 0 }))
}

// TestGaugesSumPluginsSharingARegistry: two plugins given one registry
// (WithMetrics) both count in its gauges, as in its counters.
func TestGaugesSumPluginsSharingARegistry(t *testing.T) {
	r := metrics.NewRegistry()
	addr1, _, p1 := startServer(t, batchserver.WithMetrics(r))
	addr2, _, _ := startServer(t, batchserver.WithMetrics(r))
	silentLane(t, addr1)
	silentLane(t, addr2)
	silentLane(t, addr2)
	require.True(t, eventually(5*time.Second, func() bool { return connStates(t, p1) == 3 }),
		"connections in the shared registry: %d, want 3", connStates(t, p1))
}
