package lock

import (
	"net"
	"sync"
	"testing"
)

// cutProxy forwards TCP connections from one lock node to another until
// it is cut: from then on it drops every byte both ways (the connections
// stay open, as across a partition, and new ones are taken and left
// unanswered) until healed, when every connection that lived through the
// cut is closed, so that none resumes with bytes missing.
type cutProxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]bool // open conns, true: lived through a cut
	wg    sync.WaitGroup
}

// startCutProxy starts a proxy on a free loopback port to target; the
// test's cleanup stops it and waits for its goroutines.
func startCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target, conns: make(map[net.Conn]bool)}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *cutProxy) addr() string { return p.ln.Addr().String() }

func (p *cutProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

// serve forwards c to the target, both ways.
func (p *cutProxy) serve(c net.Conn) {
	defer p.wg.Done()
	p.mu.Lock()
	cut := p.cut
	p.track(c, cut)
	p.mu.Unlock()
	if cut {
		// Taken during the cut: nothing reaches the target, and nothing
		// comes back, until the heal closes it.
		p.drain(c)
		return
	}
	u, err := net.Dial("tcp", p.target)
	if err != nil {
		p.closeConn(c)
		return
	}
	p.mu.Lock()
	p.track(u, false)
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		p.pipe(u, c)
	}()
	p.pipe(c, u)
}

// track records conn (cut: it lives through one). p.mu is held.
func (p *cutProxy) track(c net.Conn, cut bool) {
	if p.conns == nil {
		// The proxy closed.
		c.Close()
		return
	}
	p.conns[c] = cut
}

// pipe copies src to dst, dropping what it reads while the proxy is cut.
func (p *cutProxy) pipe(src, dst net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if err != nil {
			p.closeConn(src)
			p.closeConn(dst)
			return
		}
		p.mu.Lock()
		cut := p.cut
		p.mu.Unlock()
		if cut {
			continue
		}
		if _, err := dst.Write(buf[:n]); err != nil {
			p.closeConn(src)
			p.closeConn(dst)
			return
		}
	}
}

// drain reads c until it closes, dropping everything.
func (p *cutProxy) drain(c net.Conn) {
	buf := make([]byte, 4<<10)
	for {
		if _, err := c.Read(buf); err != nil {
			p.closeConn(c)
			return
		}
	}
}

func (p *cutProxy) closeConn(c net.Conn) {
	c.Close()
	p.mu.Lock()
	if p.conns != nil {
		delete(p.conns, c)
	}
	p.mu.Unlock()
}

// setCut cuts the link (true) or heals it (false).
func (p *cutProxy) setCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	for c := range p.conns {
		if cut {
			p.conns[c] = true
		} else if p.conns[c] {
			// Bytes were dropped on it: its stream cannot resume.
			c.Close()
		}
	}
}

func (p *cutProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.conns = nil
	p.mu.Unlock()
	p.wg.Wait()
}
