package batchclient_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/smallnest/rpcx/protocol"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/codec"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// TestQuietLaneCallsAmidEverythingElse: a few callers on one lane, each
// pausing a moment between its calls, so that they often find the lane
// quiet and write their own frames, amid everything else that takes the
// socket or the queue: heartbeats every few milliseconds, Go calls
// (encoded by their callers, written by the writer), a queue whose byte
// bound holds one entry but not two (callers wait for room), and at last
// the server's graceful shutdown (its drain notice, then the lane's
// close) in the middle of it. Every call ends within its bound: with its
// reply before the shutdown; after it, with its reply or the error the
// drain and the lost connection give, never by its context.
func TestQuietLaneCallsAmidEverythingElse(t *testing.T) {
	batchclient.SetCombining(t, true)
	size := codec.EntrySize(&codec.Entry{Kind: codec.KindCall, ServicePath: "Arith", ServiceMethod: "Mul",
		SerializeType: uint8(protocol.MsgPack)})
	s, _ := startServerAt(t, "127.0.0.1:0")
	addr := s.Address().String()
	c := newClient(t, batchclient.WithLanes(1), batchclient.WithHeartbeat(2*time.Millisecond, 30*time.Second),
		batchclient.WithQueueLimits(16, size*3/2), batchclient.WithReconnect(time.Second, time.Second))
	waitConnected(t, c, addr)

	// load runs callers, each making calls until n are done, stop closes
	// or a call fails otherwise than allowed; it returns those failures.
	load := func(callers, n int, stop <-chan struct{}, allowed func(error) bool) []error {
		var mu sync.Mutex
		var bad []error
		var wg sync.WaitGroup
		for g := 0; g < callers; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(g), 14))
				for i := 0; i < n; i++ {
					select {
					case <-stop:
						return
					default:
					}
					err := oneCall(c, addr, g*100000+i, rng.IntN(3) == 0)
					if err != nil && !allowed(err) {
						mu.Lock()
						bad = append(bad, fmt.Errorf("caller %d call %d: %w", g, i, err))
						mu.Unlock()
						return // one is enough: the test ends soon
					}
					// Now and then a pause: the lane goes quiet.
					if d := rng.IntN(400); d < 200 {
						time.Sleep(time.Duration(d) * time.Microsecond)
					}
				}
			}()
		}
		wg.Wait()
		return bad
	}

	before := batchclient.CallerFrames(c, addr)
	bad := load(4, 250, nil, func(error) bool { return false })
	require.Empty(t, bad, "calls failed on a healthy lane")
	require.Positive(t, batchclient.CallerFrames(c, addr)-before, "no caller wrote its own frame: the test did not test that")

	// The server shuts down gracefully in the middle of the load.
	stop := make(chan struct{})
	shut := make(chan error, 1)
	go func() {
		time.Sleep(50 * time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		shut <- s.Shutdown(ctx)
		close(stop)
	}()
	bad = load(4, 100000, stop, func(err error) bool {
		return errors.Is(err, batchclient.ErrDraining) || errors.Is(err, batchclient.ErrConnection) ||
			errors.Is(err, batchclient.ErrPeerDown)
	})
	require.NoError(t, <-shut)
	require.Empty(t, bad, "calls that ended otherwise than by a reply, the drain or the lost connection")
}

// oneCall makes one call, by Call or by Go, bounded by 5 s.
func oneCall(c *batchclient.Client, addr string, a int, byGo bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var r testsvc.Reply
	var err error
	if byGo {
		select {
		case call := <-c.Go(ctx, addr, "Arith", "Mul", &testsvc.Args{A: a, B: 3}, &r, nil).Done:
			err = call.Error
		case <-ctx.Done():
			err = ctx.Err()
		}
	} else {
		err = c.Call(ctx, addr, "Arith", "Mul", &testsvc.Args{A: a, B: 3}, &r)
	}
	if err == nil && r.C != 3*a {
		err = fmt.Errorf("reply %d, want %d", r.C, 3*a)
	}
	return err
}
