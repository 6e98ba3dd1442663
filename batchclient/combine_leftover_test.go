package batchclient_test

import (
	"bytes"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/codec"
)

// TestCallerFrameLeftoverFinishedByLane: a caller writing its own frame
// to a peer that has stopped reading writes what the socket takes within
// its bound and leaves the rest to the lane's writer goroutine; calls made
// meanwhile (Call, whose arguments the writer encodes, and Go, whose
// caller encodes them) queue behind it, and heartbeats fall due (every
// 10 ms here). Once the peer reads again, it must read every frame whole
// and in order: the big call's arguments intact, nothing written in the
// middle of its frame (the scripted server reads the stream message by
// message: a broken one ends the connection, and the lane with it), every
// call read once and answered, on the same connection. Three rounds, each
// with a big call its caller wrote itself.
func TestCallerFrameLeftoverFinishedByLane(t *testing.T) {
	batchclient.SetCombining(t, true)
	var mu sync.Mutex
	seen := map[uint64]int{} // call ids the server read, and how often
	backend := startScripted(t, func(entries []codec.Entry, reply func(inc uint64, rs ...codec.Reply)) {
		var rs []codec.Reply
		mu.Lock()
		for _, e := range entries {
			seen[e.ID]++
			rs = append(rs, codec.Reply{ID: e.ID, Payload: e.Payload}) // an echo
		}
		mu.Unlock()
		if len(rs) > 0 {
			reply(scriptedIncarnation, rs...)
		}
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	px := &gateProxy{ln: ln, done: make(chan struct{})}
	t.Cleanup(func() { close(px.done) })
	go px.run(t, backend)
	addr := ln.Addr().String()

	c := newClient(t, batchclient.WithLanes(1), batchclient.WithHeartbeat(20*time.Millisecond, time.Minute))
	waitConnected(t, c, addr)
	ctx := ctxT(t, 60*time.Second)
	var out []byte
	require.NoError(t, c.Call(ctx, addr, "Echo", "Bytes", []byte("warm"), &out))
	conn := batchclient.LaneConn(c, addr)

	const rounds, callers, goers = 3, 20, 10
	bigCalls := 0 // big calls made, including those the writer took
	for round := 0; round < rounds; round++ {
		bigDone := make(chan error, 1)
		// The caller writes its own frame only if it finds the lane quiet
		// the moment it queues: a heartbeat (every 10 ms while the peer is
		// paused) may hold the socket just then, and the writer goroutine
		// takes the frame instead. That round tests nothing: let it end
		// and make the big call again.
		for attempt := 1; ; attempt++ {
			px.c2sPaused.Store(true)
			before := batchclient.CallerFrames(c, addr)
			beforeWriter := batchclient.WriterFrames(c, addr)
			// Larger than the sockets' buffers: not taken whole in 5 ms.
			big := bytes.Repeat([]byte{byte('a' + round)}, 12<<20)
			bigCalls++
			go func() {
				var r []byte
				err := c.Call(ctx, addr, "Echo", "Bytes", big, &r)
				if err == nil && !bytes.Equal(r, big) {
					err = fmt.Errorf("the big call's echo differs (%d bytes)", len(r))
				}
				bigDone <- err
			}()
			byCaller := false
			pollFor(t, 20*time.Second, "the big call's frame to be begun", func() bool {
				byCaller = batchclient.CallerFrames(c, addr) == before+1
				return byCaller || batchclient.WriterFrames(c, addr) > beforeWriter
			})
			if byCaller {
				break
			}
			t.Logf("round %d attempt %d: taken by the writer", round, attempt)
			require.Less(t, attempt, 20, "round %d: the writer took the big call's frame %d times in a row", round, attempt)
			px.c2sPaused.Store(false)
			require.NoError(t, <-bigDone, "round %d: the big call the writer took", round)
		}

		// Queued behind the frame's end while the peer reads nothing.
		errs := make(chan error, callers+goers)
		for i := 0; i < callers; i++ {
			go func() {
				var r []byte
				arg := []byte(fmt.Sprintf("round %d call %d", round, i))
				err := c.Call(ctx, addr, "Echo", "Bytes", arg, &r)
				if err == nil && !bytes.Equal(r, arg) {
					err = fmt.Errorf("call %q: reply %q", arg, r)
				}
				errs <- err
			}()
		}
		for i := 0; i < goers; i++ {
			go func() {
				var r []byte
				arg := []byte(fmt.Sprintf("round %d go %d", round, i))
				call := <-c.Go(ctx, addr, "Echo", "Bytes", arg, &r, nil).Done
				err := call.Error
				if err == nil && !bytes.Equal(r, arg) {
					err = fmt.Errorf("go %q: reply %q", arg, r)
				}
				errs <- err
			}()
		}
		pollFor(t, 20*time.Second, "the calls queued", func() bool {
			_, queued := batchclient.RoomWaiters(c, addr)
			return queued == callers+goers
		})
		select {
		case err := <-bigDone:
			t.Fatalf("round %d: the big call ended while its peer read nothing: %v", round, err)
		default:
		}

		px.c2sPaused.Store(false)
		require.NoError(t, <-bigDone, "round %d: the big call", round)
		for i := 0; i < callers+goers; i++ {
			require.NoError(t, <-errs, "round %d", round)
		}
	}
	require.Equal(t, conn, batchclient.LaneConn(c, addr), "the lane was lost: a frame arrived broken")
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, seen, 1+bigCalls+rounds*(callers+goers), "calls the server read")
	for id, n := range seen {
		require.Equal(t, 1, n, "call %d read %d times", id, n)
	}
}

// pollFor waits until cond holds, failing the test after d.
func pollFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", d, what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
