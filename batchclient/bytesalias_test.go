package batchclient_test

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/group"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// byteCaller is what the SerializeNone scenarios drive: a plain rpcx
// client (group.PlainCaller) or a batch client.
type byteCaller interface {
	Call(ctx context.Context, addr, service, method string, args, reply any) error
	Go(ctx context.Context, addr, service, method string, args, reply any, done chan *client.Call) *client.Call
	Cast(ctx context.Context, addr, service, method string, args any) error
}

// Sink keeps what its handlers were given, as a key-value store keeps the
// values it is sent: the argument's own bytes (kept), and a copy taken
// when the handler ran (seen). A handler owns its argument (rpcx gives
// each request a fresh buffer), so what it kept must still read as what
// it saw when the test looks, and appending to it must not write over
// anything else.
type Sink struct {
	mu   sync.Mutex
	kept [][]byte
	seen [][]byte
}

// Put keeps b and replies with its length, as text.
func (s *Sink) Put(_ context.Context, b *[]byte, n *[]byte) error {
	s.mu.Lock()
	s.kept = append(s.kept, *b)
	s.seen = append(s.seen, bytes.Clone(*b))
	s.mu.Unlock()
	// Within its capacity, append writes in place: only the handler's own
	// bytes may be there.
	_ = append(*b, bytes.Repeat([]byte{0xEE}, 64)...)
	*n = []byte(strconv.Itoa(len(*b)))
	return nil
}

func (s *Sink) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.kept)
}

// startByteServer serves Echo and a Sink, with the batch plugin unless
// plain is set.
func startByteServer(t *testing.T, plain bool) (string, *Sink) {
	t.Helper()
	s := server.NewServer()
	if !plain {
		_, err := batchserver.New(s)
		require.NoError(t, err)
	}
	sink := new(Sink)
	require.NoError(t, s.RegisterName("Echo", new(testsvc.Echo), ""))
	require.NoError(t, s.RegisterName("Sink", sink, ""))
	addr, stop, err := testsvc.Serve(s)
	require.NoError(t, err)
	t.Cleanup(testsvc.StopWhenIdle(s, stop))
	return addr, sink
}

// byteCallers returns a plain rpcx client and a batch client, both with
// SerializeNone, and the addresses of the servers each talks to.
func byteCallers(t *testing.T) map[string]struct {
	c    byteCaller
	addr string
	sink *Sink
} {
	plainAddr, plainSink := startByteServer(t, true)
	batchAddr, batchSink := startByteServer(t, false)
	opt := client.DefaultOption
	opt.SerializeType = protocol.SerializeNone
	pc := group.NewPlainCaller(opt)
	t.Cleanup(func() { pc.Close() })
	bc := newClient(t, batchclient.WithSerializeType(protocol.SerializeNone))
	require.False(t, waitConnected(t, bc, batchAddr).Plain)
	return map[string]struct {
		c    byteCaller
		addr string
		sink *Sink
	}{
		"rpcx":  {pc, plainAddr, plainSink},
		"batch": {bc, batchAddr, batchSink},
	}
}

// pattern is the distinct payload number i of n bytes.
func pattern(i, n int) []byte {
	b := make([]byte, n)
	for j := range b {
		b[j] = byte(i*7 + j*13 + i>>8)
	}
	copy(b, fmt.Sprintf("#%d/%d#", i, n))
	return b
}

// differing counts the slices of got that differ from want.
func differing(got, want [][]byte) int {
	n := 0
	for i := range want {
		if i >= len(got) || !bytes.Equal(got[i], want[i]) {
			n++
		}
	}
	return n
}

// unexpected counts the slices of got beyond what expect says (how many
// of each content are due).
func unexpected(got [][]byte, expect map[string]int) int {
	left := maps.Clone(expect)
	n := 0
	for _, b := range got {
		if left[string(b)] == 0 {
			n++
			continue
		}
		left[string(b)]--
	}
	return n
}

// With SerializeNone, rpcx's codec passes a []byte argument through as it
// is: the caller's slice must stay the caller's. Plain rpcx copies it onto
// the wire before Go or Cast returns and never writes to it; the batch
// client must not keep it (an entry that pooled the caller's slice as its
// buffer encoded later calls into it), nor read it after Cast or Go has
// returned (the caller may reuse it then). The server's side of the same
// guarantee: a handler's []byte argument is its own, to keep and to append
// to.
func TestSerializeNoneArgumentsStayTheCallers(t *testing.T) {
	const n, size = 200, 100
	for name, tc := range byteCallers(t) {
		t.Run(name, func(t *testing.T) {
			ctx := ctxT(t, 30*time.Second)
			args := make([][]byte, n)
			for i := range args {
				args[i] = pattern(i, size)
			}
			want := make([][]byte, n)
			for i := range want {
				want[i] = bytes.Clone(args[i])
			}
			// The caller's own slices: each is passed to a call, a Go and a
			// cast, and must read the same afterwards.
			for i := range args {
				var got []byte
				require.NoError(t, tc.c.Call(ctx, tc.addr, "Sink", "Put", args[i], &got))
				require.Equal(t, strconv.Itoa(size), string(got))
				call := <-tc.c.Go(ctx, tc.addr, "Sink", "Put", args[i], &got, nil).Done
				require.NoError(t, call.Error)
				require.NoError(t, tc.c.Cast(ctx, tc.addr, "Sink", "Put", args[i]))
			}
			// One slice reused for every cast and Go, as rpcx lets a caller
			// reuse its buffer once they have returned.
			scratch := make([]byte, size)
			var gos []*client.Call
			for i := 0; i < n; i++ {
				copy(scratch, want[i])
				require.NoError(t, tc.c.Cast(ctx, tc.addr, "Sink", "Put", scratch))
				copy(scratch, want[(i+1)%n])
				goArgs := scratch
				if name == "rpcx" {
					// rpcx's Go encodes on a goroutine after it returned; the
					// batch client's encodes before (README, Semantics).
					goArgs = bytes.Clone(scratch)
				}
				gos = append(gos, tc.c.Go(ctx, tc.addr, "Sink", "Put", goArgs, new([]byte), make(chan *client.Call, 1)))
			}
			for _, call := range gos {
				<-call.Done
				require.NoError(t, call.Error)
			}
			total := 5 * n
			deadline := time.Now().Add(20 * time.Second)
			for tc.sink.count() < total {
				require.True(t, time.Now().Before(deadline), "%d of %d entries reached the sink", tc.sink.count(), total)
				time.Sleep(5 * time.Millisecond)
			}
			assert.Zero(t, differing(args, want), "of %d argument slices, this many were written over after their calls returned", n)

			tc.sink.mu.Lock()
			defer tc.sink.mu.Unlock()
			require.Len(t, tc.sink.seen, total)
			expect := make(map[string]int)
			for i := range want {
				expect[string(want[i])] += 5 // call, Go, cast, scratch cast, scratch Go
			}
			assert.Zero(t, unexpected(tc.sink.seen, expect), "of %d arguments the handlers were sent, this many were not what their callers sent", total)
			assert.Zero(t, differing(tc.sink.kept, tc.sink.seen), "of %d arguments the handlers kept, this many changed after they returned", total)
		})
	}
}

// With SerializeNone, rpcx's codec decodes a []byte reply by aliasing the
// response's bytes; plain rpcx reads every response into a fresh buffer,
// so each reply is its caller's. The batch client must give the same: a
// reply must not alias a buffer the lane (or the next call) reuses. 200
// callers each make calls and Go calls of distinct sizes (decoded by the
// lane's reader, or by the caller) and check every reply once all are done.
func TestSerializeNoneRepliesAreTheCallers(t *testing.T) {
	const callers, rounds = 200, 3
	sizes := []int{100, 1000, 10000}
	for name, tc := range byteCallers(t) {
		t.Run(name, func(t *testing.T) {
			ctx := ctxT(t, 30*time.Second)
			var mu sync.Mutex
			var got, want [][]byte
			concurrently(t, callers, func(i int) error {
				var mine, exp [][]byte
				for r := 0; r < rounds; r++ {
					for k, size := range sizes {
						id := (i*rounds+r)*len(sizes) + k
						var reply []byte
						if err := tc.c.Call(ctx, tc.addr, "Echo", "Bytes", pattern(id, size), &reply); err != nil {
							return err
						}
						mine, exp = append(mine, reply), append(exp, pattern(id, size))
						var viaGo []byte
						call := <-tc.c.Go(ctx, tc.addr, "Echo", "Bytes", pattern(id+1<<20, size), &viaGo, nil).Done
						if call.Error != nil {
							return call.Error
						}
						mine, exp = append(mine, viaGo), append(exp, pattern(id+1<<20, size))
					}
				}
				mu.Lock()
				got, want = append(got, mine...), append(want, exp...)
				mu.Unlock()
				return nil
			})
			require.Zero(t, differing(got, want), "of %d replies, this many were not the caller's once all calls were done", len(want))
		})
	}
}
