package batchclient_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/server"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
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

// Big serves large payloads: Echo returns its argument, Make a reply of
// N bytes.
type Big struct{}

// BigArgs asks Big.Make for N bytes; Data travels to Big.Echo and back.
type BigArgs struct {
	N    int
	Data []byte
}

// Echo returns its argument.
func (Big) Echo(_ context.Context, a *BigArgs, r *BigArgs) error {
	*r = *a
	return nil
}

// Make replies N bytes.
func (Big) Make(_ context.Context, a *BigArgs, r *BigArgs) error {
	r.Data = bytes.Repeat([]byte{'r'}, a.N)
	return nil
}

// Bytes echoes a raw []byte (rpcx's SerializeNone).
func (Big) Bytes(_ context.Context, a *[]byte, r *[]byte) error {
	*r = *a
	return nil
}

// serveBig serves Big, and an AddHandler handler BigH.Echo that binds a
// BigArgs and writes it back, with the batch plugin unless plain.
func serveBig(t *testing.T, plain bool) string {
	t.Helper()
	s := server.NewServer()
	if !plain {
		_, err := batchserver.New(s)
		require.NoError(t, err)
	}
	require.NoError(t, s.RegisterName("Big", new(Big), ""))
	s.AddHandler("BigH", "Echo", func(ctx *server.Context) error {
		var a BigArgs
		if err := ctx.Bind(&a); err != nil {
			return err
		}
		return ctx.Write(&a)
	})
	addr, stop, err := testsvc.Serve(s)
	require.NoError(t, err)
	t.Cleanup(testsvc.StopWhenIdle(s, stop))
	return addr
}

// bigXClient is rpcx's XClient (plain) or the drop-in to addr for path.
func bigXClient(t *testing.T, plain bool, addr, path string, st protocol.SerializeType) client.XClient {
	t.Helper()
	d, err := client.NewPeer2PeerDiscovery("tcp@"+addr, "")
	require.NoError(t, err)
	opt := client.DefaultOption
	opt.SerializeType = st
	var xc client.XClient
	if plain {
		xc = client.NewXClient(path, client.Failfast, client.RoundRobin, d, opt)
	} else {
		xc = batchclient.NewXClient(path, client.Failfast, client.RoundRobin, d, opt)
	}
	t.Cleanup(func() { xc.Close() })
	return xc
}

// TestLargeArgAndReplyMoveAsOnPlainRPCX: rpcx v1.9.4 sets no limit on a
// message by default, and moves a 17 MiB argument and reply; so does the
// drop-in, above its 16 MiB frame cap, for a service method, an
// AddHandler handler and a raw []byte, and for a small argument whose
// reply is 17 MiB. Run beside a batch server: the plugin leaves rpcx's
// own cap (protocol.MaxMessageLength) as the user set it, so plain rpcx
// in the same process moves them too.
func TestLargeArgAndReplyMoveAsOnPlainRPCX(t *testing.T) {
	const n = 17 << 20
	before := protocol.MaxMessageLength
	addrs := map[bool]string{true: serveBig(t, true), false: serveBig(t, false)}
	require.Equal(t, before, protocol.MaxMessageLength, "batchserver.New changed rpcx's process-wide message cap")
	data := bytes.Repeat([]byte{'a'}, n)
	for _, plain := range []bool{true, false} {
		name := map[bool]string{true: "plain", false: "drop-in"}[plain]
		t.Run(name, func(t *testing.T) {
			addr := addrs[plain]
			ctx := ctxT(t, 60*time.Second)
			for _, path := range []string{"Big", "BigH"} {
				var r BigArgs
				err := bigXClient(t, plain, addr, path, protocol.MsgPack).Call(ctx, "Echo", &BigArgs{Data: data}, &r)
				require.NoError(t, err, "%s.Echo with a 17 MiB argument", path)
				require.Equal(t, n, len(r.Data), "%s.Echo's reply", path)
			}
			var r BigArgs
			require.NoError(t, bigXClient(t, plain, addr, "Big", protocol.MsgPack).Call(ctx, "Make", &BigArgs{N: n}, &r), "Big.Make: a 17 MiB reply")
			require.Equal(t, n, len(r.Data))
			var raw []byte
			require.NoError(t, bigXClient(t, plain, addr, "Big", protocol.SerializeNone).Call(ctx, "Bytes", &data, &raw), "Big.Bytes: a raw 17 MiB []byte")
			require.Equal(t, n, len(raw))
			// Go and a oneway call take the same way.
			xc := bigXClient(t, plain, addr, "Big", protocol.MsgPack)
			call, err := xc.Go(ctx, "Echo", &BigArgs{Data: data}, new(BigArgs), nil)
			require.NoError(t, err)
			<-call.Done
			require.NoError(t, call.Error, "Go with a 17 MiB argument")
			require.Equal(t, n, len(call.Reply.(*BigArgs).Data))
			require.NoError(t, xc.Call(ctx, "Echo", &BigArgs{Data: data[:10]}, new(BigArgs)), "a small call after the large ones")
		})
	}
}
