package reliability_test

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/childproc"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testenv"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// sendStats asks a child server how many "seq" sends it received and how
// many of them arrived out of order for their key.
func sendStats(t *testing.T, c *batchclient.Client, addr string) (received, reordered int) {
	t.Helper()
	var r testsvc.Args
	require.NoError(t, c.Call(ctxT(t, 10*time.Second), addr, "Probe", "SendStats", &testsvc.Args{}, &r))
	return r.A, r.B
}

// sendSeq sends key's sequence numbers from..to-1, stopping at the first
// error; it returns how many were accepted.
func sendSeq(c *batchclient.Client, addr string, key, from, to uint32) int {
	ctx := batchclient.WithKey(context.Background(), string(rune('a'+key)))
	var p [8]byte
	for n := from; n < to; n++ {
		binary.BigEndian.PutUint32(p[:], key)
		binary.BigEndian.PutUint32(p[4:], n)
		if err := c.Send(ctx, addr, "seq", append([]byte(nil), p[:]...)); err != nil {
			return int(n - from)
		}
	}
	return int(to - from)
}

// A server restarted at the same address: the client reconnects to the
// new incarnation by itself, and per-key send order holds on the new
// connection. Sends that were queued or in flight on the lost connection
// are lost, not replayed (Send had returned: it is fire-and-forget); they
// are counted in errors.connection. None arrives out of order.
func TestSendOrderAcrossRestart(t *testing.T) {
	first := childproc.Start(t, testenv.RestartAddr(t))
	addr := first.Addr()
	c := newClient(t, batchclient.WithReconnect(20*time.Millisecond, 200*time.Millisecond))
	connect(t, c, addr)

	const keys, perPhase = 8, 2000
	for k := uint32(0); k < keys; k++ {
		require.Equal(t, perPhase, sendSeq(c, addr, k, 0, perPhase))
	}
	require.Eventually(t, func() bool { n, _ := sendStats(t, c, addr); return n == keys*perPhase }, 10*time.Second, 20*time.Millisecond)
	_, reordered := sendStats(t, c, addr)
	require.Zero(t, reordered)

	// Keep sending while the server is killed and restarted.
	done := make(chan int)
	go func() {
		sent := 0
		for k := uint32(0); k < keys; k++ {
			sent += sendSeq(c, addr, k, perPhase, 2*perPhase)
		}
		done <- sent
	}()
	first.Kill()
	second := childproc.Start(t, addr)
	require.NotEqual(t, first.Incarnation(), second.Incarnation())
	sentDuring := <-done
	require.Eventually(t, func() bool {
		in := c.Info(addr)
		return in.Status == batchclient.Connected && in.Incarnation == second.Incarnation()
	}, 10*time.Second, 10*time.Millisecond)

	for k := uint32(0); k < keys; k++ {
		require.Equal(t, perPhase, sendSeq(c, addr, k, 2*perPhase, 3*perPhase))
	}
	var received int
	require.Eventually(t, func() bool {
		received, reordered = sendStats(t, c, addr)
		return received >= keys*perPhase
	}, 10*time.Second, 20*time.Millisecond)
	t.Logf("restart: %d sends accepted around the restart, %d of all reached the new incarnation, %d out of order",
		sentDuring, received, reordered)
	assert.Zero(t, reordered, "sends arrived out of order after the reconnect")
	// Every send made once the new pool was up arrived, exactly once; none
	// of those the old server had received was replayed to the new one.
	assert.Equal(t, keys*perPhase, sendsIn(t, c, addr, 2*perPhase, 3*perPhase), "sends made after the reconnect lost or duplicated")
	assert.Zero(t, sendsIn(t, c, addr, 0, perPhase), "sends the old server had received were replayed to the new one")
	assert.LessOrEqual(t, sendsIn(t, c, addr, perPhase, 2*perPhase), sentDuring, "more sends of the restart phase arrived than were accepted")
}

// sendsIn asks a child server how many "seq" sends numbered from..to-1 it
// received, over all keys.
func sendsIn(t *testing.T, c *batchclient.Client, addr string, from, to int) int {
	t.Helper()
	var r testsvc.Reply
	require.NoError(t, c.Call(ctxT(t, 10*time.Second), addr, "Probe", "SendsIn", &testsvc.Args{A: from, B: to}, &r))
	return r.C
}
