package batchserver_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/batchserver"
)

// TestQuietConnectionLetsGoOfSendQueue: sends that piled up behind a slow
// send handler leave the connection's send queue sized by the pile; once
// the connection is quiet, the lane's heartbeat lets the server drop that
// room, and sends still arrive.
func TestQuietConnectionLetsGoOfSendQueue(t *testing.T) {
	addr, _, p := startServer(t)
	gate := make(chan struct{})
	var got atomic.Int64
	require.NoError(t, p.HandleSend("pile", func(context.Context, []byte) {
		<-gate
		got.Add(1)
	}))
	c := newClient(t, batchclient.WithLanes(1))
	waitConnected(t, c, addr)
	ctx := ctxT(t, 30*time.Second)

	const n = 5000
	for i := 0; i < n; i++ {
		require.NoError(t, c.Send(ctx, addr, "pile", []byte("x")))
	}
	// The first send holds the queue's goroutine; the others wait behind it.
	require.True(t, eventually(10*time.Second, func() bool { return batchserver.KeptSendRoom(p) >= n/2 }),
		"send queue room %d while %d sends wait", batchserver.KeptSendRoom(p), n)
	close(gate)
	require.True(t, eventually(10*time.Second, func() bool { return got.Load() == n }), "%d of %d sends ran", got.Load(), n)
	kept := batchserver.KeptSendRoom(p)
	require.True(t, eventually(10*time.Second, func() bool { return batchserver.KeptSendRoom(p) == 0 }),
		"send queue room %d of %d still kept", batchserver.KeptSendRoom(p), kept)

	require.NoError(t, c.Send(ctx, addr, "pile", []byte("x")))
	require.True(t, eventually(10*time.Second, func() bool { return got.Load() == n+1 }), "the send after the quiet")
}
