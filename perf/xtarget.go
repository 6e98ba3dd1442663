package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/smallnest/rpcx/client"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
)

// errNoSend is what an XClient path's send op returns: an XClient has no
// Send (run.go leaves those points out; this only guards the op table).
var errNoSend = errors.New("an XClient has no send: run send points on the plain and batch paths")

// xTarget is an XClient over peer-to-peer discovery of the one server, as
// users reach a service: rpcx's own (plainx) or the drop-in (dropin). It
// serves one service path, the one its points' op goes to, and connects
// on its first operation (the warm-up's), as an XClient does.
//
// The drop-in's Client (bc) is made as batchclient.NewXClient makes its
// own, from FromRPCX(option) and the options, and handed to
// NewXClientWith: the same XClient, whose lanes the point can then
// report.
type xTarget struct {
	xc   client.XClient
	bc   *batchclient.Client // dropin only
	addr string
}

func dialXClient(path, service, addr string) (*xTarget, error) {
	d, err := client.NewPeer2PeerDiscovery("tcp@"+addr, "")
	if err != nil {
		return nil, fmt.Errorf("%s: peer-to-peer discovery of %s: %w", path, addr, err)
	}
	if path == pathDropin {
		bc, err := batchclient.New(batchclient.FromRPCX(rpcxOption()))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		xc := batchclient.NewXClientWith(bc, service, client.Failtry, client.RandomSelect, d, rpcxOption())
		return &xTarget{xc: xc, bc: bc, addr: addr}, nil
	}
	return &xTarget{xc: client.NewXClient(service, client.Failtry, client.RandomSelect, d, rpcxOption())}, nil
}

// lanes is the drop-in's lanes to the server (0 for rpcx's XClient).
func (t *xTarget) lanes() int {
	if t.bc == nil {
		return 0
	}
	return t.bc.Info(t.addr).Lanes
}

func (t *xTarget) op(ctx context.Context, op string, p *profile, args any, _ int) (context.Context, opFunc) {
	switch op {
	case "call":
		reply := p.newValue()
		return ctx, func(ctx context.Context) error { return t.xc.Call(ctx, p.method, args, reply) }
	case "go":
		reply, done := p.newValue(), make(chan *client.Call, 1)
		return ctx, func(ctx context.Context) error {
			call, err := t.xc.Go(ctx, p.method, args, reply, done)
			if err != nil {
				return err
			}
			return awaitCall(ctx, call)
		}
	case "cast":
		return ctx, func(ctx context.Context) error { return t.xc.Oneshot(ctx, p.method, args) }
	}
	return ctx, func(context.Context) error { return errNoSend }
}

func (t *xTarget) close() {
	t.xc.Close()
	if t.bc != nil {
		t.bc.Close()
	}
}
