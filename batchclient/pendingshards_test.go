package batchclient_test

import (
	"errors"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// TestLaneFailureFailsEveryPendingCall: calls of Call and of Go waiting
// for their replies on one lane (their ids spread over every shard of its
// pending table) all fail with ErrConnection when the lane's connection
// is lost, and none is left pending.
func TestLaneFailureFailsEveryPendingCall(t *testing.T) {
	const calls, gos = 300, 300
	addr, _ := startServer(t, false)
	// Heartbeats a minute apart: only the connection's loss fails the calls.
	c := newClient(t, batchclient.WithLanes(1), batchclient.WithHeartbeat(20*time.Second, time.Minute))
	waitConnected(t, c, addr)
	ctx := ctxT(t, 30*time.Second)

	errs := make(chan error, calls)
	for i := 0; i < calls; i++ {
		go func() {
			var r testsvc.Reply
			errs <- c.Call(ctx, addr, "Arith", "Sleep", &testsvc.Args{A: 20000, B: i}, &r)
		}()
	}
	done := make(chan *client.Call, gos)
	for i := 0; i < gos; i++ {
		c.Go(ctx, addr, "Arith", "Sleep", &testsvc.Args{A: 20000, B: i}, &testsvc.Reply{}, done)
	}
	deadline := time.Now().Add(15 * time.Second)
	for batchclient.PendingCalls(c, addr) < calls+gos {
		require.True(t, time.Now().Before(deadline), "only %d of %d calls pending", batchclient.PendingCalls(c, addr), calls+gos)
		time.Sleep(5 * time.Millisecond)
	}
	conn := batchclient.LaneConn(c, addr)
	require.NotNil(t, conn)
	conn.Close()

	wait := time.After(15 * time.Second)
	for i := 0; i < calls+gos; i++ {
		var err error
		select {
		case err = <-errs:
		case call := <-done:
			err = call.Error
		case <-wait:
			t.Fatalf("%d of %d calls still wait 15 s after the lane was lost", calls+gos-i, calls+gos)
		}
		if !errors.Is(err, batchclient.ErrConnection) {
			t.Fatalf("call %d: %v, want ErrConnection", i, err)
		}
	}
	require.Zero(t, batchclient.PendingCalls(c, addr))
}
