package batchserver

import (
	"net"
	"sync"
	"time"

	"github.com/rpcxbatch/rpcxbatch/codec"
)

// poolPingEvery is how often, with a user pool, every lane is sent a
// server heartbeat: well within the lanes' default heartbeat timeout
// (2 s), and within a tuned one down to about 300 ms.
const poolPingEvery = 250 * time.Millisecond

// poolPinger keeps lanes from taking a server whose pool is busy for a
// frozen one.
//
// rpcx runs every request it reads on the pool of server.WithPool or
// server.WithCustomPool: batch frames, and lanes' heartbeats too. While
// every worker runs a handler slower than the lanes' heartbeat timeout (of
// a lane, of another lane, or plain requests), a lane hears nothing: no
// reply, no heartbeat answer (it waits for a worker). A plain rpcx client
// waits; a lane would give the server up (ErrHeartbeat) and fail calls
// plain rpcx completes. So with a pool, each lane is sent a server
// heartbeat (an rpcx heartbeat message, which lanes take as a sign of life
// and otherwise ignore) every poolPingEvery, from a goroutine that holds
// no worker. It runs while the plugin has connections.
type poolPinger struct {
	p *Plugin

	mu      sync.Mutex // guards running
	running bool
}

// start starts the pinging goroutine unless it runs.
func (pp *poolPinger) start() {
	pp.mu.Lock()
	start := claim(&pp.running)
	pp.mu.Unlock()
	if start {
		pp.p.tasks.spawn(pp.run)
	}
}

// run pings every connection until the plugin has none.
func (pp *poolPinger) run() {
	t := time.NewTicker(poolPingEvery)
	defer t.Stop()
	var conns []*conn
	for range t.C {
		pp.mu.Lock()
		conns = pp.p.allConns(conns[:0])
		if len(conns) == 0 {
			pp.running = false
			pp.mu.Unlock()
			return
		}
		pp.mu.Unlock()
		for i, c := range conns {
			c.ping()
			conns[i] = nil
		}
	}
}

// ping asks the connection's reply writer for a server heartbeat, and
// never blocks: a client that stops reading blocks only its own writer
// (until the write timeout closes it), never the pings of other lanes.
// A writer already at work needs none: what it writes is a sign of life,
// or it is stuck on this connection.
func (c *conn) ping() {
	c.replyMu.Lock()
	start := !c.broken && c.claimWriterLocked()
	if start {
		c.pingWanted.Store(true)
	}
	c.replyMu.Unlock()
	if start {
		c.startWriter()
	}
}

// appendPing appends a server heartbeat: an rpcx heartbeat message, which
// lanes take as a sign of life and otherwise ignore.
func appendPing(b []byte) []byte {
	h := codec.OnewayHeader(0)
	h.SetHeartbeat(true)
	return codec.AppendMessage(b, &h, "", "", nil, nil)
}

// allConns appends the plugin's connections to dst.
func (p *Plugin) allConns(dst []*conn) []*conn {
	p.connMu.Lock()
	defer p.connMu.Unlock()
	for _, c := range p.conns {
		dst = append(dst, c)
	}
	return dst
}

// keepLanesHeard starts the pinger when batched entries run on a user
// pool; the handshake of every lane calls it.
func (p *Plugin) keepLanesHeard() {
	if p.opts.Pool != nil {
		p.pinger.start()
	}
}

// handshakeRead keeps a lane whose handshake rpcx has just read, in its
// read loop, heard while the handshake waits for a worker of the user
// pool: the handshake is an rpcx request, queued behind the handlers
// running there, and a lane gives up a server it hears nothing from (see
// the client's Options.HandshakeTimeout). The connection's batch state is
// made here rather than in the handshake handler so the pinger sees it.
func (p *Plugin) handshakeRead(c net.Conn) {
	if p.opts.Pool != nil {
		p.conn(c)
		p.pinger.start()
	}
}
