package batchclient_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
)

// TestOversizeEntryIsTooLargeWhateverTheQueue: an entry bigger than the
// frame byte cap fails with ErrTooLarge at once, also when the queue is
// full, under either overflow policy: not with ErrOverloaded (which says
// "retry later", and it never fits) and not after waiting for room until
// the caller's deadline.
func TestOversizeEntryIsTooLargeWhateverTheQueue(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy batchclient.Overflow
	}{{"fail fast", batchclient.OverflowFailFast}, {"block", batchclient.OverflowBlock}} {
		t.Run(tc.name, func(t *testing.T) {
			addr := stuckServer(t)
			c := newClient(t, batchclient.WithMaxFrameBytes(256<<10), batchclient.WithQueueLimits(100, 512<<10),
				batchclient.WithOverflow(tc.policy), batchclient.WithHeartbeat(10*time.Second, 20*time.Second))
			waitConnected(t, c, addr)
			// Fill the socket and then the queue (the server never reads).
			chunk := make([]byte, 200<<10)
			filled := false
			for i := 0; i < 2000 && !filled; i++ {
				ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
				err := c.Send(ctx, addr, "sink", chunk)
				cancel()
				switch {
				case err == nil:
				case errors.Is(err, batchclient.ErrOverloaded), errors.Is(err, context.DeadlineExceeded):
					filled = true
				default:
					t.Fatalf("filling the queue: %v", err)
				}
			}
			require.True(t, filled, "the queue never filled")

			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			start := time.Now()
			err := c.Send(ctx, addr, "sink", make([]byte, 300<<10))
			require.ErrorIs(t, err, batchclient.ErrTooLarge)
			require.Less(t, time.Since(start), time.Second, "an oversize entry waited for room it can never use")
		})
	}
}
