package batchclient_test

import (
	"context"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/share"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// TestGoCopiesRequestMetadata: the request metadata Go finds in its
// context is copied into call.Metadata, as rpcx's Go copies it: a change
// the caller makes to its map afterwards is not the call's. Side by side:
// plain rpcx's Go, the batch client's Go over lanes and over the plain
// fallback.
func TestGoCopiesRequestMetadata(t *testing.T) {
	batchAddr, _ := startServer(t, false)
	plainAddr, _ := startServer(t, true)
	c := newClient(t)
	require.False(t, waitConnected(t, c, batchAddr).Plain)
	require.True(t, waitConnected(t, c, plainAddr).Plain)
	pc := client.NewClient(client.DefaultOption)
	require.NoError(t, pc.Connect("tcp", plainAddr))
	t.Cleanup(func() { pc.Close() })

	paths := []struct {
		name   string
		goCall func(ctx context.Context) *client.Call
	}{
		{"plain rpcx", func(ctx context.Context) *client.Call {
			return pc.Go(ctx, "Arith", "Mul", &testsvc.Args{A: 2, B: 3}, &testsvc.Reply{}, make(chan *client.Call, 1))
		}},
		{"lanes", func(ctx context.Context) *client.Call {
			return c.Go(ctx, batchAddr, "Arith", "Mul", &testsvc.Args{A: 2, B: 3}, &testsvc.Reply{}, nil)
		}},
		{"plain fallback", func(ctx context.Context) *client.Call {
			return c.Go(ctx, plainAddr, "Arith", "Mul", &testsvc.Args{A: 2, B: 3}, &testsvc.Reply{}, nil)
		}},
	}
	for _, p := range paths {
		md := map[string]string{"k": "v"}
		ctx := context.WithValue(ctxT(t, 10*time.Second), share.ReqMetaDataKey, md)
		call := p.goCall(ctx)
		md["k"], md["later"] = "changed", "x"
		select {
		case <-call.Done:
		case <-ctx.Done():
			t.Fatalf("%s: no reply", p.name)
		}
		require.NoError(t, call.Error, p.name)
		require.Equal(t, map[string]string{"k": "v"}, call.Metadata, "%s: call.Metadata is the caller's map, not a copy", p.name)
	}
}
