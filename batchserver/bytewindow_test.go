package batchserver_test

import (
	"bytes"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/codec"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// rawHandshakeMeta performs the batch handshake on a raw connection with
// the given request metadata and returns the response's metadata.
func rawHandshakeMeta(t testing.TB, c net.Conn, meta map[string]string) map[string]string {
	t.Helper()
	rawWrite(t, c, codec.AppendMessage(nil, reqHeader(false), codec.ServicePath, codec.MethodHandshake, meta, nil))
	require.NoError(t, c.SetReadDeadline(time.Now().Add(3*time.Second)))
	for i := 0; i < 16; i++ {
		msg, _, err := codec.ReadMessage(c, 1<<20, nil)
		require.NoError(t, err)
		if msg.Header.MessageType() != protocol.Response || msg.Header.IsHeartbeat() {
			continue
		}
		_, err = codec.DecodeHandshake(msg.Payload)
		require.NoError(t, err)
		return msg.Metadata
	}
	t.Fatal("no handshake response")
	return nil
}

// rawCredits reads credit messages from c until they hand back entries
// entries (or d passes), decoding each with decode, and returns the
// entries and bytes they handed back.
func rawCredits(t testing.TB, c net.Conn, entries uint64, d time.Duration, decode func([]byte) (n, b uint64, err error)) (gotN, gotB uint64) {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(d)))
	for gotN < entries {
		msg, _, err := codec.ReadMessage(c, 1<<20, nil)
		require.NoError(t, err, "after %d of %d entries credited", gotN, entries)
		if msg.ServicePath != codec.ServicePath || msg.ServiceMethod != codec.MethodCredit {
			continue
		}
		n, b, err := decode(msg.Payload)
		require.NoError(t, err)
		gotN, gotB = gotN+n, gotB+b
	}
	return gotN, gotB
}

// The server grants its byte window in the handshake metadata. A lane
// that announced byte credits gets each frame's bytes (its rpcx payload)
// back once the frame's entries have run; a client that did not (an
// older one) gets the credit message it knows, of entries only.
func TestByteWindowGrantAndCredits(t *testing.T) {
	const window = 1 << 20
	addr, h, _ := startHolder(t, batchserver.WithWindowBytes(window), batchserver.WithPoolSize(1))

	newer, older := rawDial(t, addr), rawDial(t, addr)
	meta := rawHandshakeMeta(t, newer, map[string]string{codec.MetaByteCredits: "1"})
	assert.Equal(t, strconv.Itoa(window), meta[codec.MetaWindowBytes])
	rawHandshake(t, older)

	payload := make([]byte, 100<<10)
	var sent uint64
	for seq := uint64(1); seq <= 3; seq++ {
		f := frame(seq, holderCast(payload), holderCast(payload))
		sent += uint64(len(f))
		rawWrite(t, newer, batchMessage(f))
		rawWrite(t, older, batchMessage(f))
	}
	require.True(t, eventually(10*time.Second, func() bool { return h.started.Load() == 12 }), "%d of 12 casts started", h.started.Load())
	h.Release()

	n, b := rawCredits(t, newer, 6, 10*time.Second, func(p []byte) (uint64, uint64, error) {
		_, n, b, err := codec.DecodeCreditBytes(p)
		return n, b, err
	})
	assert.Equal(t, uint64(6), n)
	assert.Equal(t, sent, b, "the bytes handed back are the frames' payloads")
	n, _ = rawCredits(t, older, 6, 10*time.Second, func(p []byte) (uint64, uint64, error) {
		_, n, err := codec.DecodeCredit(p) // the three-field form an older client reads
		return n, 0, err
	})
	assert.Equal(t, uint64(6), n)
}

// A frame larger than the byte window is taken when the connection holds
// nothing else (a lane sends a large entry alone, so that it cannot
// stall), but not beside other unfinished frames.
func TestLoneFrameBeyondTheByteWindow(t *testing.T) {
	const window = 64 << 10
	addr, h, p := startHolder(t, batchserver.WithWindowBytes(window), batchserver.WithPoolSize(1))
	big := make([]byte, 1<<20)

	alone := rawDial(t, addr)
	rawHandshakeMeta(t, alone, map[string]string{codec.MetaByteCredits: "1"})
	rawWrite(t, alone, batchMessage(frame(1, holderCast(big))))
	require.True(t, eventually(10*time.Second, func() bool { return h.started.Load() == 1 }), "the lone frame did not run")

	beside := rawDial(t, addr)
	rawHandshake(t, beside)
	rawWrite(t, beside, batchMessage(frame(1, holderCast(make([]byte, 10)))))
	require.True(t, eventually(10*time.Second, func() bool { return h.started.Load() == 2 }), "a small frame did not run")
	rawWrite(t, beside, batchMessage(frame(2, holderCast(big))))
	requireClosedByPeer(t, beside, 10*time.Second)
	_, found := rpcxLog.find("closing connection from "+beside.LocalAddr().String(), "byte window")
	require.True(t, found, "the connection was not closed for its byte window")

	// Once the lone frame's entry ran, its bytes come back, and the next
	// one goes alone again.
	h.Release()
	_, b := rawCredits(t, alone, 1, 10*time.Second, func(p []byte) (uint64, uint64, error) {
		_, n, b, err := codec.DecodeCreditBytes(p)
		return n, b, err
	})
	assert.Equal(t, uint64(len(frame(1, holderCast(big)))), b)
	rawWrite(t, alone, batchMessage(frame(2, holderCast(big))))
	require.True(t, eventually(10*time.Second, func() bool { return h.started.Load() == 3 }), "the second lone frame did not run")
	assert.Equal(t, int64(1), counter(t, p.Metrics(), "rpcxbatch.server.errors.malformed"), "only the connection beside was closed")
}

// Many small calls through a small byte window: every call succeeds, the
// client never makes the server hold more than the window, and nothing
// stays in flight after.
func TestManySmallCallsWithinTheByteWindow(t *testing.T) {
	const (
		window  = 32 << 10 // about a hundred calls of the data payload
		callers = 500
		each    = 20
	)
	addr, _, p := startServer(t, batchserver.WithWindowBytes(window), batchserver.WithPoolSize(2))
	c := newClient(t)
	waitConnected(t, c, addr)

	var peak atomic.Int64
	stop := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Add(1)
	go func() {
		defer sampler.Done()
		for {
			if n := batchserver.HeldBytes(p); n > peak.Load() {
				peak.Store(n)
			}
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Microsecond):
			}
		}
	}()
	ctx := ctxT(t, 60*time.Second)
	concurrently(t, callers, func(i int) error {
		for j := 0; j < each; j++ {
			args, reply := testsvc.NewData(i*each+j), new(testsvc.Data)
			if err := c.Call(ctx, addr, "Echo", "Data", args, reply); err != nil {
				return err
			}
			if *reply != *args {
				return fmt.Errorf("call %d: the reply is not the arguments", i*each+j)
			}
		}
		return nil
	})
	close(stop)
	sampler.Wait()
	t.Logf("peak bytes held by the server: %d (byte window %d per lane, 2 lanes)", peak.Load(), window)
	assert.LessOrEqual(t, peak.Load(), int64(2*window), "the lanes went beyond their byte window")
	assert.Zero(t, counter(t, p.Metrics(), "rpcxbatch.server.errors.malformed"), "a lane was closed")
	assert.True(t, eventually(5*time.Second, func() bool { return batchserver.HeldBytes(p) == 0 }), "frames still held after every call returned")
}

// Entries larger than the byte window go alone, one after the other, and
// all get through: calls (their arguments encoded by the lane's writer)
// and casts.
func TestEntriesLargerThanTheByteWindow(t *testing.T) {
	const window = 64 << 10
	addr, _, p := startServer(t, batchserver.WithWindowBytes(window), batchserver.WithPoolSize(1))
	c := newClient(t)
	waitConnected(t, c, addr)
	ctx := ctxT(t, 60*time.Second)
	big := make([]byte, 512<<10)
	for i := range big {
		big[i] = byte(i)
	}
	concurrently(t, 16, func(i int) error {
		if i%2 == 0 {
			return c.Cast(ctx, addr, "Echo", "Bytes", big)
		}
		var reply []byte
		if err := c.Call(ctx, addr, "Echo", "Bytes", big, &reply); err != nil {
			return err
		}
		if !bytes.Equal(reply, big) {
			return fmt.Errorf("caller %d: the reply is not the arguments", i)
		}
		return nil
	})
	assert.Zero(t, counter(t, p.Metrics(), "rpcxbatch.server.errors.malformed"), "a lane was closed")
	assert.True(t, eventually(5*time.Second, func() bool { return batchserver.HeldBytes(p) == 0 }), "frames still held after every entry ran")
}

func TestWindowBytesOption(t *testing.T) {
	_, p := newServer(t)
	assert.Equal(t, batchserver.DefaultWindowBytes, p.Options().WindowBytes)
	assert.Equal(t, 8<<20, batchserver.DefaultWindowBytes, "the heap test's bound assumes it")
	for _, n := range []int{0, -1} {
		_, err := batchserver.New(server.NewServer(), batchserver.WithWindowBytes(n))
		assert.ErrorIs(t, err, batchserver.ErrInvalidOption, "%d", n)
	}
}
