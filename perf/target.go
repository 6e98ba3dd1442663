package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/smallnest/rpcx/client"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
)

// The two paths under test. Each run gets a fresh client, connected and
// warmed before the clock starts and closed after the stats are taken, so
// nothing one run leaves behind (rpcx's oneway goroutines, queued entries)
// reaches the next.
const (
	pathPlain = "plain"
	pathBatch = "batch"
)

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

func dialTarget(path, addr string, cfg Config) (target, error) {
	switch path {
	case pathPlain:
		return dialPlain(addr)
	case pathBatch:
		return dialBatch(addr, clientOptions(cfg)...)
	}
	return nil, fmt.Errorf("unknown path %q", path)
}

// plainTarget is one rpcx *client.Client: one connection, as an XClient
// has per server.
type plainTarget struct{ c *client.Client }

func dialPlain(addr string) (*plainTarget, error) {
	opt := client.DefaultOption
	opt.ConnectTimeout = 3 * time.Second
	c := client.NewClient(opt)
	if err := c.Connect("tcp", addr); err != nil {
		return nil, fmt.Errorf("plain rpcx connect %s: %w", addr, err)
	}
	return &plainTarget{c}, nil
}

func (t *plainTarget) op(ctx context.Context, op string, p *profile, args any, _ int) (context.Context, opFunc) {
	if op == "call" {
		reply := p.newValue()
		return ctx, func(ctx context.Context) error { return t.c.Call(ctx, "Perf", p.method, args, reply) }
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

func dialBatch(addr string, opts ...batchclient.Option) (*batchTarget, error) {
	c, err := batchclient.New(opts...)
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
