package batchclient_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// TestSharedContextCancelEndsEveryCall: many callers of Call share one
// context (as a service's request contexts share their parent's); when it
// is cancelled every call returns context.Canceled at once, over plain
// rpcx and over the batch path alike. The replies that come later are
// delivered to nobody on the batch path: neither into the cancelled
// calls' replies nor into the next calls, which reuse the client's pooled
// call state; on both paths the next calls get their own replies.
func TestSharedContextCancelEndsEveryCall(t *testing.T) {
	const (
		callers = 200
		lateMs  = 400 // the cancelled calls' replies come this late
		nextMs  = 800 // the next calls outlast the late replies
	)
	for _, plain := range []bool{true, false} {
		name := "batch"
		if plain {
			name = "plain"
		}
		t.Run(name, func(t *testing.T) {
			addr, _ := startServer(t, plain)
			c := newClient(t)
			waitConnected(t, c, addr)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			started := make(chan struct{}, callers)
			type result struct {
				err   error
				reply *testsvc.Reply
				took  time.Duration
			}
			results := make(chan result, callers)
			var cancelled time.Time
			for i := 0; i < callers; i++ {
				go func() {
					r := &testsvc.Reply{C: -1}
					started <- struct{}{}
					err := c.Call(ctx, addr, "Arith", "Sleep", &testsvc.Args{A: lateMs, B: i}, r)
					results <- result{err, r, 0}
				}()
			}
			for i := 0; i < callers; i++ {
				<-started
			}
			// Let the calls reach the server, then cancel them all.
			time.Sleep(50 * time.Millisecond)
			cancelled = time.Now()
			cancel()
			var ended []*testsvc.Reply
			for i := 0; i < callers; i++ {
				r := <-results
				require.ErrorIs(t, r.err, context.Canceled)
				ended = append(ended, r.reply)
			}
			// Far below the late replies (generous for -race on 2 busy cores).
			require.Less(t, time.Since(cancelled), lateMs*time.Millisecond/2*3, "cancelled calls returned late")

			// The next calls outlast the late replies, which arrive while
			// they wait: each must get its own reply.
			next := ctxT(t, 30*time.Second)
			concurrently(t, callers, func(i int) error {
				var r testsvc.Reply
				if err := c.Call(next, addr, "Arith", "Sleep", &testsvc.Args{A: nextMs, B: 1000 + i}, &r); err != nil {
					return err
				}
				if r.C != 1000+i {
					return fmt.Errorf("call %d got reply %d", i, r.C)
				}
				return nil
			})
			for i, r := range ended {
				// The plain fallback waits on rpcx's Go, whose reader still
				// decodes a late reply into the reply (rpcx's own Call
				// takes the call out of its pending map first): a known
				// gap of the plain path, see the clientfast notes.
				if !plain && r.C != -1 {
					t.Errorf("cancelled call %d: its reply was written after it returned (%d)", i, r.C)
				}
			}
			if t.Failed() {
				t.FailNow()
			}
		})
	}
}

// TestCallWithoutDoneChannel: a call whose context can never end (no Done
// channel) waits for its reply alone, and gets it.
func TestCallWithoutDoneChannel(t *testing.T) {
	addr, _ := startServer(t, false)
	c := newClient(t)
	waitConnected(t, c, addr)
	concurrently(t, 100, func(i int) error {
		var r testsvc.Reply
		if err := c.Call(context.Background(), addr, "Arith", "Mul", &testsvc.Args{A: i, B: 3}, &r); err != nil {
			return err
		}
		if r.C != 3*i {
			return errors.New("wrong reply")
		}
		return nil
	})
}
