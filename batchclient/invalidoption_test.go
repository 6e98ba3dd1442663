package batchclient_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
)

// TestEveryInvalidOptionIsErrInvalidOption: New refuses every option
// value it cannot honour with an error that wraps ErrInvalidOption, as
// its doc says (issue 44, item 6: the size, duration and overflow checks
// returned errors of their own).
func TestEveryInvalidOptionIsErrInvalidOption(t *testing.T) {
	for name, opt := range map[string]batchclient.Option{
		"lanes":             batchclient.WithLaneRange(3, 2),
		"negative queue":    batchclient.WithQueueLimits(-1, 0),
		"heartbeat":         batchclient.WithHeartbeat(time.Second, time.Second),
		"reconnect":         batchclient.WithReconnect(time.Second, time.Millisecond),
		"overflow":          batchclient.WithOverflow(batchclient.Overflow(99)),
		"compress":          batchclient.WithCompress(99),
		"idle memory":       batchclient.WithIdleMemoryRelease(-time.Second),
		"dial timeout":      batchclient.WithDialTimeout(-time.Second),
		"negative batchcap": batchclient.WithBatchCap(-1),
	} {
		c, err := batchclient.New(opt)
		if c != nil {
			c.Close()
		}
		require.ErrorIs(t, err, batchclient.ErrInvalidOption, name)
	}
}
