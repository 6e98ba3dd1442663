package batchclient_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testenv"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// pushPath is one way of running the push scenarios: a server with or
// without the batch plugin, and rpcx's or this package's bidirectional
// XClient.
type pushPath struct {
	name        string
	plainServer bool
	rpcxClient  bool
}

var pushPaths = []pushPath{
	{name: "rpcx", plainServer: true, rpcxClient: true},
	{name: "batch", plainServer: false},
	{name: "fallback", plainServer: true},
}

// newPushServer serves Pusher (and Arith) on loopback, with the batch
// plugin unless plain.
func newPushServer(t *testing.T, plain bool) (string, *server.Server, *batchserver.Plugin) {
	t.Helper()
	s := server.NewServer()
	var p *batchserver.Plugin
	if !plain {
		var err error
		p, err = batchserver.New(s)
		require.NoError(t, err)
	}
	require.NoError(t, s.RegisterName("Pusher", &testsvc.Pusher{S: s}, ""))
	require.NoError(t, s.RegisterName("Arith", new(testsvc.Arith), ""))
	addr, stop, err := testsvc.Serve(s)
	require.NoError(t, err)
	t.Cleanup(testsvc.StopWhenIdle(s, stop))
	return addr, s, p
}

// newPushXClient is a bidirectional XClient of the path's kind for addr.
func newPushXClient(t *testing.T, path pushPath, addr string, option client.Option, ch chan *protocol.Message) client.XClient {
	t.Helper()
	d, err := client.NewPeer2PeerDiscovery("tcp@"+addr, "")
	require.NoError(t, err)
	var xc client.XClient
	if path.rpcxClient {
		xc = client.NewBidirectionalXClient("Pusher", client.Failtry, client.RoundRobin, d, option, ch)
	} else {
		xc = batchclient.NewBidirectionalXClient("Pusher", client.Failtry, client.RoundRobin, d, option, ch)
	}
	t.Cleanup(func() { xc.Close() })
	return xc
}

// pushed is what a test compares of a pushed message: every field rpcx
// sets, the whole header included.
type pushed struct {
	Header        protocol.Header
	ServicePath   string
	ServiceMethod string
	Metadata      map[string]string
	Payload       string
}

func fields(m *protocol.Message) pushed {
	return pushed{Header: *m.Header, ServicePath: m.ServicePath, ServiceMethod: m.ServiceMethod,
		Metadata: m.Metadata, Payload: string(m.Payload)}
}

// A handler pushes N messages to its caller while answering: the caller
// finds all N on its channel, in order, by the time the call returns, with
// the same fields over plain rpcx, over lanes and over the fallback.
func TestPushSameOnEveryPath(t *testing.T) {
	const n = 20
	got := map[string][]pushed{}
	for _, path := range pushPaths {
		addr, _, _ := newPushServer(t, path.plainServer)
		ch := make(chan *protocol.Message, n)
		xc := newPushXClient(t, path, addr, client.DefaultOption, ch)
		var reply testsvc.PushReply
		require.NoError(t, xc.Call(ctxT(t, 10*time.Second), "Push", &testsvc.PushArgs{N: n, Tag: "t", Size: 100}, &reply), path.name)
		assert.Equal(t, n, reply.N, path.name)
		// The pushes travel ahead of the reply on the same connection.
		require.Len(t, ch, n, path.name)
		for i := 0; i < n; i++ {
			m := <-ch
			f := fields(m)
			assert.Equal(t, strconv.Itoa(i), f.Metadata["i"], path.name)
			assert.Equal(t, string(testsvc.PushPayload("t", i, 100)), f.Payload, path.name)
			got[path.name] = append(got[path.name], f)
		}
	}
	require.Len(t, got["rpcx"], n)
	assert.Equal(t, got["rpcx"], got["batch"], "lanes deliver what rpcx delivers")
	assert.Equal(t, got["rpcx"], got["fallback"], "the fallback delivers what rpcx delivers")
}

// A full channel drops what does not fit, as rpcx does; the batch path
// counts the drops.
func TestPushFullChannelDropsAsRPCX(t *testing.T) {
	for _, path := range pushPaths {
		addr, _, _ := newPushServer(t, path.plainServer)
		ch := make(chan *protocol.Message, 2)
		xc := newPushXClient(t, path, addr, client.DefaultOption, ch)
		var reply testsvc.PushReply
		require.NoError(t, xc.Call(ctxT(t, 10*time.Second), "Push", &testsvc.PushArgs{N: 7, Tag: "f"}, &reply), path.name)
		require.Len(t, ch, 2, path.name)
		assert.Equal(t, "0", (<-ch).Metadata["i"], path.name)
		assert.Equal(t, "1", (<-ch).Metadata["i"], path.name)
	}
}

// With BidirectionalBlock the reader waits for room instead of dropping:
// every push arrives through an unbuffered channel, and the reply after
// them, on every path.
func TestPushBidirectionalBlock(t *testing.T) {
	const n = 10
	for _, path := range pushPaths {
		addr, _, _ := newPushServer(t, path.plainServer)
		ch := make(chan *protocol.Message)
		opt := client.DefaultOption
		opt.BidirectionalBlock = true
		xc := newPushXClient(t, path, addr, opt, ch)
		done := make(chan error, 1)
		go func() {
			var reply testsvc.PushReply
			done <- xc.Call(ctxT(t, 10*time.Second), "Push", &testsvc.PushArgs{N: n, Tag: "b"}, &reply)
		}()
		timeout := time.After(10 * time.Second)
		for i := 0; i < n; i++ {
			select {
			case m := <-ch:
				assert.Equal(t, strconv.Itoa(i), m.Metadata["i"], path.name)
			case err := <-done:
				t.Fatalf("%s: the call returned (%v) before push %d was taken", path.name, err, i)
			case <-timeout:
				t.Fatalf("%s: push %d never arrived", path.name, i)
			}
		}
		select {
		case err := <-done:
			require.NoError(t, err, path.name)
		case <-timeout:
			t.Fatalf("%s: the call did not return", path.name)
		}
	}
}

// When the server goes away, the channel gets one message of status Error
// naming the server, as rpcx sends for a lost connection.
func TestPushLostConnectionNotice(t *testing.T) {
	for _, path := range pushPaths {
		addr, s, _ := newPushServer(t, path.plainServer)
		ch := make(chan *protocol.Message, 10)
		xc := newPushXClient(t, path, addr, client.DefaultOption, ch)
		var reply testsvc.PushReply
		require.NoError(t, xc.Call(ctxT(t, 10*time.Second), "Push", &testsvc.PushArgs{N: 1, Tag: "l"}, &reply), path.name)
		assert.Equal(t, protocol.Normal, recv(t, ch, path.name+": the push").MessageStatusType(), path.name)
		s.Close()
		m := recv(t, ch, path.name+": the notice of the lost connection")
		assert.Equal(t, protocol.Request, m.MessageType(), path.name)
		assert.Equal(t, protocol.Error, m.MessageStatusType(), path.name)
		assert.Equal(t, addr, m.Metadata["server"], path.name)
		assert.NotEmpty(t, m.Metadata[protocol.ServiceError], path.name)
	}
}

// recv takes the next message from ch, failing the test if none comes
// within 10 s.
func recv(t *testing.T, ch chan *protocol.Message, what string) *protocol.Message {
	t.Helper()
	select {
	case m := <-ch:
		return m
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: nothing arrived", what)
		return nil
	}
}

// Under load, with replies flowing on the same connections, every push
// reaches the client that made the call, whole and in its call's order,
// and no frame is corrupted: every reply is right and no lane breaks.
func TestPushUnderLoad(t *testing.T) {
	const (
		goroutines = 32
		calls      = 15
		perCall    = 4
	)
	for _, path := range pushPaths[:2] {
		addr, _, _ := newPushServer(t, path.plainServer)
		ch := make(chan *protocol.Message, goroutines*calls*perCall)
		opt := client.DefaultOption
		xc := newPushXClient(t, path, addr, opt, ch)
		ctx := ctxT(t, 60*time.Second)
		start := time.Now()
		concurrently(t, goroutines, func(g int) error {
			for c := 0; c < calls; c++ {
				tag := fmt.Sprintf("g%d-c%d", g, c)
				// Sizes from a few bytes to several socket buffers' worth,
				// so that writes are split by the kernel.
				size := (g*calls + c) % 5 * 16000
				var reply testsvc.PushReply
				if err := xc.Call(ctx, "Push", &testsvc.PushArgs{N: perCall, Tag: tag, Size: size}, &reply); err != nil {
					return err
				}
				if reply.Tag != tag || reply.N != perCall {
					return fmt.Errorf("call %s: reply %+v", tag, reply)
				}
				// A call that pushes nothing: replies alone in between.
				if err := xc.Call(ctx, "Push", &testsvc.PushArgs{Tag: tag}, &reply); err != nil || reply.Tag != tag {
					return fmt.Errorf("call %s without pushes: %+v, %v", tag, reply, err)
				}
			}
			return nil
		})
		t.Logf("%s: %d calls, %d pushes in %v", path.name, 2*goroutines*calls, len(ch), time.Since(start).Round(time.Millisecond))
		seen := map[string]int{}
		for len(ch) > 0 {
			m := <-ch
			tag, i := m.Metadata["tag"], m.Metadata["i"]
			require.Equal(t, strconv.Itoa(seen[tag]), i, "%s: push of call %s out of order", path.name, tag)
			g, c := 0, 0
			_, err := fmt.Sscanf(tag, "g%d-c%d", &g, &c)
			require.NoError(t, err)
			require.Equal(t, string(testsvc.PushPayload(tag, seen[tag], (g*calls+c)%5*16000)), string(m.Payload), "%s: payload of %s/%s", path.name, tag, i)
			require.Equal(t, testsvc.PushPath, m.ServicePath)
			require.Equal(t, testsvc.PushMethod, m.ServiceMethod)
			seen[tag]++
		}
		require.Len(t, seen, goroutines*calls, path.name)
		for tag, n := range seen {
			require.Equal(t, perCall, n, "%s: call %s", path.name, tag)
		}
	}
}

// Two clients of one server each get only the pushes of their own calls,
// before and after the server restarts at the same address (their lanes
// are rebuilt against the new incarnation).
func TestPushReachesOnlyItsClientAcrossRestart(t *testing.T) {
	s, _ := servePusherAt(t, testenv.RestartAddr(t))
	addr := s.Address().String()
	chA, chB := make(chan *protocol.Message, 64), make(chan *protocol.Message, 64)
	a := newPushXClient(t, pushPaths[1], addr, client.DefaultOption, chA)
	b := newPushXClient(t, pushPaths[1], addr, client.DefaultOption, chB)
	round := func(label string) {
		var wg sync.WaitGroup
		for _, x := range []struct {
			xc  client.XClient
			tag string
		}{{a, "A" + label}, {b, "B" + label}} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Right after the restart a call may find the lanes down:
				// try again until one succeeds.
				ctx := ctxT(t, 20*time.Second)
				for {
					var reply testsvc.PushReply
					err := x.xc.Call(ctx, "Push", &testsvc.PushArgs{N: 5, Tag: x.tag}, &reply)
					if err == nil || ctx.Err() != nil {
						assert.NoError(t, err)
						return
					}
					time.Sleep(20 * time.Millisecond)
				}
			}()
		}
		wg.Wait()
	}
	// tags drains ch and returns the tags of its pushes (notices of a lost
	// connection have none).
	tags := func(ch chan *protocol.Message) map[string]int {
		out := map[string]int{}
		for len(ch) > 0 {
			m := <-ch
			if m.MessageStatusType() == protocol.Normal {
				out[m.Metadata["tag"]]++
			}
		}
		return out
	}
	round("1")
	assert.Equal(t, map[string]int{"A1": 5}, tags(chA))
	assert.Equal(t, map[string]int{"B1": 5}, tags(chB))

	s.Close()
	servePusherAt(t, addr)
	round("2")
	// A failed attempt may have run on the server: its pushes are the
	// client's own too.
	for name, got := range map[string]map[string]int{"A2": tags(chA), "B2": tags(chB)} {
		assert.Len(t, got, 1, name)
		assert.GreaterOrEqual(t, got[name], 5, name)
	}
}

// The Client, used directly, delivers pushes to the channel registered
// for the address.
func TestPushClientRegister(t *testing.T) {
	addr, _, _ := newPushServer(t, false)
	c := newClient(t)
	ch := make(chan *protocol.Message, 8)
	c.RegisterServerMessageChan(addr, ch)
	var reply testsvc.PushReply
	require.NoError(t, c.Call(ctxT(t, 10*time.Second), addr, "Pusher", "Push", &testsvc.PushArgs{N: 3, Tag: "c"}, &reply))
	require.Len(t, ch, 3)
	c.UnregisterServerMessageChan(addr)
	<-ch
	<-ch
	<-ch
	require.NoError(t, c.Call(ctxT(t, 10*time.Second), addr, "Pusher", "Push", &testsvc.PushArgs{N: 3, Tag: "c"}, &reply))
	assert.Len(t, ch, 0, "unregistered: nothing delivered")

	// A full channel: what does not fit is dropped and counted.
	small := make(chan *protocol.Message, 1)
	c.RegisterServerMessageChan(addr, small)
	require.NoError(t, c.Call(ctxT(t, 10*time.Second), addr, "Pusher", "Push", &testsvc.PushArgs{N: 3, Tag: "d"}, &reply))
	require.Len(t, small, 1)
	assert.Equal(t, "0", (<-small).Metadata["i"])
	dropped, _ := c.Metrics().Get("rpcxbatch.client.errors.push_dropped").(interface{ Count() int64 })
	require.NotNil(t, dropped)
	assert.Equal(t, int64(2), dropped.Count())
}

// servePusherAt serves Pusher with the batch plugin at addr.
func servePusherAt(t *testing.T, addr string) (*server.Server, *batchserver.Plugin) {
	t.Helper()
	s := server.NewServer()
	p, err := batchserver.New(s)
	require.NoError(t, err)
	require.NoError(t, s.RegisterName("Pusher", &testsvc.Pusher{S: s}, ""))
	go s.Serve("tcp", addr)
	deadline := time.Now().Add(5 * time.Second)
	for s.Address() == nil {
		require.True(t, time.Now().Before(deadline), "server at %s did not start", addr)
		time.Sleep(time.Millisecond)
	}
	t.Cleanup(func() { s.Close() })
	return s, p
}

// With BidirectionalBlock, a consumer slower than the heartbeat timeout
// holds up the lane's reader, as it holds up rpcx's, but does not make the
// lane look frozen: the call completes once the pushes are taken.
func TestPushBlockedReaderKeepsLane(t *testing.T) {
	addr, _, _ := newPushServer(t, false)
	d, err := client.NewPeer2PeerDiscovery("tcp@"+addr, "")
	require.NoError(t, err)
	opt := client.DefaultOption
	opt.BidirectionalBlock = true
	ch := make(chan *protocol.Message)
	xc := batchclient.NewBidirectionalXClient("Pusher", client.Failtry, client.RoundRobin, d, opt, ch,
		batchclient.WithHeartbeat(50*time.Millisecond, 200*time.Millisecond))
	t.Cleanup(func() { xc.Close() })
	done := make(chan error, 1)
	go func() {
		var reply testsvc.PushReply
		done <- xc.Call(ctxT(t, 20*time.Second), "Push", &testsvc.PushArgs{N: 2, Tag: "k"}, &reply)
	}()
	// The consumer is busy elsewhere for several heartbeat timeouts.
	time.Sleep(time.Second)
	assert.Equal(t, "0", recv(t, ch, "push 0").Metadata["i"])
	assert.Equal(t, "1", recv(t, ch, "push 1").Metadata["i"])
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the call did not return")
	}
}

// XClients sharing a Client share its lanes: the channel registered on the
// Client gets the pushes of their calls, and an XClient without a channel
// (rpcx registers nil for it) does not take the Client's away.
func TestPushSharedClient(t *testing.T) {
	addr, _, _ := newPushServer(t, false)
	c := newClient(t)
	ch := make(chan *protocol.Message, 8)
	c.RegisterServerMessageChan(addr, ch)
	d, err := client.NewPeer2PeerDiscovery("tcp@"+addr, "")
	require.NoError(t, err)
	xc := batchclient.NewXClientWith(c, "Pusher", client.Failtry, client.RoundRobin, d, client.DefaultOption)
	var reply testsvc.PushReply
	require.NoError(t, xc.Call(ctxT(t, 10*time.Second), "Push", &testsvc.PushArgs{N: 2, Tag: "s"}, &reply))
	require.NoError(t, xc.Close())
	require.Len(t, ch, 2)
	assert.Equal(t, "s", (<-ch).Metadata["tag"])
	assert.Equal(t, "s", (<-ch).Metadata["tag"])
	// The closed XClient took nothing of the Client's with it.
	require.NoError(t, c.Call(ctxT(t, 10*time.Second), addr, "Pusher", "Push", &testsvc.PushArgs{N: 1, Tag: "after"}, &reply))
	require.Len(t, ch, 1)
	assert.Equal(t, "after", (<-ch).Metadata["tag"])
}

// TestPushLostNoticeOnGracefulShutdown is TestPushLostConnectionNotice with
// a graceful Shutdown in place of Close: rpcx's client tells its channel
// when Shutdown ends its connection, and so must the lanes.
func TestPushLostNoticeOnGracefulShutdown(t *testing.T) {
	for _, path := range pushPaths {
		addr, s, _ := newPushServer(t, path.plainServer)
		ch := make(chan *protocol.Message, 10)
		xc := newPushXClient(t, path, addr, client.DefaultOption, ch)
		var reply testsvc.PushReply
		require.NoError(t, xc.Call(ctxT(t, 10*time.Second), "Push", &testsvc.PushArgs{N: 1, Tag: "l"}, &reply), path.name)
		assert.Equal(t, protocol.Normal, recv(t, ch, path.name+": the push").MessageStatusType(), path.name)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		require.NoError(t, s.Shutdown(ctx))
		cancel()
		select {
		case m := <-ch:
			assert.Equal(t, protocol.Error, m.MessageStatusType(), path.name)
			t.Logf("%s: notice %v", path.name, m.Metadata)
		case <-time.After(5 * time.Second):
			t.Errorf("%s: no lost-connection notice within 5 s after a graceful Shutdown", path.name)
		}
	}
}
