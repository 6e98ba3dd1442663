package batchserver_test

import (
	"context"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/codec"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// latch is what Latch's calls share: how many ran, a signal when the
// first starts, and the release every call waits for.
type latch struct {
	ran     atomic.Int32
	started chan struct{}
	release chan struct{}
}

// Latch is a service whose calls wait until the test releases them.
type Latch struct{ l *latch }

// Hold counts the run, then waits for the release (at most 10 s) and
// returns B.
func (s *Latch) Hold(ctx context.Context, a *testsvc.Args, r *testsvc.Reply) error {
	if s.l.ran.Add(1) == 1 {
		close(s.l.started)
	}
	select {
	case <-s.l.release:
	case <-time.After(10 * time.Second):
	}
	r.C = a.B
	return nil
}

// gatewayHold is a PreReadRequest plugin that, once armed, holds the next
// request of rpcx's HTTP gateway until released. rpcx's Shutdown closes
// the gateway after it has looked at its count of requests being handled
// and before it closes the connections, and waits there for the gateway's
// requests, which that count leaves out: a held one keeps Shutdown in
// the moment between the two.
type gatewayHold struct {
	armed   atomic.Bool
	entered chan struct{}
	release chan struct{}
}

// PreReadRequest is rpcx's PreReadRequestPlugin hook.
func (g *gatewayHold) PreReadRequest(ctx context.Context) error {
	// The gateway names the connection by its address; rpcx's read loop
	// by the net.Conn.
	if _, http := ctx.Value(server.RemoteConnContextKey).(string); http && g.armed.CompareAndSwap(true, false) {
		enterAndHold(g.entered, g.release)
	}
	return nil
}

// closeOnce returns a function that closes ch the first time it is called.
func closeOnce(ch chan struct{}) func() {
	var once sync.Once
	return func() { once.Do(func() { close(ch) }) }
}

// lateReadOutcome is what one run of the late-read scenario saw.
type lateReadOutcome struct {
	ran, replied, toldUnrun bool
}

// runLateRead writes all of a request but its last bytes, has Shutdown
// look at its count of requests being handled (nothing is in flight) and
// stop in its gateway's close (gatewayHold), writes the rest, lets
// Shutdown close the connections, and then lets the call finish. batch
// sends the request as a frame on a lane written by hand, otherwise as a
// plain rpcx request.
func runLateRead(t *testing.T, batch bool) lateReadOutcome {
	l := &latch{started: make(chan struct{}), release: make(chan struct{})}
	var s *server.Server
	var draining func() bool
	if batch {
		var p interface{ Draining() bool }
		s, p = newServer(t)
		draining = p.Draining
	} else {
		s = server.NewServer()
		draining = func() bool { return true }
	}
	require.NoError(t, s.RegisterName("Latch", &Latch{l}, ""))
	hold := &gatewayHold{entered: make(chan struct{}), release: make(chan struct{})}
	hold.armed.Store(true)
	s.Plugins.Add(hold)
	addr := serve(t, s) // with rpcx's HTTP gateway, as by default
	releaseGateway, releaseCall := closeOnce(hold.release), closeOnce(l.release)
	t.Cleanup(func() { releaseGateway(); releaseCall() })

	args := mustMsgpack(&testsvc.Args{A: 1, B: 9})
	var c net.Conn
	var msg []byte
	if batch {
		c = silentLane(t, addr)
		msg = batchMessage(frame(1, codec.Entry{Kind: codec.KindCall, ID: 7, ServicePath: "Latch", ServiceMethod: "Hold",
			SerializeType: uint8(protocol.MsgPack), Payload: args}))
	} else {
		c = rawDial(t, addr)
		req := protocol.NewMessage()
		req.SetMessageType(protocol.Request)
		req.SetSerializeType(protocol.MsgPack)
		req.SetSeq(7)
		req.ServicePath, req.ServiceMethod, req.Payload = "Latch", "Hold", args
		msg = req.Encode()
	}
	tail := 4
	rawWrite(t, c, msg[:len(msg)-tail])

	// A request to the gateway, held in PreReadRequest.
	go func() {
		hc := &http.Client{Timeout: 15 * time.Second}
		if resp, err := hc.Post("http://"+addr+"/", "application/octet-stream", strings.NewReader("")); err == nil {
			resp.Body.Close()
		}
	}()
	select {
	case <-hold.entered:
	case <-time.After(5 * time.Second):
		t.Fatal("the gateway request never reached PreReadRequest")
	}

	shutdownDone := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		shutdownDone <- s.Shutdown(ctx)
	}()
	// Shutdown has closed its listener (after its hooks, before it looks at
	// its count); looking at the count and coming to the gateway's close
	// takes it microseconds more.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		require.True(t, time.Now().Before(deadline), "Shutdown never closed its listener")
		if !draining() {
			continue
		}
		if d, err := net.DialTimeout("tcp", addr, 100*time.Millisecond); err == nil {
			d.Close()
			continue
		}
		break
	}
	time.Sleep(50 * time.Millisecond)
	rawWrite(t, c, msg[len(msg)-tail:])
	// The call starts within moments if it is run at all.
	select {
	case <-l.started:
	case <-time.After(300 * time.Millisecond):
	}
	releaseGateway()
	select {
	case err := <-shutdownDone:
		require.NoError(t, err, "Shutdown")
	case <-time.After(15 * time.Second):
		t.Fatal("Shutdown did not end")
	}
	releaseCall()

	var out lateReadOutcome
	require.NoError(t, c.SetReadDeadline(time.Now().Add(3*time.Second)))
	for {
		m, _, err := codec.ReadMessage(c, 1<<24, nil)
		if err != nil {
			break
		}
		switch {
		case m.Header.MessageType() == protocol.Response && m.Header.Seq() == 7 && m.Header.MessageStatusType() != protocol.Error:
			out.replied = true
		case m.ServicePath == codec.ServicePath && m.ServiceMethod == codec.MethodReply:
			_, replies, err := codec.DecodeReplies(m.Payload, 0, nil)
			require.NoError(t, err)
			for _, rp := range replies {
				out.replied = out.replied || rp.ID == 7 && rp.Status == codec.StatusOK
			}
		case m.ServicePath == codec.ServicePath && m.ServiceMethod == codec.MethodUnrun:
			_, ids, err := codec.DecodeUnrun(m.Payload)
			require.NoError(t, err)
			for _, id := range ids {
				out.toldUnrun = out.toldUnrun || id == 7
			}
		}
	}
	out.ran = l.ran.Load() > 0
	return out
}

// TestShutdownRunsNoFrameReadAfterItsCount: a frame whose last bytes rpcx
// reads after its Shutdown has looked at its count of requests being
// handled (and found none) is not run: Shutdown closes the connection
// without looking again, and the reply of a call run then is lost, so a
// Failover caller runs it twice (TestRollingRestart met 118 such calls
// beside a second make test). Its calls are told they did not run
// (codec.MethodUnrun), an error the client retries.
//
// Plain rpcx runs the request it reads in that moment and loses its
// reply (logged beside, not asserted).
func TestShutdownRunsNoFrameReadAfterItsCount(t *testing.T) {
	plain := runLateRead(t, false)
	batch := runLateRead(t, true)
	t.Logf("plain rpcx: ran %v, replied %v", plain.ran, plain.replied)
	t.Logf("batch:      ran %v, replied %v, told it did not run %v", batch.ran, batch.replied, batch.toldUnrun)
	assert.False(t, batch.ran && !batch.replied, "the call ran and its reply was lost")
	assert.False(t, batch.ran, "a frame read after Shutdown looked at its count ran")
	assert.True(t, batch.toldUnrun, "the lane was not told that its call did not run")
}
