package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/smallnest/rpcx/client"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
)

// The paths under test: plain rpcx's Client and XClient, the direct
// batchclient.Client and the drop-in XClient (batchclient.NewXClient).
// Each run gets a fresh client, connected and warmed before the clock
// starts and closed after the stats are taken, so nothing one run leaves
// behind (rpcx's oneway goroutines, queued entries) reaches the next.
const (
	pathPlain  = "plain"
	pathPlainX = "plainx"
	pathBatch  = "batch"
	pathDropin = "dropin"
)

// allPaths are the paths in table order: each rpcx client, then its
// rpcxbatch counterpart.
var allPaths = []string{pathPlain, pathPlainX, pathBatch, pathDropin}

// batchTransport reports whether path runs over rpcxbatch's lanes (and so
// has batch frames, lanes and the batch codec).
func batchTransport(path string) bool { return path == pathBatch || path == pathDropin }

// offers reports whether path has a form of op: an XClient has no Send,
// so the XClient paths skip send points.
func offers(path, op string) bool {
	return op != "send" || path == pathPlain || path == pathBatch
}

// replied reports whether op waits for the handler's reply (call and go),
// rather than counting once the server has run it (cast and send).
func replied(op string) bool { return op == "call" || op == "go" }

// servicePath is the service an operation goes to: Perf answers calls,
// Sink counts oneway deliveries.
func servicePath(op string) string {
	if replied(op) {
		return "Perf"
	}
	return "Sink"
}

// opFunc performs one operation for writer w.
type opFunc func(ctx context.Context) error

// target is one path's client, and the operations it offers.
type target interface {
	// op returns the function writer w calls for each operation, with the
	// context it should pass. args is shared by all writers and only read;
	// reply values are per writer.
	op(ctx context.Context, op string, p *profile, args any, w int) (context.Context, opFunc)
	close()
}

// dialTarget makes path's client for points of op (an XClient serves one
// service path, the one op goes to).
func dialTarget(path, op, addr string) (target, error) {
	switch path {
	case pathPlain:
		return dialPlain(addr)
	case pathBatch:
		return dialBatch(addr)
	case pathPlainX, pathDropin:
		return dialXClient(path, servicePath(op), addr)
	}
	return nil, fmt.Errorf("unknown path %q", path)
}

// rpcxOption is the rpcx client option every path starts from.
func rpcxOption() client.Option {
	opt := client.DefaultOption
	opt.ConnectTimeout = 3 * time.Second
	return opt
}

// awaitCall waits for an asynchronous call's completion, or ctx's end.
// Each writer of a go point passes Go a done channel of its own, reused
// call after call (it has one call out at a time): rpcx's Client.Go
// signals nothing when done is nil.
func awaitCall(ctx context.Context, call *client.Call) error {
	select {
	case c := <-call.Done:
		return c.Error
	case <-ctx.Done():
		return ctx.Err()
	}
}

// plainTarget is one rpcx *client.Client: one connection, as an XClient
// has per server.
type plainTarget struct{ c *client.Client }

func dialPlain(addr string) (*plainTarget, error) {
	c := client.NewClient(rpcxOption())
	if err := c.Connect("tcp", addr); err != nil {
		return nil, fmt.Errorf("plain rpcx connect %s: %w", addr, err)
	}
	return &plainTarget{c}, nil
}

func (t *plainTarget) op(ctx context.Context, op string, p *profile, args any, _ int) (context.Context, opFunc) {
	switch op {
	case "call":
		reply := p.newValue()
		return ctx, func(ctx context.Context) error { return t.c.Call(ctx, "Perf", p.method, args, reply) }
	case "go":
		reply, done := p.newValue(), make(chan *client.Call, 1)
		return ctx, func(ctx context.Context) error {
			return awaitCall(ctx, t.c.Go(ctx, "Perf", p.method, args, reply, done))
		}
	}
	// cast and send: rpcx's oneway call, exactly as XClient.Oneshot makes
	// it (Go with a nil reply and no done channel); plain rpcx has nothing
	// lighter to deliver bytes to a handler.
	return ctx, func(ctx context.Context) error { return t.c.Go(ctx, "Sink", p.method, args, nil, nil).Error }
}

func (t *plainTarget) close() { t.c.Close() }

// batchTarget is one batchclient.Client with its lanes to the server.
type batchTarget struct {
	c    *batchclient.Client
	addr string
}

func dialBatch(addr string) (*batchTarget, error) {
	c, err := batchclient.New()
	if err != nil {
		return nil, fmt.Errorf("batch client: %w", err)
	}
	if err := c.Start(addr); err != nil {
		c.Close()
		return nil, fmt.Errorf("batch client start %s: %w", addr, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		in := c.Info(addr)
		if in.Status == batchclient.Connected && in.Lanes > 0 {
			return &batchTarget{c, addr}, nil
		}
		if in.Plain || time.Now().After(deadline) {
			c.Close()
			return nil, fmt.Errorf("batch client: no lanes to %s: %+v", addr, in)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (t *batchTarget) op(ctx context.Context, op string, p *profile, args any, w int) (context.Context, opFunc) {
	switch op {
	case "call":
		reply := p.newValue()
		return ctx, func(ctx context.Context) error { return t.c.Call(ctx, t.addr, "Perf", p.method, args, reply) }
	case "go":
		reply, done := p.newValue(), make(chan *client.Call, 1)
		return ctx, func(ctx context.Context) error {
			return awaitCall(ctx, t.c.Go(ctx, t.addr, "Perf", p.method, args, reply, done))
		}
	case "cast":
		return ctx, func(ctx context.Context) error { return t.c.Cast(ctx, t.addr, "Sink", p.method, args) }
	}
	// send: each writer is its own ordered stream, as each ecall writer is
	// (ecall picks the proxy by the caller's pid). The payload is encoded
	// per send, as the plain path encodes its argument per call.
	h := sendHandler(p)
	ctx = batchclient.WithKey(ctx, "w"+strconv.Itoa(w))
	return ctx, func(ctx context.Context) error {
		b, err := msgpack.Encode(args)
		if err != nil {
			return err
		}
		return t.c.Send(ctx, t.addr, h, b)
	}
}

func (t *batchTarget) close() { t.c.Close() }
