package lane

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/codec"
)

// A retired, quiet lane is closed while a caller that picked it from the
// pool's old view has its call registered and its entry not yet offered
// (qmu is held here to keep it there, as the scheduler may): the caller
// gets ErrRetired and picks another lane; its call is never finished with
// the lane's close. (With the check and the close as two steps, Quiet then
// Close, 34 of 50 such calls ended with "lane retired" for their user.)
func TestClosedRetiredLaneLeavesRefusedCallsToTheirCallers(t *testing.T) {
	for i := 0; i < 50; i++ {
		l, _ := quietTestLane(t)
		l.Retire()
		l.qmu.Lock() // the caller's enqueue waits here
		done := make(chan *client.Call, 1)
		pc := &Pending{Call: &client.Call{ServicePath: "A", ServiceMethod: "B", Args: []byte("x"), Done: done}}
		res := make(chan error, 1)
		go func() {
			_, _, err := l.Submit(context.Background(), codec.KindCall, pc, false)
			res <- err
		}()
		for l.PendingCalls() == 0 {
			time.Sleep(10 * time.Microsecond)
		}
		l.qmu.Unlock()
		closed := l.CloseRetired()
		err := <-res
		require.NotErrorIs(t, err, ErrFinished, "round %d: the call was finished by the lane's close", i)
		require.ErrorIs(t, err, ErrRetired, "round %d", i)
		select {
		case c := <-done:
			t.Fatalf("round %d: the call was completed (%v) though its caller picks another lane", i, c.Error)
		default:
		}
		if !closed {
			require.True(t, l.CloseRetired(), "round %d: quiet once the caller left", i)
		}
		require.Zero(t, l.PendingCalls(), "round %d", i)
		require.True(t, errors.Is(l.Err(), ErrRetired), "round %d: %v", i, l.Err())
	}
}
