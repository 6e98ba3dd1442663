package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	metrics "github.com/rcrowley/go-metrics"
	"github.com/smallnest/rpcx/client"
)

// The control service runs in the server process on its own listener, so
// that its traffic never shares a connection with a measured path; the
// writes it makes there are counted (ioCounter) and subtracted from the
// server's totals.

// Empty is the argument or reply of control methods that need none.
type Empty struct{}

// ServerInfo describes the server process.
type ServerInfo struct {
	Pid        int
	GOMAXPROCS int
	PoolSize   int // lanes the batch plugin asks each client to open
}

// WaitArgs asks Wait to block until Target executions or TimeoutMS.
type WaitArgs struct {
	Target    int64
	TimeoutMS int64
}

// CountReply is the executions counted since the last Reset.
type CountReply struct {
	N       int64
	Reached bool
}

// ServerStats is what the server spent since the last Reset.
type ServerStats struct {
	CPUNanos      int64
	Writes, Bytes int64 // write syscalls and bytes, less the control traffic; -1 if unknown
	// SocketWrites and SocketBytes are the Write calls and bytes on the
	// service's connections alone (no runtime wakeups, no control).
	SocketWrites, SocketBytes int64
	PeakRSS                   int64
	PeakGoroutines            int64
	// The batch plugin's counters: frames in, reply frames out, entries
	// (calls + casts + sends) and calls, since the Reset.
	Frames, ReplyFrames, Entries, Calls int64
}

// Control is the server's control service.
type Control struct {
	count *counter
	reg   metrics.Registry
	ctrl  *ioCounter // the control connections
	data  *ioCounter // the service's connections
	info  ServerInfo

	mu       sync.Mutex
	base     usage
	baseCtrl ioSnapshot
	baseData ioSnapshot
	baseM    [4]int64
	samp     *sampler
	resetOK  bool
}

// batchCounters are the batch plugin's metrics the stats report, in the
// order of ServerStats' Frames, ReplyFrames, then the entry kinds.
var batchCounters = []string{"frames", "reply_frames", "calls", "casts", "sends"}

func (c *Control) metricsNow() [4]int64 {
	var v [5]int64
	for i, name := range batchCounters {
		if m, ok := c.reg.Get("rpcxbatch.server." + name).(metrics.Counter); ok {
			v[i] = m.Count()
		}
	}
	return [4]int64{v[0], v[1], v[2] + v[3] + v[4], v[2]}
}

// Reset starts a measurement: counters to zero, memory settled, baselines
// taken, the goroutine sampler started.
func (c *Control) Reset(_ context.Context, _ *Empty, info *ServerInfo) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.samp != nil {
		c.samp.stop(false)
	}
	c.count.reset()
	c.resetOK = settleMemory()
	c.baseM = c.metricsNow()
	c.baseCtrl = c.ctrl.snapshot()
	c.baseData = c.data.snapshot()
	c.base = readUsage()
	c.samp = startSampler()
	*info = c.info
	return nil
}

// Count reports the executions so far.
func (c *Control) Count(_ context.Context, _ *Empty, r *CountReply) error {
	r.N = c.count.n.Load()
	return nil
}

// Wait blocks until the executions reach a target, or a timeout (at most
// a minute, so a lost client cannot pin a goroutine for long).
func (c *Control) Wait(_ context.Context, a *WaitArgs, r *CountReply) error {
	d := min(time.Duration(a.TimeoutMS)*time.Millisecond, time.Minute)
	r.N, r.Reached = c.count.wait(a.Target, d)
	return nil
}

// Stats ends a measurement and reports its cost.
func (c *Control) Stats(_ context.Context, _ *Empty, s *ServerStats) error {
	u := readUsage().sub(c.base)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.samp == nil {
		return errors.New("stats without reset")
	}
	ctrl := c.ctrl.snapshot().sub(c.baseCtrl)
	data := c.data.snapshot().sub(c.baseData)
	s.SocketWrites, s.SocketBytes = data.writes, data.bytes
	m := c.metricsNow()
	s.CPUNanos = int64(u.CPU)
	s.Writes, s.Bytes = u.Writes, u.Bytes
	if s.Writes >= 0 {
		s.Writes -= ctrl.writes
	}
	if s.Bytes >= 0 {
		s.Bytes -= ctrl.bytes
	}
	s.PeakGoroutines, s.PeakRSS = c.samp.stop(c.resetOK)
	c.samp = nil
	s.Frames, s.ReplyFrames, s.Entries, s.Calls = m[0]-c.baseM[0], m[1]-c.baseM[1], m[2]-c.baseM[2], m[3]-c.baseM[3]
	return nil
}

// ioCounter is an rpcx server plugin (and, through ConnCreated, a client
// plugin) that counts the writes and bytes on the connections it wraps.
type ioCounter struct{ writes, bytes atomic.Int64 }

type ioSnapshot struct{ writes, bytes int64 }

func (s ioSnapshot) sub(t ioSnapshot) ioSnapshot {
	return ioSnapshot{s.writes - t.writes, s.bytes - t.bytes}
}

func (c *ioCounter) snapshot() ioSnapshot {
	return ioSnapshot{c.writes.Load(), c.bytes.Load()}
}

// HandleConnAccept wraps an accepted connection (server plugin).
func (c *ioCounter) HandleConnAccept(conn net.Conn) (net.Conn, bool) {
	return &countedConn{Conn: conn, c: c}, true
}

// ConnCreated wraps a dialled connection (client plugin).
func (c *ioCounter) ConnCreated(conn net.Conn) (net.Conn, error) {
	return &countedConn{Conn: conn, c: c}, nil
}

type countedConn struct {
	net.Conn
	c *ioCounter
}

func (cc *countedConn) Write(b []byte) (int, error) {
	cc.c.writes.Add(1)
	n, err := cc.Conn.Write(b)
	cc.c.bytes.Add(int64(n))
	return n, err
}

// controlClient is the harness's end of the control service; its own
// writes are counted so the client side can subtract them too.
type controlClient struct {
	rc *client.Client
	io ioCounter
}

func dialControl(addr string) (*controlClient, error) {
	cc := &controlClient{}
	opt := client.DefaultOption
	opt.ConnectTimeout = 3 * time.Second
	rc := client.NewClient(opt)
	pc := client.NewPluginContainer()
	pc.Add(&cc.io)
	rc.Plugins = pc
	if err := rc.Connect("tcp", addr); err != nil {
		return nil, fmt.Errorf("control connection to %s: %w", addr, err)
	}
	cc.rc = rc
	return cc, nil
}

// call runs one control method, bounded so that a stuck server cannot hang
// the harness.
func (cc *controlClient) call(ctx context.Context, timeout time.Duration, method string, args, reply any) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := cc.rc.Call(ctx, "Control", method, args, reply); err != nil {
		return fmt.Errorf("control %s: %w", method, err)
	}
	return nil
}

func (cc *controlClient) reset(ctx context.Context) (ServerInfo, error) {
	var info ServerInfo
	return info, cc.call(ctx, 30*time.Second, "Reset", &Empty{}, &info)
}

func (cc *controlClient) count(ctx context.Context) (int64, error) {
	var r CountReply
	return r.N, cc.call(ctx, 5*time.Second, "Count", &Empty{}, &r)
}

func (cc *controlClient) wait(ctx context.Context, target int64, timeout time.Duration) (CountReply, error) {
	var r CountReply
	a := &WaitArgs{Target: target, TimeoutMS: max(1, timeout.Milliseconds())}
	return r, cc.call(ctx, timeout+5*time.Second, "Wait", a, &r)
}

func (cc *controlClient) stats(ctx context.Context) (ServerStats, error) {
	var s ServerStats
	return s, cc.call(ctx, 10*time.Second, "Stats", &Empty{}, &s)
}

func (cc *controlClient) close() { cc.rc.Close() }
