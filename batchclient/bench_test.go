package batchclient_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/server"
	"github.com/smallnest/rpcx/share"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// BenchmarkCall runs the same Echo.Data call (the ~220-byte msgpack "data"
// payload each way) over four paths side by side: plain rpcx's Client
// ("plain") and its XClient ("plainx"), the direct batch Client ("batch")
// and the drop-in XClient users switch to ("dropin"),
// at 1, 100, 1,000 and 10,000 concurrent goroutines, against one server
// process-local on loopback that has the batch plugin (so both paths meet
// the same server). It reports calls/s, CPU µs per call (both sides), and
// write syscalls per call on the server side (counted on its connections)
// and the client side (batch: frames written, one Write each; plain: the
// process's write syscalls less the server's).
func BenchmarkCall(b *testing.B) {
	addr, wc := serveEcho(b)

	for _, g := range []int{1, 100, 1000, 10000} {
		for _, path := range benchPaths {
			b.Run(fmt.Sprintf("g=%d/%s", g, path), func(b *testing.B) {
				call, frames := dialPath(b, path, addr)
				benchCalls(b, g, wc, call, frames)
			})
		}
	}
}

// serveEcho serves Echo with the batch plugin on loopback until b ends,
// counting the server's writes.
func serveEcho(b *testing.B) (string, *testsvc.WriteCounter) {
	wc := &testsvc.WriteCounter{}
	s := server.NewServer()
	s.Plugins.Add(wc)
	require.NoError(b, s.RegisterName("Echo", new(testsvc.Echo), ""))
	_, err := batchserver.New(s)
	require.NoError(b, err)
	addr, stop, err := testsvc.Serve(s)
	require.NoError(b, err)
	b.Cleanup(stop)
	return addr, wc
}

type callFunc func(ctx context.Context, args *testsvc.Data, reply *testsvc.Data) error

// benchPaths are the paths the call and cast benchmarks compare.
var benchPaths = []string{"plain", "plainx", "batch", "dropin"}

// dialXClient returns an XClient of the path ("plainx": rpcx's own,
// "dropin": the batch drop-in) to the one server at addr, connected.
func dialXClient(b *testing.B, path, addr string) client.XClient {
	d, err := client.NewPeer2PeerDiscovery("tcp@"+addr, "")
	require.NoError(b, err)
	var xc client.XClient
	if path == "plainx" {
		xc = client.NewXClient("Echo", client.Failtry, client.RandomSelect, d, client.DefaultOption)
	} else {
		xc = batchclient.NewXClient("Echo", client.Failtry, client.RandomSelect, d, client.DefaultOption)
	}
	b.Cleanup(func() { xc.Close() })
	var r testsvc.Data
	require.NoError(b, xc.Call(context.Background(), "Data", testsvc.NewData(1), &r))
	return xc
}

// dialPath connects one path. For the batch path it also returns how many
// frames the client has written: each is exactly one Write, so this counts
// the client's writes without the runtime's own (netpoller wakeups) that
// the process-wide count includes.
func dialPath(b *testing.B, path, addr string) (callFunc, func() int64) {
	switch path {
	case "plain":
		pc := client.NewClient(client.DefaultOption)
		require.NoError(b, pc.Connect("tcp", addr))
		b.Cleanup(func() { pc.Close() })
		return func(ctx context.Context, a, r *testsvc.Data) error { return pc.Call(ctx, "Echo", "Data", a, r) }, nil
	case "plainx", "dropin":
		xc := dialXClient(b, path, addr)
		return func(ctx context.Context, a, r *testsvc.Data) error { return xc.Call(ctx, "Data", a, r) }, nil
	}
	c, err := batchclient.New()
	require.NoError(b, err)
	b.Cleanup(func() { c.Close() })
	waitConnected(b, c, addr)
	frames := func() int64 {
		return c.Metrics().Get("rpcxbatch.client.frames").(interface{ Count() int64 }).Count()
	}
	return func(ctx context.Context, a, r *testsvc.Data) error { return c.Call(ctx, addr, "Echo", "Data", a, r) }, frames
}

func benchCalls(b *testing.B, g int, wc *testsvc.WriteCounter, call callFunc, frames func() int64) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	args := testsvc.NewData(7)
	// Warm up with the same load shape, two calls per goroutine, so that
	// the timed run measures the steady state on both paths: the
	// connection, the pools, the heap grown to its working size, and the
	// goroutines (each of the g callers and, on the server, the goroutines
	// that run the requests) already made once. A short timed run at 10,000
	// goroutines would otherwise be dominated by the process growing.
	if err := callLoad(ctx, g, 2*g, args, call); err != nil {
		b.Fatal(err)
	}

	b.ReportAllocs()
	srvW0, procW0, cpu0 := wc.Writes.Load(), testsvc.ProcessWriteSyscalls(), testsvc.ProcessCPU()
	var frames0 int64
	if frames != nil {
		frames0 = frames()
	}
	b.ResetTimer()
	start := time.Now()
	err := callLoad(ctx, g, b.N, args, call)
	elapsed := time.Since(start)
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	srvW := wc.Writes.Load() - srvW0
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "calls/s")
	// CPU per call (client and server together) is steadier than calls/s
	// on a machine shared with other work.
	b.ReportMetric(float64((testsvc.ProcessCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/call")
	b.ReportMetric(float64(srvW)/float64(b.N), "srv-writes/call")
	switch {
	case frames != nil:
		b.ReportMetric(float64(frames()-frames0)/float64(b.N), "cli-writes/call")
	case procW0 >= 0:
		cliW := testsvc.ProcessWriteSyscalls() - procW0 - srvW
		b.ReportMetric(float64(cliW)/float64(b.N), "cli-writes/call")
	}
}

// callLoad makes n calls from g goroutines, spread evenly, and returns the
// first error.
func callLoad(ctx context.Context, g, n int, args *testsvc.Data, call callFunc) error {
	var wg sync.WaitGroup
	errs := make(chan error, g)
	per, extra := n/g, n%g
	for i := 0; i < g; i++ {
		k := per
		if i < extra {
			k++
		}
		if k == 0 {
			continue
		}
		wg.Add(1)
		go func(k int) {
			defer wg.Done()
			var reply testsvc.Data
			for j := 0; j < k; j++ {
				if err := call(ctx, args, &reply); err != nil {
					errs <- err
					return
				}
			}
		}(k)
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// BenchmarkCast measures fire-and-forget calls that the server runs (Echo.Data
// with its reply discarded): plain rpcx oneway calls against batch casts, at
// 1 and 1,000 goroutines. A point ends when the server has run every cast.
func BenchmarkCast(b *testing.B) {
	s := server.NewServer()
	counter := &countingEcho{}
	require.NoError(b, s.RegisterName("Echo", counter, ""))
	_, err := batchserver.New(s)
	require.NoError(b, err)
	addr, stop, err := testsvc.Serve(s)
	require.NoError(b, err)
	defer stop()
	for _, g := range []int{1, 1000} {
		for _, path := range benchPaths {
			b.Run(fmt.Sprintf("g=%d/%s", g, path), func(b *testing.B) {
				var cast func(ctx context.Context, a *testsvc.Data) error
				switch path {
				case "plainx", "dropin":
					// XClient.Oneshot: rpcx's oneway call.
					xc := dialXClient(b, path, addr)
					cast = func(ctx context.Context, a *testsvc.Data) error { return xc.Oneshot(ctx, "Data", a) }
				case "plain":
					pc := client.NewClient(client.DefaultOption)
					require.NoError(b, pc.Connect("tcp", addr))
					b.Cleanup(func() { pc.Close() })
					cast = func(ctx context.Context, a *testsvc.Data) error {
						return pc.Go(ctx, "Echo", "Data", a, nil, make(chan *client.Call, 1)).Error
					}
				default:
					c, err := batchclient.New()
					require.NoError(b, err)
					b.Cleanup(func() { c.Close() })
					waitConnected(b, c, addr)
					cast = func(ctx context.Context, a *testsvc.Data) error { return c.Cast(ctx, addr, "Echo", "Data", a) }
				}
				before := counter.n.Load()
				args := testsvc.NewData(3)
				b.ReportAllocs()
				cpu0 := testsvc.ProcessCPU()
				b.ResetTimer()
				start := time.Now()
				var wg sync.WaitGroup
				for i := 0; i < g; i++ {
					n := b.N / g
					if i < b.N%g {
						n++
					}
					wg.Add(1)
					go func(n int) {
						defer wg.Done()
						for j := 0; j < n; j++ {
							if err := cast(context.Background(), args); err != nil {
								b.Error(err)
								return
							}
						}
					}(n)
				}
				wg.Wait()
				for counter.n.Load()-before < int64(b.N) {
					if time.Since(start) > 2*time.Minute {
						b.Fatalf("only %d of %d casts ran", counter.n.Load()-before, b.N)
					}
					time.Sleep(time.Millisecond)
				}
				elapsed := time.Since(start)
				b.StopTimer()
				b.ReportMetric(float64(b.N)/elapsed.Seconds(), "casts/s")
				b.ReportMetric(float64((testsvc.ProcessCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/cast")
			})
		}
	}
}

// BenchmarkGo is BenchmarkCall's Echo.Data through Go: each goroutine
// starts a call and waits on its Done channel (one made per call), over
// the same four paths, at 1 and 1,000 goroutines.
func BenchmarkGo(b *testing.B) {
	addr, wc := serveEcho(b)
	for _, g := range []int{1, 1000} {
		for _, path := range benchPaths {
			b.Run(fmt.Sprintf("g=%d/%s", g, path), func(b *testing.B) {
				var start func(ctx context.Context, a, r *testsvc.Data, done chan *client.Call) (*client.Call, error)
				switch path {
				case "plain":
					pc := client.NewClient(client.DefaultOption)
					require.NoError(b, pc.Connect("tcp", addr))
					b.Cleanup(func() { pc.Close() })
					start = func(ctx context.Context, a, r *testsvc.Data, done chan *client.Call) (*client.Call, error) {
						return pc.Go(ctx, "Echo", "Data", a, r, done), nil
					}
				case "plainx", "dropin":
					xc := dialXClient(b, path, addr)
					start = func(ctx context.Context, a, r *testsvc.Data, done chan *client.Call) (*client.Call, error) {
						return xc.Go(ctx, "Data", a, r, done)
					}
				default:
					c, err := batchclient.New()
					require.NoError(b, err)
					b.Cleanup(func() { c.Close() })
					waitConnected(b, c, addr)
					start = func(ctx context.Context, a, r *testsvc.Data, done chan *client.Call) (*client.Call, error) {
						return c.Go(ctx, addr, "Echo", "Data", a, r, done), nil
					}
				}
				call := func(ctx context.Context, a, r *testsvc.Data) error {
					done := make(chan *client.Call, 1)
					c, err := start(ctx, a, r, done)
					if err != nil {
						return err
					}
					select {
					case <-c.Done:
						return c.Error
					case <-ctx.Done():
						return ctx.Err()
					}
				}
				benchCalls(b, g, wc, call, nil)
			})
		}
	}
}

// countingEcho is Echo that counts the calls it ran.
type countingEcho struct{ n atomic.Int64 }

// Data echoes and counts.
func (e *countingEcho) Data(_ context.Context, d *testsvc.Data, r *testsvc.Data) error {
	*r = *d
	e.n.Add(1)
	return nil
}

// BenchmarkSend measures sends from 1,000 goroutines (a key each) of the
// 220-byte data payload, already encoded, to a counting send handler; a run
// ends when the handler has seen every send.
func BenchmarkSend(b *testing.B) {
	s := server.NewServer()
	p, err := batchserver.New(s)
	require.NoError(b, err)
	var got atomic.Int64
	require.NoError(b, p.HandleSend("count", func(context.Context, []byte) { got.Add(1) }))
	addr, stop, err := testsvc.Serve(s)
	require.NoError(b, err)
	defer stop()
	c, err := batchclient.New()
	require.NoError(b, err)
	defer c.Close()
	waitConnected(b, c, addr)
	payload, err := share.Codecs[protocol.MsgPack].Encode(testsvc.NewData(3))
	require.NoError(b, err)

	b.ReportAllocs()
	cpu0 := testsvc.ProcessCPU()
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	const g = 1000
	for i := 0; i < g; i++ {
		n := b.N / g
		if i < b.N%g {
			n++
		}
		wg.Add(1)
		go func(i, n int) {
			defer wg.Done()
			ctx := batchclient.WithKey(context.Background(), strconv.Itoa(i))
			for j := 0; j < n; j++ {
				if err := c.Send(ctx, addr, "count", payload); err != nil {
					b.Error(err)
					return
				}
			}
		}(i, n)
	}
	wg.Wait()
	for got.Load() < int64(b.N) {
		if time.Since(start) > 2*time.Minute {
			b.Fatalf("only %d of %d sends arrived", got.Load(), b.N)
		}
		time.Sleep(time.Millisecond)
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "sends/s")
	b.ReportMetric(float64((testsvc.ProcessCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/send")
}
