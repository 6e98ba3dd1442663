package batchserver_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/share"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/codec"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/childproc"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// deepArgs is Arith.Mul's argument with one more field, "X", holding an
// array nested depth deep: msgpack skips the unknown field by recursion.
func deepArgs(depth int) []byte {
	b := []byte{0x83, 0xa1, 'A', 0x06, 0xa1, 'B', 0x07, 0xa1, 'X'}
	b = append(b, bytes.Repeat([]byte{0x91}, depth)...)
	return append(b, 0x01)
}

// plainMul is a plain rpcx request to Arith.Mul with payload.
func plainMul(payload []byte) []byte {
	h := reqHeader(false)
	h.SetSerializeType(protocol.MsgPack)
	return codec.AppendMessage(nil, h, "Arith", "Mul", nil, payload)
}

// mulWorks makes a plain rpcx call to addr's Arith.Mul.
func mulWorks(t *testing.T, addr string) {
	t.Helper()
	c := client.NewClient(client.DefaultOption)
	require.NoError(t, c.Connect("tcp", addr))
	defer c.Close()
	var r testsvc.Reply
	require.NoError(t, c.Call(ctxT(t, 5*time.Second), "Arith", "Mul", &testsvc.Args{A: 6, B: 7}, &r))
	require.Equal(t, 42, r.C)
}

// TestDeepNestingKillsNoServer: one message of 14 MiB nesting an array
// 14.7 million deep in an argument overflows msgpack's recursive decode,
// a fatal error that kills the server process, plain rpcx's (run in a
// child process here, which the attack kills). The batch server checks
// every entry's nesting before decoding it: the entry gets an error
// reply, the entries beside it run, and the server goes on. A plain
// server with batchserver.DepthGuard among its plugins refuses the
// request instead (rpcx closes that connection) and goes on too.
func TestDeepNestingKillsNoServer(t *testing.T) {
	const depth = 14_700_000
	attack := deepArgs(depth)
	require.NoError(t, share.Codecs[protocol.MsgPack].Decode(deepArgs(100), new(testsvc.Args)), "the argument decodes when shallow")

	t.Run("plain rpcx dies", func(t *testing.T) {
		ch := childproc.StartWith(t, "127.0.0.1:0", childproc.Options{Plain: true})
		raw := rawDial(t, ch.Addr())
		rawWrite(t, raw, plainMul(attack))
		select {
		case <-ch.Exited():
		case <-time.After(60 * time.Second):
			t.Fatal("the plain server survived the attack: the test no longer shows the crash")
		}
		// (Its stderr begins with "runtime: goroutine stack exceeds".)
	})

	t.Run("plain rpcx with DepthGuard", func(t *testing.T) {
		ch := childproc.StartWith(t, "127.0.0.1:0", childproc.Options{Plain: true, DepthGuard: true})
		raw := rawDial(t, ch.Addr())
		rawWrite(t, raw, plainMul(attack))
		requireClosedByPeer(t, raw, 30*time.Second)
		mulWorks(t, ch.Addr())
		select {
		case <-ch.Exited():
			t.Fatalf("the guarded server died: %s", ch.Stderr())
		default:
		}
	})

	t.Run("batch server", func(t *testing.T) {
		ch := childproc.Start(t, "127.0.0.1:0")
		raw := rawDial(t, ch.Addr())
		rawHandshake(t, raw)
		bad := mulEntry(2)
		bad.Payload = attack
		rawWrite(t, raw, batchMessage(frame(1, mulEntry(1), bad, mulEntry(3))))
		got, _ := rawReadReplies(t, raw, 3, 30*time.Second)
		require.Len(t, got, 3)
		for _, id := range []uint64{1, 3} {
			require.Equal(t, codec.StatusOK, got[id].Status, "entry %d: %s", id, got[id].Error)
		}
		require.Equal(t, codec.StatusError, got[2].Status)
		assert.True(t, strings.Contains(got[2].Error, batchserver.ErrTooDeep.Error()), "entry 2: %q", got[2].Error)
		// The lane goes on, and so does the server.
		rawWrite(t, raw, batchMessage(frame(2, mulEntry(4))))
		got, _ = rawReadReplies(t, raw, 1, 10*time.Second)
		require.Equal(t, codec.StatusOK, got[4].Status, got[4].Error)
		mulWorks(t, ch.Addr())
		select {
		case <-ch.Exited():
			t.Fatalf("the batch server died: %s", ch.Stderr())
		default:
		}
	})
}
