package batchclient_test

import (
	"bytes"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smallnest/rpcx/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// With a small byte window and calls of mixed sizes, the lanes keep the
// bytes in flight within the window (or one frame alone), every call
// succeeds, and all bytes come back.
func TestBytesInFlightStayWithinTheWindow(t *testing.T) {
	const (
		window = 48 << 10
		lanes  = 2
		big    = 200 << 10
	)
	s := server.NewServer()
	require.NoError(t, s.RegisterName("Echo", new(testsvc.Echo), ""))
	_, err := batchserver.New(s, batchserver.WithWindowBytes(window), batchserver.WithPoolSize(lanes))
	require.NoError(t, err)
	addr, stop, err := testsvc.Serve(s)
	require.NoError(t, err)
	t.Cleanup(testsvc.StopWhenIdle(s, stop))
	c := newClient(t)
	waitConnected(t, c, addr)

	var peak atomic.Int64
	done := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Add(1)
	go func() {
		defer sampler.Done()
		for {
			if n := batchclient.BytesInFlight(c, addr); n > peak.Load() {
				peak.Store(n)
			}
			select {
			case <-done:
				return
			case <-time.After(100 * time.Microsecond):
			}
		}
	}()
	ctx := ctxT(t, 60*time.Second)
	concurrently(t, 200, func(i int) error {
		size := 1 << 10
		if i%50 == 0 {
			size = big // larger than the window: goes alone
		}
		payload := bytes.Repeat([]byte{byte(i)}, size)
		for j := 0; j < 10; j++ {
			var reply []byte
			if err := c.Call(ctx, addr, "Echo", "Bytes", payload, &reply); err != nil {
				return err
			}
			if !bytes.Equal(reply, payload) {
				return fmt.Errorf("caller %d: the reply is not the arguments", i)
			}
		}
		return nil
	})
	close(done)
	sampler.Wait()
	t.Logf("peak bytes in flight: %d (byte window %d per lane, %d lanes)", peak.Load(), window, lanes)
	// Per lane: the window, or a lone frame of one large entry.
	assert.LessOrEqual(t, peak.Load(), int64(lanes*(big+1<<10)))
	assert.Positive(t, peak.Load())
	require.Eventually(t, func() bool { return batchclient.BytesInFlight(c, addr) == 0 }, 5*time.Second, 2*time.Millisecond,
		"bytes still in flight after every call returned: %d", batchclient.BytesInFlight(c, addr))
}
