package batchclient_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"
)

// SlowArgs are arguments whose encoder takes its time, and says when it
// is done with them.
type SlowArgs struct {
	A       int
	encoded *atomic.Bool
}

// EncodeMsgpack encodes A after a pause, then records that it is done.
func (a *SlowArgs) EncodeMsgpack(e *msgpack.Encoder) error {
	time.Sleep(200 * time.Millisecond)
	err := e.Encode(map[string]int{"A": a.A, "B": 1})
	a.encoded.Store(true)
	return err
}

// TestCastEncodesArgsBeforeReturning: Cast is done with its arguments when
// it returns, whether the context ended meanwhile or not: over lanes it
// encodes them on the caller's goroutine, and so it does on the plain
// fallback, where rpcx would encode them on a goroutine of its own that
// was still reading them after Cast returned on the context's end.
func TestCastEncodesArgsBeforeReturning(t *testing.T) {
	batchAddr, _ := startServer(t, false)
	plainAddr, _ := startServer(t, true)
	c := newClient(t)
	require.False(t, waitConnected(t, c, batchAddr).Plain)
	require.True(t, waitConnected(t, c, plainAddr).Plain)
	for name, addr := range map[string]string{"lanes": batchAddr, "plain fallback": plainAddr} {
		args := &SlowArgs{A: 3, encoded: new(atomic.Bool)}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		_ = c.Cast(ctx, addr, "Arith", "Mul", args)
		cancel()
		require.True(t, args.encoded.Load(), "%s: Cast returned while its arguments were still being encoded", name)
	}
}
