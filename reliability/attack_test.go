package reliability_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/share"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/codec"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/childproc"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// The attack suite (issue 42): a client that speaks the wire by hand
// attacks a batch server and a plain rpcx server side by side, each in a
// process of its own, while a well-behaved drop-in XClient and an rpcx
// XClient keep calling each server. For each attack it reports what the
// attack cost each server (live heap, goroutines, sockets, RSS, the
// plugin's connection states and parked goroutines) while the attacker is
// still connected, and after it has gone, and requires the batch server to
// be no worse than the plain one, within the bounds docs/operations.md
// states, and every well-behaved call to be answered.
//
//	go test -count=1 -v -run TestAttackSuite ./reliability/

// attackTarget is one server under attack.
type attackTarget struct {
	name  string
	batch bool
	child *childproc.Child
	probe *client.Client // rpcx's own client, on a connection of its own
}

// serverCost is what a server holds at one moment.
type serverCost struct {
	heap, rss          float64 // MiB
	goroutines, socket int
	conns, parked      int64
}

func (c serverCost) String() string {
	return fmt.Sprintf("heap %5.1f MiB  rss %6.1f MiB  goroutines %5d  sockets %4d  conn states %4d  parked %5d",
		c.heap, c.rss, c.goroutines, c.socket, c.conns, c.parked)
}

func startTarget(t *testing.T, name string, batch bool) *attackTarget {
	ch := childproc.StartWith(t, "127.0.0.1:0", childproc.Options{Plain: !batch})
	pc := client.NewClient(client.DefaultOption)
	require.NoError(t, pc.Connect("tcp", ch.Addr()))
	t.Cleanup(func() { pc.Close() })
	return &attackTarget{name: name, batch: batch, child: ch, probe: pc}
}

// cost samples the target's cost.
func (a *attackTarget) cost(t *testing.T) serverCost {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var m childproc.MemStats
	require.NoError(t, a.probe.Call(ctx, "Probe", "Mem", &testsvc.Args{}, &m))
	var st childproc.PluginState
	require.NoError(t, a.probe.Call(ctx, "Probe", "State", &testsvc.Args{}, &st))
	rss, err := a.child.RSS()
	require.NoError(t, err)
	socks, err := a.child.Sockets()
	require.NoError(t, err)
	return serverCost{heap: mib(m.HeapInuse), rss: float64(rss) / (1 << 20), goroutines: m.Goroutines,
		socket: socks, conns: st.Conns, parked: st.Parked}
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

// peakRSS samples the target's RSS every 20 ms until stop is closed.
func (a *attackTarget) peakRSS(stop <-chan struct{}) <-chan float64 {
	out := make(chan float64, 1)
	go func() {
		var peak int64
		tk := time.NewTicker(20 * time.Millisecond)
		defer tk.Stop()
		for {
			if r, err := a.child.RSS(); err == nil {
				peak = max(peak, r)
			}
			select {
			case <-stop:
				out <- float64(peak) / (1 << 20)
				return
			case <-tk.C:
			}
		}
	}()
	return out
}

// politeCallers keeps a drop-in XClient and an rpcx XClient calling
// Arith.Mul on the target every 20 ms, each call within 2 s, until stop.
type politeCallers struct {
	answered, failed atomic.Int64
	mu               sync.Mutex
	firstErr         error
	wg               sync.WaitGroup
}

func (pc *politeCallers) run(t *testing.T, addr string, stop <-chan struct{}) {
	d, err := client.NewPeer2PeerDiscovery("tcp@"+addr, "")
	require.NoError(t, err)
	opt := client.DefaultOption
	xcs := []client.XClient{
		batchclient.NewXClient("Arith", client.Failtry, client.RandomSelect, d, opt),
		client.NewXClient("Arith", client.Failtry, client.RandomSelect, d, opt),
	}
	for _, xc := range xcs {
		xc := xc
		t.Cleanup(func() { xc.Close() })
		pc.wg.Add(1)
		go func() {
			defer pc.wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				case <-time.After(20 * time.Millisecond):
				}
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				var r testsvc.Reply
				err := xc.Call(ctx, "Mul", &testsvc.Args{A: i, B: 2}, &r)
				cancel()
				if err == nil && r.C == 2*i {
					pc.answered.Add(1)
					continue
				}
				pc.failed.Add(1)
				pc.mu.Lock()
				if pc.firstErr == nil {
					pc.firstErr = fmt.Errorf("call %d: %v (reply %d)", i, err, r.C)
				}
				pc.mu.Unlock()
			}
		}()
	}
}

// attack is one attack: start makes it against addr (batch tells the
// target's kind, for the messages only a batch server understands) and
// returns once the attack is made, with the attacker still connected;
// leave ends it. settle is how long after start the cost is taken while
// the attacker is still connected.
type attack struct {
	name   string
	settle time.Duration
	start  func(t *testing.T, addr string, batch bool) (leave func())
	// check holds what the batch server must meet beside the plain one.
	check func(t *testing.T, plain, batch attackResult)
}

// attackResult is one attack's cost on one target.
type attackResult struct {
	before, held, after serverCost
	peakRSS             float64
}

func TestAttackSuite(t *testing.T) {
	targets := []*attackTarget{startTarget(t, "plain", false), startTarget(t, "batch", true)}
	stopPolite := make(chan struct{})
	polite := make([]*politeCallers, len(targets))
	for i, tg := range targets {
		polite[i] = &politeCallers{}
		polite[i].run(t, tg.child.Addr(), stopPolite)
	}
	defer func() {
		close(stopPolite)
		for i, tg := range targets {
			polite[i].wg.Wait()
			t.Logf("%s server: well-behaved calls answered %d, failed %d", tg.name, polite[i].answered.Load(), polite[i].failed.Load())
			assert.Zero(t, polite[i].failed.Load(), "%s server: first failure: %v", tg.name, polite[i].firstErr)
			assert.Greater(t, polite[i].answered.Load(), int64(100), "%s server", tg.name)
		}
	}()
	time.Sleep(300 * time.Millisecond) // the polite clients connect

	var report strings.Builder
	for _, at := range attacks() {
		results := make([]attackResult, len(targets))
		var wg sync.WaitGroup
		for i, tg := range targets {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res := &results[i]
				res.before = tg.cost(t)
				stop := make(chan struct{})
				peak := tg.peakRSS(stop)
				begun := time.Now()
				leave := at.start(t, tg.child.Addr(), tg.batch)
				time.Sleep(time.Until(begun.Add(at.settle)))
				res.held = tg.cost(t)
				leave()
				close(stop)
				res.peakRSS = <-peak
				// Gone: the server's own clocks have a second or two.
				time.Sleep(2 * time.Second)
				res.after = tg.cost(t)
			}()
		}
		wg.Wait()
		fmt.Fprintf(&report, "\n%s\n", at.name)
		for i, tg := range targets {
			r := results[i]
			fmt.Fprintf(&report, "  %-5s before   %v\n  %-5s attacker %v\n  %-5s gone     %v\n  %-5s peak rss %6.1f MiB\n",
				tg.name, r.before, tg.name, r.held, tg.name, r.after, tg.name, r.peakRSS)
		}
		t.Run(at.name, func(t *testing.T) {
			plain, batch := results[0], results[1]
			// Gone, the attack leaves nothing behind: no connection state, no
			// socket, goroutines and heap back near where they were.
			assert.LessOrEqual(t, batch.after.conns, batch.before.conns, "connection states left")
			assert.LessOrEqual(t, batch.after.socket, batch.before.socket, "sockets left")
			// Parked goroutines go at the workers' pace (halving each
			// second once a second has passed without the load: the silent
			// connection's attack checks it); entries the attacker left
			// queued may still run after it left, on goroutines that park.
			assert.LessOrEqual(t, batch.after.goroutines-int(batch.after.parked), max(batch.before.goroutines, plain.after.goroutines)+16, "goroutines left, the parked aside")
			assert.LessOrEqual(t, batch.after.heap, max(batch.before.heap, plain.after.heap)+8, "live heap left (MiB)")
			if at.check != nil {
				at.check(t, plain, batch)
			}
		})
	}
	t.Logf("attack suite: cost per server (before the attack; the attacker still connected; 2 s after it left)%s", report.String())
}

func attacks() []attack {
	return []attack{
		{
			name: "2,000 connections that handshake and close", settle: 0,
			start: func(t *testing.T, addr string, batch bool) func() {
				hs := codec.AppendMessage(nil, rawHeader(false, protocol.SerializeNone, 0), codec.ServicePath, codec.MethodHandshake, nil, nil)
				for i := 0; i < 2000; i++ {
					c, err := net.DialTimeout("tcp", addr, 3*time.Second)
					require.NoError(t, err)
					_, err = c.Write(hs)
					require.NoError(t, err)
					c.Close()
				}
				return func() {}
			},
		},
		{
			name: "a burst of 2,000 blocking calls, then a silent connection", settle: 7 * time.Second,
			start: func(t *testing.T, addr string, batch bool) func() {
				c := rawConn(t, addr, batch)
				args := msgpackOf(t, &testsvc.Args{A: 100, B: 1})
				// Two frames: a frame holds at most 1,000 entries.
				require.NoError(t, writeCallsErr(c, batch, 1, 1000, "Arith", "Sleep", args))
				require.NoError(t, writeCallsErr(c, batch, 2, 1000, "Arith", "Sleep", args))
				require.Equal(t, 2000, readAnswers(t, c, batch, 2000, 20*time.Second))
				return func() { c.Close() }
			},
			check: func(t *testing.T, plain, batch attackResult) {
				// The burst's goroutines end while the connection stays
				// silent, halving each second (plain rpcx ends each as its
				// handler returns): after 7 s, at most a sixteenth.
				assert.LessOrEqual(t, batch.held.parked, int64(2000/16), "goroutines parked while the lane is silent")
			},
		},
		{
			name: "30,000 heartbeats on one connection", settle: 0,
			start: func(t *testing.T, addr string, batch bool) func() {
				c := rawConn(t, addr, batch)
				hb := codec.HeartbeatHeader()
				one := codec.AppendMessage(nil, &hb, "", "", nil, nil)
				all := make([]byte, 0, 30000*len(one))
				for i := 0; i < 30000; i++ {
					all = append(all, one...)
				}
				go c.Write(all)
				readAnswers(t, c, batch, 30000, 10*time.Second)
				return func() { c.Close() }
			},
		},
		{
			name: "40,000 calls for 2 KiB replies, never read", settle: 3 * time.Second,
			start: func(t *testing.T, addr string, batch bool) func() {
				c := rawConn(t, addr, batch)
				args := msgpackOf(t, make([]byte, 2<<10))
				done := make(chan struct{})
				go func() {
					defer close(done)
					for i := 0; i < 40; i++ {
						if writeCallsErr(c, batch, uint64(i+1), 1000, "Echo", "Bytes", args) != nil {
							return
						}
					}
				}()
				return func() { c.Close(); <-done }
			},
			check: func(t *testing.T, plain, batch attackResult) {
				assert.LessOrEqual(t, batch.peakRSS, max(plain.peakRSS, plain.before.rss+64), "peak RSS (MiB)")
			},
		},
	}
}

// rawHeader is an rpcx request header.
func rawHeader(oneway bool, st protocol.SerializeType, seq uint64) *protocol.Header {
	var h protocol.Header
	h[0] = protocol.MagicNumber()
	h.SetMessageType(protocol.Request)
	h.SetOneway(oneway)
	h.SetSerializeType(st)
	h.SetSeq(seq)
	return &h
}

// rawConn dials addr; for a batch server it makes the lane handshake.
func rawConn(t *testing.T, addr string, batch bool) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 3*time.Second)
	require.NoError(t, err)
	if batch {
		_, err = c.Write(codec.AppendMessage(nil, rawHeader(false, protocol.SerializeNone, 0), codec.ServicePath, codec.MethodHandshake, nil, nil))
		require.NoError(t, err)
		require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
		for {
			msg, _, err := codec.ReadMessage(c, 1<<20, nil)
			require.NoError(t, err)
			if msg.Header.MessageType() == protocol.Response && !msg.Header.IsHeartbeat() {
				require.NotEqual(t, protocol.Error, msg.Header.MessageStatusType())
				break
			}
		}
	}
	return c
}

func msgpackOf(t *testing.T, v any) []byte {
	b, err := share.Codecs[protocol.MsgPack].Encode(v)
	require.NoError(t, err)
	return b
}

// writeCallsErr writes the n calls of frame seq: one batch frame on a
// lane, n requests on a plain connection.
func writeCallsErr(c net.Conn, batch bool, seq uint64, n int, path, method string, args []byte) error {
	var b []byte
	first := (seq - 1) * uint64(n)
	if batch {
		f := codec.AppendBatchHeader(nil, seq, n)
		for i := 0; i < n; i++ {
			e := codec.Entry{Kind: codec.KindCall, ID: first + uint64(i) + 1, ServicePath: path, ServiceMethod: method,
				SerializeType: uint8(protocol.MsgPack), Payload: args}
			f = codec.AppendEntry(f, &e)
		}
		b = codec.AppendMessage(nil, rawHeader(true, protocol.SerializeNone, 0), codec.ServicePath, codec.MethodBatch, nil, f)
	} else {
		for i := 0; i < n; i++ {
			b = codec.AppendMessage(b, rawHeader(false, protocol.MsgPack, first+uint64(i)+1), path, method, nil, args)
		}
	}
	c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	_, err := c.Write(b)
	return err
}

// readAnswers reads from c until want answers (replies of a reply frame, or
// responses) came or d passed; it returns how many came.
func readAnswers(t *testing.T, c net.Conn, batch bool, want int, d time.Duration) int {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(d)))
	got := 0
	for got < want {
		msg, _, err := codec.ReadMessage(c, 64<<20, nil)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return got
			}
			require.NoError(t, err)
		}
		switch {
		case msg.Header.MessageType() == protocol.Response:
			got++
		case batch && msg.ServicePath == codec.ServicePath && msg.ServiceMethod == codec.MethodReply:
			_, rs, err := codec.DecodeReplies(msg.Payload, 0, nil)
			require.NoError(t, err)
			got += len(rs)
		}
	}
	return got
}
