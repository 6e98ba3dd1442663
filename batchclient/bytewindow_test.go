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

// What a lane's writer sends at once under a byte window: entries while
// the frame (header included) fits beside the bytes in flight; one entry
// of any size when nothing is in flight; everything (within the frame
// cap) when the server granted no byte window, as with an older server.
func TestByteWindowFit(t *testing.T) {
	const h = batchclient.MaxBatchHeader
	for _, tc := range []struct {
		name             string
		limit, inflight  int64
		frameBytes, want int
		sizes            []int
	}{
		{"no window", 0, 1 << 30, 1 << 20, 3, []int{100, 100, 100}},
		{"no window, frame cap", 0, 0, 250, 2, []int{100, 100, 100}},
		{"fits", 1000, 0, 1 << 20, 3, []int{100, 100, 100}},
		{"fits exactly", 300 + h, 0, 1 << 20, 3, []int{100, 100, 100}},
		{"one byte short", 300 + h - 1, 0, 1 << 20, 2, []int{100, 100, 100}},
		{"beside in flight", 1000, 700, 1 << 20, 2, []int{100, 100, 100}},
		{"full", 1000, 950, 1 << 20, 0, []int{100}},
		{"lone entry beyond the window", 1000, 0, 1 << 20, 1, []int{5000, 1}},
		{"large entry waits while others are in flight", 1000, 1, 1 << 20, 0, []int{5000}},
	} {
		got := batchclient.ByteWindowFit(tc.limit, tc.inflight, tc.frameBytes, tc.sizes...)
		assert.Equal(t, tc.want, got, tc.name)
	}
}

// A writer that held back a Call's entry unencoded while the window was
// full, and finds the window empty when it fits (the last credit came in
// between), encodes and writes it: no credit is on its way to wake it. It
// waited (TestBytesInFlightStayWithinTheWindow hung once in about 90 runs,
// 45 of 200 callers to their deadline). With bytes still in flight and no
// room, it waits for their credit.
func TestByteWindowWriterDoesNotWaitWithRoom(t *testing.T) {
	assert.False(t, batchclient.ByteWindowWriterWaits(1000, 0), "window empty")
	assert.False(t, batchclient.ByteWindowWriterWaits(1000, 500), "room left")
	assert.True(t, batchclient.ByteWindowWriterWaits(1000, 1000), "window full")
}

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
	t.Cleanup(stop)
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
