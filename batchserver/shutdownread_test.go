package batchserver_test

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/codec"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// readGate is an AuthFunc that holds, once armed, the next message to
// path in rpcx's read loop: rpcx runs AuthFunc after it has read a
// message and before it starts the goroutine that handles it, the moment
// a busy machine can stretch.
type readGate struct {
	path    string // the message's ServicePath
	method  string // and ServiceMethod, or "" for any
	armed   atomic.Bool
	entered chan struct{}
	release chan struct{}
}

func newReadGate(path, method string) *readGate {
	return &readGate{path: path, method: method, entered: make(chan struct{}), release: make(chan struct{})}
}

func (g *readGate) auth(_ context.Context, req *protocol.Message, _ string) error {
	if req.ServicePath == g.path && (g.method == "" || req.ServiceMethod == g.method) && g.armed.CompareAndSwap(true, false) {
		enterAndHold(g.entered, g.release)
	}
	return nil
}

// enterAndHold closes entered and waits until release is closed, at most
// 10 s: how a test holds a server in one of its moments.
func enterAndHold(entered, release chan struct{}) {
	close(entered)
	select {
	case <-release:
	case <-time.After(10 * time.Second):
	}
}

// unregisterHook is a server plugin whose Unregister hook, during
// Shutdown, runs f once: it runs after the batch plugin's (it is added
// later), with Shutdown holding rpcx's lock, before rpcx looks at its
// count of requests being handled.
type unregisterHook struct {
	once atomic.Bool
	f    func()
}

// Register is the other half of rpcx's RegisterPlugin.
func (h *unregisterHook) Register(string, any, string) error { return nil }

// Unregister is rpcx's RegisterPlugin hook.
func (h *unregisterHook) Unregister(string) error {
	if h.once.CompareAndSwap(false, true) {
		h.f()
	}
	return nil
}

// shutdownReadOutcome is what one run of the scenario saw.
type shutdownReadOutcome struct {
	replied     bool  // the held request got its reply
	err         error // what the caller saw instead
	shutdownErr error
	took        time.Duration
}

// runShutdownRead holds one request to Arith.Sleep in rpcx's read loop
// (readGate) across a Shutdown, lets it go, and reports whether its reply
// came. With duringShutdown the request is written from within
// Shutdown's Unregister hooks (once the batch plugin has begun its
// drain); otherwise before Shutdown begins. batch sends it as a frame on
// a lane written by hand, otherwise as a plain rpcx request.
func runShutdownRead(t *testing.T, batch, duringShutdown bool) shutdownReadOutcome {
	var gate *readGate
	if batch {
		gate = newReadGate(codec.ServicePath, codec.MethodBatch)
	} else {
		gate = newReadGate("Arith", "Sleep")
	}
	var s *server.Server
	if batch {
		s, _ = newServer(t)
	} else {
		s = server.NewServer()
		require.NoError(t, s.RegisterName("Arith", new(testsvc.Arith), ""))
	}
	s.AuthFunc = gate.auth
	send := make(chan struct{})
	if duringShutdown {
		s.Plugins.Add(&unregisterHook{f: func() {
			close(send)
			select {
			case <-gate.entered:
			case <-time.After(5 * time.Second):
			}
		}})
	} else {
		close(send)
	}
	addr := serve(t, s)

	// Armed before the request is written: rpcx may read it at once.
	gate.armed.Store(true)
	result := make(chan shutdownReadOutcome, 1)
	if batch {
		c := silentLane(t, addr)
		go func() {
			<-send
			if _, err := c.Write(batchMessage(frame(1, sleepCalls(1, 1, 7)...))); err != nil {
				result <- shutdownReadOutcome{err: err}
				return
			}
			n, err := countAnswers(c, map[uint64]bool{7: true}, 10*time.Second)
			result <- shutdownReadOutcome{replied: n == 1, err: err}
		}()
	} else {
		pc := plainClient(t, addr)
		// rpcx serves a connection once its first bytes have come (its
		// listener sorts connections by what they begin with).
		var r testsvc.Reply
		if err := pc.Call(ctxT(t, 5*time.Second), "Arith", "Mul", &testsvc.Args{A: 1, B: 1}, &r); err != nil {
			t.Fatal(err)
		}
		go func() {
			<-send
			var r testsvc.Reply
			err := pc.Call(ctxT(t, 10*time.Second), "Arith", "Sleep", &testsvc.Args{A: 1, B: 5}, &r)
			result <- shutdownReadOutcome{replied: err == nil && r.C == 5, err: err}
		}()
	}
	if !duringShutdown {
		select {
		case <-gate.entered:
		case <-time.After(5 * time.Second):
			t.Fatal("the request never reached AuthFunc")
		}
	}

	shutdownDone := make(chan error, 1)
	start := time.Now()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		shutdownDone <- s.Shutdown(ctx)
	}()
	// Long enough for a Shutdown that does not wait for the held request
	// to be done with the connection.
	var out shutdownReadOutcome
	select {
	case out.shutdownErr = <-shutdownDone:
		out.took = time.Since(start)
	case <-time.After(300 * time.Millisecond):
	}
	close(gate.release)
	got := <-result
	out.replied, out.err = got.replied, got.err
	if out.took == 0 {
		out.shutdownErr = <-shutdownDone
		out.took = time.Since(start)
	}
	return out
}

// countAnswers reads from c until it ends or d passes and counts the
// answers to ids that are not errors: reply frames' entries on a lane,
// responses by sequence number on a plain connection.
func countAnswers(c net.Conn, ids map[uint64]bool, d time.Duration) (int, error) {
	if err := c.SetReadDeadline(time.Now().Add(d)); err != nil {
		return 0, err
	}
	got := 0
	for got < len(ids) {
		msg, _, err := codec.ReadMessage(c, 1<<24, nil)
		if err != nil {
			return got, err
		}
		switch {
		case msg.Header.MessageType() == protocol.Response && ids[msg.Header.Seq()] && msg.Header.MessageStatusType() != protocol.Error:
			got++
		case msg.ServicePath == codec.ServicePath && msg.ServiceMethod == codec.MethodReply:
			_, replies, err := codec.DecodeReplies(msg.Payload, 0, nil)
			if err != nil {
				return got, err
			}
			for _, rp := range replies {
				if ids[rp.ID] && rp.Status == codec.StatusOK {
					got++
				}
			}
		}
	}
	return got, nil
}

// TestShutdownKeepsFramesReadBeforeTheirHandlerRuns: a frame rpcx has read
// when Shutdown looks at its count of requests being handled, but whose
// handler's goroutine has not run yet (rpcx counts a request only from
// then), gets its entries run and their replies written before Shutdown
// closes the connection: whether it was read before Shutdown began or
// while its hooks ran. On the old code the drain found nothing in flight,
// Shutdown closed the connection at once, and the calls of the frame ran
// with their replies lost: a rolling restart under -race on a busy machine
// saw 121 calls of one frame run twice (TestRollingRestart), Failover
// having tried them again elsewhere.
//
// Plain rpcx loses a request in the same moment (it counts it from the
// same point); its outcome is logged beside, not asserted.
func TestShutdownKeepsFramesReadBeforeTheirHandlerRuns(t *testing.T) {
	for _, tc := range []struct {
		name   string
		during bool
	}{
		{"read_before_Shutdown", false},
		{"read_during_Shutdown", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plain := runShutdownRead(t, false, tc.during)
			batch := runShutdownRead(t, true, tc.during)
			t.Logf("plain rpcx: replied %v (%v), Shutdown took %v", plain.replied, plain.err, plain.took.Round(time.Millisecond))
			t.Logf("batch:      replied %v (%v), Shutdown took %v", batch.replied, batch.err, batch.took.Round(time.Millisecond))
			assert.True(t, batch.replied, "the frame's call lost its reply: %v", batch.err)
			assert.NoError(t, batch.shutdownErr, "Shutdown")
			var se client.ServiceError
			assert.False(t, errors.As(batch.err, &se), "%v", batch.err)
		})
	}
}
