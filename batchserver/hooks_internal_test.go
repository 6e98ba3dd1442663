package batchserver

import (
	"context"
	"net"
	"testing"

	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/server"
	"github.com/smallnest/rpcx/share"

	"github.com/rpcxbatch/rpcxbatch/codec"
)

// TestLaneFramesCostTheHooksNoAllocation: every batch frame rpcx reads goes through DoPostReadRequest; with no
// request plugins at all it should cost no allocation.
func TestLaneFramesCostTheHooksNoAllocation(t *testing.T) {
	s := server.NewServer()
	hc := wrapPlugins(s)
	c1, c2 := net.Pipe()
	defer c1.Close()
	defer c2.Close()
	ctx := share.WithValue(context.Background(), server.RemoteConnContextKey, c1)
	hs := protocol.NewMessage()
	hs.ServicePath, hs.ServiceMethod = codec.ServicePath, codec.MethodHandshake
	_ = hc.DoPostReadRequest(ctx, hs, nil)
	frame := protocol.NewMessage()
	frame.ServicePath, frame.ServiceMethod = codec.ServicePath, codec.MethodBatch
	n := testing.AllocsPerRun(1000, func() { _ = hc.DoPostReadRequest(ctx, frame, nil) })
	if n != 0 {
		t.Errorf("DoPostReadRequest of a batch frame allocates %.1f times per frame (sync.Map.Store of an already-marked lane)", n)
	}
}
