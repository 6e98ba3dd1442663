package batchclient_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/synstall"
)

// Issue 43, connecting: servers that hang, refuse, or drop what they
// accept, run on rpcx's XClient and on the drop-in side by side.

// hungListener is a server whose process hangs: the kernel accepts its
// connections, and nothing ever reads from them or answers. It is closed,
// with every connection it took, when the test ends.
type hungListener struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
	done  chan struct{}
}

func startHung(t *testing.T) *hungListener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	h := &hungListener{ln: ln, done: make(chan struct{})}
	go func() {
		defer close(h.done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			h.mu.Lock()
			h.conns = append(h.conns, c)
			h.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-h.done
		h.mu.Lock()
		defer h.mu.Unlock()
		for _, c := range h.conns {
			c.Close()
		}
	})
	return h
}

func (h *hungListener) addr() string { return h.ln.Addr().String() }

// hungOutcome is what one step against a hung server gave the caller:
// the error as the comparison suite describes it, and whether it came
// back by the caller's deadline (plus slack for a loaded machine).
type hungOutcome struct {
	Step   string
	Err    *cmpErr
	InTime bool
}

// A server that accepts connections and never answers (a hung process):
// rpcx's dial succeeds, so its Call ends at the caller's deadline with
// context.DeadlineExceeded (with Failtry too: rpcx does not retry the
// context's error) and Oneshot returns nil at once; Broadcast, Fork and
// Inform over it and a live server end by the deadline as on rpcx. The
// drop-in must not wait for its lane handshake outside the caller's
// context: the same errors, in the same time, on its own call path (no
// plugin) and through rpcx's XClient (a plugin of the user's).
func TestXClientCompareHungServer(t *testing.T) {
	const deadline = 300 * time.Millisecond
	const slack = time.Second
	f := startCmpFleet(t, cmpFleetConfig{n: 1})
	hung := startHung(t)
	for _, withPlugin := range []bool{false, true} {
		for _, fm := range []client.FailMode{client.Failfast, client.Failtry, client.Failover} {
			name := fmt.Sprintf("%v/plugin=%v", fm, withPlugin)
			t.Run(name, func(t *testing.T) {
				opt := client.DefaultOption
				opt.Retries = 1
				var got [2][]hungOutcome
				for mi, m := range xcMakers {
					if m.name == "rpcx" && raceEnabled {
						got[mi] = hungOnRPCX()
						continue
					}
					step := func(name string, do func(ctx context.Context) error) {
						ctx, cancel := context.WithTimeout(context.Background(), deadline)
						defer cancel()
						start := time.Now()
						err := do(ctx)
						got[mi] = append(got[mi], hungOutcome{Step: name, Err: describeErr(f, err), InTime: time.Since(start) < deadline+slack})
					}
					only, err := client.NewPeer2PeerDiscovery("tcp@"+hung.addr(), "")
					require.NoError(t, err)
					xc := newCmpXClient(t, m, fm, client.RoundRobin, only, opt)
					if withPlugin {
						xc.GetPlugins().Add(&hookRecorder{})
					}
					for i := range 2 {
						step(fmt.Sprintf("Call %d", i), func(ctx context.Context) error {
							var r CmpReply
							return xc.Call(ctx, "Do", &CmpArgs{A: 1, B: 2}, &r)
						})
					}
					step("Oneshot", func(ctx context.Context) error { return xc.Oneshot(ctx, "Do", &CmpArgs{A: 1, B: 2}) })

					pairs := append(f.pairs(nil), &client.KVPair{Key: "tcp@" + hung.addr()})
					both, err := client.NewMultipleServersDiscovery(pairs)
					require.NoError(t, err)
					xb := newCmpXClient(t, m, fm, client.RoundRobin, both, opt)
					if withPlugin {
						xb.GetPlugins().Add(&hookRecorder{})
					}
					step("Broadcast", func(ctx context.Context) error {
						var r CmpReply
						return xb.Broadcast(ctx, "Do", &CmpArgs{A: 1, B: 2}, &r)
					})
					step("Fork", func(ctx context.Context) error {
						var r CmpReply
						return xb.Fork(ctx, "Do", &CmpArgs{A: 1, B: 2}, &r)
					})
					step("Inform", func(ctx context.Context) error {
						var r CmpReply
						receipts, err := xb.Inform(ctx, "Do", &CmpArgs{A: 1, B: 2}, &r)
						if err != nil {
							return err
						}
						var errs []error
						for _, rc := range receipts {
							if rc.Error != nil {
								errs = append(errs, rc.Error)
							}
						}
						return errors.Join(errs...)
					})
					f.log.settle(0)
					f.log.take()
				}
				assert.Equal(t, got[0], got[1], "rpcx (expected) against the drop-in (actual)")
			})
		}
	}
}

// hungOnRPCX is what TestXClientCompareHungServer's steps give on rpcx's
// XClient, written out for runs under the race detector: there rpcx
// v1.9.4's Client.call, whose context ends mid-call, reads the call's
// sequence number unsynchronised with its sending goroutine, a data race
// inside rpcx that -race reports.
func hungOnRPCX() []hungOutcome {
	deadline := describeErr(nil, context.DeadlineExceeded)
	multi := &cmpErr{Text: "[context deadline exceeded timeout]", Type: "*errors.MultiError"}
	return []hungOutcome{
		{Step: "Call 0", Err: deadline, InTime: true},
		{Step: "Call 1", Err: deadline, InTime: true},
		{Step: "Oneshot", InTime: true},
		{Step: "Broadcast", Err: multi, InTime: true},
		{Step: "Fork", InTime: true},
		{Step: "Inform", Err: multi, InTime: true},
	}
}

// stallProxy forwards TCP connections to a server until it is cut: then
// it forwards nothing either way, and dials nothing for the connections
// it takes, until healed, when everything held goes on (nothing is lost:
// TCP's retransmissions across a partition of 100 % loss, as the peers
// see them). Its goroutines end when the test ends.
type stallProxy struct {
	ln       net.Listener
	target   string
	accepted atomic.Int64 // connections taken
	mu       sync.Mutex
	healed   chan struct{} // closed while not cut
	conns    []net.Conn
	wg       sync.WaitGroup
}

func startStallProxy(t *testing.T, target string) *stallProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &stallProxy{ln: ln, target: target, healed: make(chan struct{})}
	close(p.healed)
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.accepted.Add(1)
			p.track(c)
			p.wg.Add(1)
			go p.serve(c)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		p.heal()
		p.mu.Lock()
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

func (p *stallProxy) addr() string { return p.ln.Addr().String() }

func (p *stallProxy) track(c net.Conn) {
	p.mu.Lock()
	p.conns = append(p.conns, c)
	p.mu.Unlock()
}

// gate returns the channel that is closed while the proxy is not cut.
func (p *stallProxy) gate() chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.healed
}

func (p *stallProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.healed:
		p.healed = make(chan struct{})
	default:
	}
}

func (p *stallProxy) heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.healed:
	default:
		close(p.healed)
	}
}

func (p *stallProxy) serve(c net.Conn) {
	defer p.wg.Done()
	<-p.gate()
	u, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.track(u)
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		p.pipe(u, c)
	}()
	p.pipe(c, u)
}

// pipe copies from src to dst, holding what it read while the proxy is
// cut.
func (p *stallProxy) pipe(src, dst net.Conn) {
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			<-p.gate()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// A partition (issue 43, item 13): 200 goroutines calling with 1 s
// deadlines, Failfast, through a link that goes to 100 % loss for 4 s and
// then heals. rpcx's connection lives through it (no heartbeat) and every
// call ends by its deadline; the drop-in's lanes give up the silent peer
// and reconnect, and that connect must be waited for within each caller's
// deadline too: no call may end later than its deadline and a little
// slack, on either XClient.
func TestXClientComparePartitionDeadlines(t *testing.T) {
	const (
		callers  = 200
		deadline = time.Second
		slack    = 500 * time.Millisecond
	)
	f := startCmpFleet(t, cmpFleetConfig{n: 1})
	for _, m := range xcMakers {
		t.Run(m.name, func(t *testing.T) {
			if m.name == "rpcx" && raceEnabled {
				// rpcx's calls whose context ends mid-call race inside
				// rpcx (see hungOnRPCX); without -race it returns none
				// late, which is what the drop-in is held to.
				return
			}
			px := startStallProxy(t, f.servers[0].addr)
			d, err := client.NewPeer2PeerDiscovery("tcp@"+px.addr(), "")
			require.NoError(t, err)
			xc := newCmpXClient(t, m, client.Failfast, client.RoundRobin, d, client.DefaultOption)
			var r CmpReply
			require.NoError(t, xc.Call(ctxT(t, 5*time.Second), "Do", &CmpArgs{A: 1, B: 2}, &r))

			stop := make(chan struct{})
			var mu sync.Mutex
			var calls, late int
			var worst time.Duration
			var wg sync.WaitGroup
			for range callers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						select {
						case <-stop:
							return
						default:
						}
						ctx, cancel := context.WithTimeout(context.Background(), deadline)
						start := time.Now()
						var r CmpReply
						_ = xc.Call(ctx, "Do", &CmpArgs{A: 1, B: 2}, &r)
						took := time.Since(start)
						cancel()
						mu.Lock()
						calls++
						if took > deadline+slack {
							late++
						}
						worst = max(worst, took)
						mu.Unlock()
						time.Sleep(10 * time.Millisecond)
					}
				}()
			}
			time.Sleep(500 * time.Millisecond)
			px.cut()
			time.Sleep(4 * time.Second)
			px.heal()
			time.Sleep(2 * time.Second)
			close(stop)
			wg.Wait()
			t.Logf("%s: %d calls, %d late, the longest %v", m.name, calls, late, worst.Round(time.Millisecond))
			assert.Zero(t, late, "%s: calls that ended later than their deadline + %v (the longest took %v)", m.name, slack, worst)
			// The link is back: calls get through again.
			require.Eventually(t, func() bool {
				return xc.Call(ctxT(t, 2*time.Second), "Do", &CmpArgs{A: 1, B: 2}, &r) == nil
			}, 10*time.Second, 50*time.Millisecond, "%s: no call got through after the heal", m.name)
			f.log.take()
		})
	}
}

// Retrying a server that refuses connections (issue 43, item 14): rpcx's
// refused dial costs well under a millisecond, so 30 Failover calls over
// three servers of which one is down, and a Failtry call with Retries 5
// on the down one, take little longer than the calls themselves. The
// drop-in asks for a fresh connect at each retry and must not wait
// ReconnectMin for it: the same outcomes, in about the same time as rpcx
// measured in the same moment.
func TestXClientCompareRefusingServerRetries(t *testing.T) {
	f := startCmpFleet(t, cmpFleetConfig{n: 2, dead: 1})
	down, err := client.NewPeer2PeerDiscovery("tcp@"+f.dead[0], "")
	require.NoError(t, err)
	type run struct {
		outcomes []string
		took     time.Duration
	}
	scenarios := []struct {
		name string
		fm   client.FailMode
		opt  func(*client.Option)
		disc func() client.ServiceDiscovery
		n    int
	}{
		{"Failover over 3 servers, 1 down, 30 calls", client.Failover, func(*client.Option) {},
			func() client.ServiceDiscovery { return f.discovery(t, nil) }, 30},
		{"Failtry with Retries 5 on the down server", client.Failtry, func(o *client.Option) { o.Retries = 5 },
			func() client.ServiceDiscovery { return down }, 1},
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			var runs [2]run
			for mi, m := range xcMakers {
				opt := client.DefaultOption
				sc.opt(&opt)
				xc := newCmpXClient(t, m, sc.fm, client.RoundRobin, sc.disc(), opt)
				// The first call sets up the connections to the live
				// servers, on both alike; what is timed is the retries.
				var r CmpReply
				_ = xc.Call(ctxT(t, 5*time.Second), "Do", &CmpArgs{A: 1, B: 2}, &r)
				f.log.settle(0)
				f.log.take()
				start := time.Now()
				for i := range sc.n {
					o := callOnce(t, f, xc, 5*time.Second, false, &CmpArgs{A: i, B: 2}, -1)
					o.Runs, o.Reply = nil, CmpReply{} // which live server answered is rpcx's round robin's
					runs[mi].outcomes = append(runs[mi].outcomes, fmt.Sprintf("%+v", o.Err))
				}
				runs[mi].took = time.Since(start)
			}
			t.Logf("rpcx %v, drop-in %v", runs[0].took, runs[1].took)
			assert.Equal(t, runs[0].outcomes, runs[1].outcomes, "rpcx (expected) against the drop-in (actual)")
			// Generous for a loaded machine; waiting ReconnectMin (50 ms)
			// per retry of the down server takes 250 ms and more.
			assert.Less(t, runs[1].took, 3*runs[0].took+150*time.Millisecond, "the drop-in's retries took %v, rpcx's %v", runs[1].took, runs[0].took)
		})
	}
}

// One hung server never stalls calls to another (issue 43, item 20):
// rpcx v1.9.4 dials under its XClient's lock, so while one server's dial
// hangs (a host dropping SYNs) every call of the XClient that needs the
// lock waits, whatever its server, for up to ConnectTimeout. The drop-in
// is better there: its own call path connects outside that lock and
// within the caller's deadline. Callers spread by RoundRobin (whose
// selection takes rpcx's lock) over a live server and one whose dial
// hangs for 5 s: every call ends by its deadline, and those on the live
// server succeed.
func TestXClientHungServerStallsNoOtherServer(t *testing.T) {
	const deadline = 300 * time.Millisecond
	f := startCmpFleet(t, cmpFleetConfig{n: 1})
	stalled := synstall.Addr(t)
	d, err := client.NewMultipleServersDiscovery(append(f.pairs(nil), &client.KVPair{Key: "tcp@" + stalled}))
	require.NoError(t, err)
	opt := client.DefaultOption
	opt.ConnectTimeout = 5 * time.Second
	xc := batchclient.NewXClient("Cmp", client.Failfast, client.RoundRobin, d, opt)
	t.Cleanup(func() { xc.Close() })

	var mu sync.Mutex
	var ok, failed int
	var worst time.Duration
	var wg sync.WaitGroup
	end := time.Now().Add(1500 * time.Millisecond)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				ctx, cancel := context.WithTimeout(context.Background(), deadline)
				start := time.Now()
				var r CmpReply
				err := xc.Call(ctx, "Do", &CmpArgs{A: 1, B: 2}, &r)
				took := time.Since(start)
				cancel()
				mu.Lock()
				worst = max(worst, took)
				if err == nil && r.Server == "s0" {
					ok++
				} else {
					failed++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	t.Logf("%d calls to the live server, %d to the hung one; the longest took %v", ok, failed, worst)
	assert.NotZero(t, ok, "no call reached the live server")
	assert.NotZero(t, failed, "no call went to the hung server")
	// rpcx's lock would hold calls for the hung dial's 5 s.
	assert.Less(t, worst, deadline+700*time.Millisecond, "a call waited past its deadline for the hung server's dial")
}
