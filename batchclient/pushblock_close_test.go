package batchclient_test

import (
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/protocol"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// With BidirectionalBlock a lane's reader waits for room in a push channel
// nobody reads; a Close of the Client, or a Stop of that address, ends
// the wait (as the README says): it returns, and the call waiting behind
// the push returns instead of hanging: with an error, or with its reply
// when the reader, let go by Stop, read the reply already on the wire
// before the lane's end reached the call (seen once under load: a reply
// that arrived is no error). (Plain rpcx's reader stays blocked on the
// channel for good, and its Close does not end that goroutine.)
func TestBlockedPushWaitEndedByCloseAndStop(t *testing.T) {
	for _, end := range []string{"Close", "Stop"} {
		addr, _, _ := newPushServer(t, false)
		opt := client.DefaultOption
		opt.BidirectionalBlock = true
		c := newClient(t, batchclient.WithRPCXOption(opt))
		ch := make(chan *protocol.Message, 1) // room for the first push only
		c.RegisterServerMessageChan(addr, ch)

		done := make(chan error, 1)
		var reply testsvc.PushReply
		go func() {
			done <- c.Call(ctxT(t, 30*time.Second), addr, "Pusher", "Push", &testsvc.PushArgs{N: 3, Tag: "b"}, &reply)
		}()
		require.Eventually(t, func() bool { return len(ch) == 1 }, 10*time.Second, time.Millisecond,
			"%s: the first push never arrived", end)
		// The server wrote the other pushes and the reply right after the
		// first: a call still waiting shows the reader is held by push 2.
		select {
		case err := <-done:
			t.Fatalf("%s: the call returned (%v) while its pushes were not taken", end, err)
		case <-time.After(300 * time.Millisecond):
		}

		ended := make(chan struct{})
		go func() {
			defer close(ended)
			if end == "Close" {
				c.Close()
			} else {
				c.Stop(addr)
			}
		}()
		select {
		case <-ended:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s did not return while the reader waited for the channel", end)
		}
		select {
		case err := <-done:
			if err == nil {
				require.Equal(t, testsvc.PushReply{N: 3, Tag: "b"}, reply, "%s: the call behind the blocked push succeeded with another reply", end)
			}
			t.Logf("%s: the call ended with %v", end, err)
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the call behind the blocked push never returned", end)
		}
	}
}
