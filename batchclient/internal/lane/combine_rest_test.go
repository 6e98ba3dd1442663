package lane

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	metrics "github.com/rcrowley/go-metrics"
	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/protocol"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/codec"
)

// A caller's bounded write of its own frame that the socket did not take
// whole leaves the frame's end to the lane's writer goroutine (ws.rest),
// which writes it either in its next round of frames (flush) or, when the
// tick comes first, in its heartbeat. Either way the end must be the next
// bytes on the socket, whole: nothing lost, and nothing (a heartbeat, the
// next frame) between the frame's two parts; and once the frame is whole
// its queue bytes are given back.
//
// The lane here runs without its goroutines, so that the test picks who
// finishes the frame; the peer is a loopback socket that reads nothing
// until the caller has handed its frame's end over.
func TestCallerFrameEndWrittenWholeFirst(t *testing.T) {
	for _, by := range []string{"writer", "heartbeat"} {
		t.Run(by, func(t *testing.T) {
			l, peer := quietTestLane(t)
			big := bytes.Repeat([]byte("0123456789abcdef"), 1<<18) // 4 MiB
			done := make(chan *client.Call, 1)
			pc := &Pending{Call: &client.Call{ServicePath: "Echo", ServiceMethod: "Bytes", Args: big, Done: done}}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			id, d, err := l.Submit(ctx, codec.KindCall, pc, true)
			require.NoError(t, err)
			defer d.Withdraw()
			require.EqualValues(t, 1, l.CallerFrames(), "the caller wrote its frame itself")
			l.qmu.Lock()
			rest, inWrite := len(l.ws.rest), l.inWrite
			l.qmu.Unlock()
			require.Positive(t, rest, "the peer took the whole frame: no end was left to finish")
			require.Positive(t, inWrite, "the frame's bytes count while its end is unwritten")

			// Queued behind the frame's end: casts the writer batches.
			const casts = 3
			for i := 0; i < casts; i++ {
				cast := &Pending{Call: &client.Call{ServicePath: "Arith", ServiceMethod: "Mul", Args: []byte(fmt.Sprintf("cast %d", i))}}
				_, _, err := l.Submit(ctx, codec.KindCast, cast, false)
				require.NoError(t, err)
			}

			msgs := peer.read(t)
			if by == "heartbeat" {
				// Due at once: nothing heard for HeartbeatInterval. It
				// takes the socket itself.
				require.NoError(t, l.heartbeat())
				l.qmu.Lock()
				inWrite = l.inWrite
				l.qmu.Unlock()
				assert.Zero(t, inWrite, "the frame is whole: its bytes still count against QueueBytes")
			}
			// The writer's round, as writeLoop runs it.
			require.True(t, l.acquireSocket())
			require.NoError(t, l.flush(&l.ws, time.Time{}, -1))
			l.releaseSocket()

			want := []string{fmt.Sprintf("frame 1: call %d (%d bytes)", id, len(big))}
			if by == "heartbeat" {
				want = append(want, "heartbeat")
			}
			want = append(want, "frame 2: cast 0, cast 1, cast 2")
			var got []string
			for range want {
				select {
				case m := <-msgs:
					got = append(got, m)
				case <-time.After(20 * time.Second):
					t.Fatalf("the peer read %q, then nothing; want %q", got, want)
				}
			}
			require.Equal(t, want, got)
			require.Equal(t, big, peer.callPayload(), "the call's payload on the wire")
		})
	}
}

// testPeer is the far end of a lane's connection: it reads nothing until
// read is called, then reads message after message, strictly.
type testPeer struct {
	conn    net.Conn
	payload atomic.Pointer[[]byte] // the first call entry's payload
}

// quietTestLane is a lane on a loopback connection to a peer that reads
// nothing yet, without its writer and reader goroutines; flat combining
// on, heartbeats due after a millisecond of silence, a peer judged frozen
// only after a minute. Small socket buffers, so that a frame of a few MiB
// is not taken at once.
func quietTestLane(t *testing.T) (*Lane, *testPeer) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	cc, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	sc, err := ln.Accept()
	require.NoError(t, err)
	require.NoError(t, cc.(*net.TCPConn).SetWriteBuffer(64<<10))
	require.NoError(t, sc.(*net.TCPConn).SetReadBuffer(64<<10))
	was := SetCombining(true)
	t.Cleanup(func() { SetCombining(was) })
	cfg := Config{
		BatchCap: 64, MaxFrameBytes: 16 << 20, QueueEntries: 64, QueueBytes: 64 << 20,
		HeartbeatInterval: time.Millisecond, HeartbeatTimeout: time.Minute,
		SerializeType: protocol.SerializeNone,
		Metrics: Metrics{
			Frames: metrics.NilCounter{}, BatchSize: metrics.NilHistogram{}, QueueDepth: metrics.NilGauge{},
			ErrOverload: metrics.NilCounter{}, ErrConn: metrics.NilCounter{}, ErrStale: metrics.NilCounter{},
			ErrService: metrics.NilCounter{}, ErrCodec: metrics.NilCounter{}, ErrDrain: metrics.NilCounter{},
		},
		Auth:  func() string { return "" },
		Woken: new(atomic.Int64),
	}
	hs := codec.Handshake{Version: codec.Version, BatchCap: 64, MaxFrameBytes: 16 << 20, Incarnation: 1, Window: 1024}
	l := newLane(cfg, "test", cc, hs)
	t.Cleanup(func() {
		l.Close(fmt.Errorf("%w: test over", ErrConnection))
		sc.Close()
	})
	return l, &testPeer{conn: sc}
}

// read starts reading: each message read is described on the channel
// returned ("heartbeat", or a batch frame's sequence and entries); a
// message that does not parse ends the reading with its error.
func (p *testPeer) read(t *testing.T) <-chan string {
	out := make(chan string, 16)
	go func() {
		br := bufio.NewReader(p.conn)
		for {
			msg, _, err := codec.ReadMessage(br, 64<<20, nil)
			if err != nil {
				out <- fmt.Sprintf("read: %v", err)
				return
			}
			if msg.Header.IsHeartbeat() {
				out <- "heartbeat"
				continue
			}
			if msg.ServiceMethod != codec.MethodBatch {
				out <- fmt.Sprintf("unexpected %s.%s", msg.ServicePath, msg.ServiceMethod)
				continue
			}
			seq, entries, err := codec.DecodeBatch(msg.Payload, 0)
			if err != nil {
				out <- fmt.Sprintf("frame: %v", err)
				return
			}
			s := fmt.Sprintf("frame %d: ", seq)
			for i, e := range entries {
				if i > 0 {
					s += ", "
				}
				if e.Kind == codec.KindCall {
					b := append([]byte(nil), e.Payload...)
					p.payload.CompareAndSwap(nil, &b)
					s += fmt.Sprintf("call %d (%d bytes)", e.ID, len(e.Payload))
				} else {
					s += string(e.Payload)
				}
			}
			out <- s
		}
	}()
	return out
}

// callPayload is the payload of the first call entry the peer read.
func (p *testPeer) callPayload() []byte {
	if b := p.payload.Load(); b != nil {
		return *b
	}
	return nil
}
