package testsvc

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/smallnest/rpcx/server"
)

// Args is the argument of Arith's methods.
type Args struct {
	A, B int
}

// Reply is the result of Arith's methods.
type Reply struct {
	C int
}

// Arith is a test service: arithmetic, plus methods that sleep, fail and
// panic on purpose.
type Arith struct{}

// Mul multiplies.
func (Arith) Mul(_ context.Context, a *Args, r *Reply) error {
	r.C = a.A * a.B
	return nil
}

// Sleep sleeps A milliseconds or until ctx ends, then returns B.
func (Arith) Sleep(ctx context.Context, a *Args, r *Reply) error {
	select {
	case <-time.After(time.Duration(a.A) * time.Millisecond):
		r.C = a.B
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ErrRejected is what Arith.Reject returns.
var ErrRejected = errors.New("rejected")

// Reject always fails with ErrRejected.
func (Arith) Reject(_ context.Context, _ *Args, _ *Reply) error { return ErrRejected }

// Panic always panics.
func (Arith) Panic(_ context.Context, _ *Args, _ *Reply) error { panic("boom") }

// Data is the "data" payload of the benchmarks, as in ecall's measurements:
// three keys of ten small integer fields each, 220 bytes in msgpack for
// NewData(i) with 0 <= i < 50 (ecall's is about 225).
type Data struct {
	A Fields `msgpack:"a"`
	B Fields `msgpack:"b"`
	C Fields `msgpack:"c"`
}

// Fields are ten small integers.
type Fields struct {
	F0 int `msgpack:"val_0"`
	F1 int `msgpack:"val_1"`
	F2 int `msgpack:"val_2"`
	F3 int `msgpack:"val_3"`
	F4 int `msgpack:"val_4"`
	F5 int `msgpack:"val_5"`
	F6 int `msgpack:"val_6"`
	F7 int `msgpack:"val_7"`
	F8 int `msgpack:"val_8"`
	F9 int `msgpack:"val_9"`
}

// NewData returns a Data filled from seed.
func NewData(seed int) *Data {
	f := func(o int) Fields {
		s := seed + o
		return Fields{s, s + 1, s + 2, s + 3, s + 4, s + 5, s + 6, s + 7, s + 8, s + 9}
	}
	return &Data{f(0), f(30), f(60)}
}

// Echo returns its argument.
type Echo struct{}

// Data echoes a Data.
func (Echo) Data(_ context.Context, d *Data, r *Data) error {
	*r = *d
	return nil
}

// Bytes echoes bytes.
func (Echo) Bytes(_ context.Context, b *[]byte, r *[]byte) error {
	*r = *b
	return nil
}

// Serve starts s on a random loopback port and returns its address; the
// server is closed when stop is called. The JSON-RPC gateway, which no
// test uses, is off (NoJSONRPC).
func Serve(s *server.Server) (addr string, stop func(), err error) {
	NoJSONRPC(s)
	go s.Serve("tcp", "127.0.0.1:0")
	deadline := time.Now().Add(5 * time.Second)
	for s.Address() == nil {
		if time.Now().After(deadline) {
			return "", nil, errors.New("testsvc: server did not start")
		}
		time.Sleep(time.Millisecond)
	}
	return s.Address().(*net.TCPAddr).String(), func() { s.Close() }, nil
}

// NoJSONRPC turns s's JSON-RPC gateway off before it serves. rpcx v1.9.4
// starts it on a goroutine of Serve's, which sets the server's
// jsonrpcHTTPServer under a lock that Shutdown does not take to read it: a
// Shutdown soon after Serve (a test's quick restart, on a busy machine) is
// a data race inside rpcx that -race reports. No test uses the gateway.
func NoJSONRPC(s *server.Server) { s.DisableJSONRPC = true }

// StopWhenIdle returns stop made to wait first, up to a second, for s's
// connections to go: for a test's cleanup, which closes the test's clients
// before the server it made first. rpcx's Close stops the worker pool of
// server.WithPool without waiting for the connections' goroutines, one of
// which may be handing the pool a request at that moment: a data race
// inside rpcx and its pool library that -race reports (a batchserver test
// met it). Tests that stop a server while its clients
// still talk to it, on purpose, call stop itself.
func StopWhenIdle(s *server.Server, stop func()) func() {
	return func() {
		for deadline := time.Now().Add(time.Second); len(s.ActiveClientConn()) > 0 && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
		}
		stop()
	}
}

// Slow is a test service that takes its time: overload tests cast to it.
type Slow struct{}

// Take sleeps 2 ms and returns the payload's length.
func (Slow) Take(ctx context.Context, b *[]byte, n *int) error {
	select {
	case <-time.After(2 * time.Millisecond):
	case <-ctx.Done():
	}
	*n = len(*b)
	return nil
}

// Grow returns n zero bytes: a reply far larger than its request.
func (Echo) Grow(_ context.Context, n *int, r *[]byte) error {
	*r = make([]byte, *n)
	return nil
}
