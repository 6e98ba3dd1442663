package batchserver_test

import (
	"context"
	"encoding/binary"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/codec"
)

// TestLateFrameBehindSlowSendHandler: rpcx hands each frame to a goroutine
// of its own, so on a busy machine one frame can reach the plugin after
// thousands of later ones. While a slow send handler keeps the lane's
// delivery busy, that is no sign of a peer running ahead of itself: the
// frames are held (within the in-sequence bound) and the lane is kept.
// (TestSlowSendHandlerKeepsTheLane failed this way under -race on 2 busy
// cores; here the late frame is written late on purpose.)
func TestLateFrameBehindSlowSendHandler(t *testing.T) {
	const later = 4200 // more than the 4,096 the old bound allowed behind a gap
	addr, _, p := startServer(t)
	entered, release := make(chan struct{}), make(chan struct{})
	var (
		mu   sync.Mutex
		got  []uint32
		once sync.Once
	)
	require.NoError(t, p.HandleSend("slow", func(_ context.Context, b []byte) {
		once.Do(func() {
			close(entered)
			select {
			case <-release:
			case <-time.After(20 * time.Second):
			}
		})
		mu.Lock()
		got = append(got, binary.BigEndian.Uint32(b))
		mu.Unlock()
	}))
	send := func(seq uint64) []byte {
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], uint32(seq))
		return batchMessage(frame(seq, codec.Entry{Kind: codec.KindSend, ServicePath: "slow", Payload: b[:]}))
	}
	raw := rawDial(t, addr)
	rawHandshake(t, raw)
	rawWrite(t, raw, send(1))
	select {
	case <-entered:
	case <-time.After(5 * time.Second):
		t.Fatal("the first send did not reach its handler")
	}
	// Frames 3 … later+2 first; frame 2 comes last.
	var burst []byte
	for seq := uint64(3); seq < later+3; seq++ {
		burst = append(burst, send(seq)...)
	}
	rawWrite(t, raw, burst)
	frames := p.Metrics().Get("rpcxbatch.server.frames").(interface{ Count() int64 })
	malformed := p.Metrics().Get("rpcxbatch.server.errors.malformed").(interface{ Count() int64 })
	require.True(t, eventually(20*time.Second, func() bool { return frames.Count() == later+1 || malformed.Count() > 0 }),
		"%d of %d frames reached the plugin", frames.Count(), later+1)
	rawWrite(t, raw, send(2))
	close(release)
	ok := eventually(20*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) == later+2 || malformed.Count() > 0
	})
	if malformed.Count() > 0 {
		line, _ := rpcxLog.find("closing connection from " + raw.LocalAddr().String())
		t.Fatalf("the lane was closed while its delivery was busy: %s", line)
	}
	require.True(t, ok, "not every send arrived")
	mu.Lock()
	defer mu.Unlock()
	for i, v := range got {
		assert.Equal(t, uint32(i+1), v, "position %d", i)
	}
}

// TestPeerRunningAheadClosed: a connection that sends more frames past one
// it never sends than any lane could have in flight is not a lane: it is
// closed once it holds maxHeldFrames (16,384), or when the missing frame's
// 2 s are up, whichever comes first.
func TestPeerRunningAheadClosed(t *testing.T) {
	addr, _, p := startServer(t)
	raw := rawDial(t, addr)
	rawHandshake(t, raw)
	var burst []byte
	for seq := uint64(2); seq < 4*4096+200; seq++ {
		burst = append(burst, batchMessage(frame(seq, mulEntry(0)))...)
	}
	go raw.Write(burst) // the server may close the connection before reading it all
	requireClosedByPeer(t, raw, 10*time.Second)
	assert.Positive(t, counter(t, p.Metrics(), "rpcxbatch.server.errors.malformed"))
	// Closed for holding too many frames, or (on a machine too busy to
	// read 16,000 frames in 2 s) for the missing frame; not for anything
	// else.
	line, _ := rpcxLog.find("closing connection from " + raw.LocalAddr().String())
	assert.Regexp(t, "out of sequence|never arrived", line)
}

// TestGapExpiresWhileFramesArrive: the missing frame's timer fires while
// later frames keep arriving on the connection. The timer's check and the
// frames' delivery share the held-frame table; the connection is closed
// for the missing frame, and (under -race) nothing reads the table outside
// its lock.
func TestGapExpiresWhileFramesArrive(t *testing.T) {
	addr, _, _ := startServer(t)
	raw := rawDial(t, addr)
	rawHandshake(t, raw)
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		// Frame 1 never comes; 2, 3, … arrive in bursts, across the
		// moment the gap timer fires, until the server closes the
		// connection (or, bounded, past twice the gap).
		start := time.Now()
		deadline := start.Add(2 * missingFrameTimeout)
		for seq := uint64(2); time.Now().Before(deadline); {
			// Frames in bursts every millisecond, so that some are
			// always on their way through rpcx when the timer fires;
			// paced by the clock, not by counting sleeps (Go's timers
			// are precise enough that ten a sleep reached the
			// held-frame bound within the gap), at a rate that cannot
			// reach the bound (16,384) before the loop's end:
			// framesPerMs × 4,000 ms + a burst < 16,384.
			due := 2 + framesPerMs*uint64(time.Since(start)/time.Millisecond+1)
			var burst []byte
			for ; seq < due; seq++ {
				burst = append(burst, batchMessage(frame(seq, mulEntry(0)))...)
			}
			if _, err := raw.Write(burst); err != nil {
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	requireClosedByPeer(t, raw, 3*missingFrameTimeout)
	<-closed
	line, _ := rpcxLog.find("closing connection from " + raw.LocalAddr().String())
	assert.Contains(t, line, "never arrived")
}

// framesPerMs is TestGapExpiresWhileFramesArrive's pace.
const framesPerMs = 4

// missingFrameTimeout is how long the plugin waits for a missing frame
// (conn.go's maxGap).
const missingFrameTimeout = 2 * time.Second
