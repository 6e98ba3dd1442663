package batchclient_test

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
)

// gateProxy forwards one connection; c2s and s2c can be paused; s2c can hold
// bytes and release them later.
type gateProxy struct {
	ln        net.Listener
	c2sPaused atomic.Bool
	s2cHold   atomic.Bool
	s2cDead   atomic.Bool
	mu        sync.Mutex
	held      []byte
	client    net.Conn
	done      chan struct{} // closed when the test ends: the forwarders stop
}

func (p *gateProxy) run(t *testing.T, backend string) {
	for {
		cc, err := p.ln.Accept()
		if err != nil {
			return
		}
		sc, err := net.Dial("tcp", backend)
		if err != nil {
			cc.Close()
			return
		}
		p.mu.Lock()
		p.client = cc
		p.mu.Unlock()
		go func() { // c2s
			b := make([]byte, 32<<10)
			for {
				for p.c2sPaused.Load() {
					select {
					case <-p.done:
						cc.Close()
						sc.Close()
						return
					case <-time.After(10 * time.Millisecond):
					}
				}
				n, err := cc.Read(b)
				if n > 0 {
					sc.Write(b[:n])
				}
				if err != nil {
					return
				}
			}
		}()
		go func() { // s2c
			b := make([]byte, 32<<10)
			for {
				n, err := sc.Read(b)
				if n > 0 {
					p.mu.Lock()
					if p.s2cHold.Load() {
						p.held = append(p.held, b[:n]...)
					} else if !p.s2cDead.Load() {
						cc.Write(b[:n])
					}
					p.mu.Unlock()
				}
				if err != nil {
					return
				}
			}
		}()
	}
}

func (p *gateProxy) release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.s2cHold.Store(false)
	p.s2cDead.Store(true) // frozen from now on, after this last answer
	p.client.Write(p.held)
	p.held = nil
}

// TestFrozenPeerDetectedDuringBlockedWrite: a peer that sends a reply during an attempt of a large
// write and then freezes (reads nothing, says nothing) must still be
// judged frozen.
func TestFrozenPeerDetectedDuringBlockedWrite(t *testing.T) {
	backend, _ := startServer(t, false)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	px := &gateProxy{ln: ln, done: make(chan struct{})}
	t.Cleanup(func() { close(px.done) })
	go px.run(t, backend)
	addr := ln.Addr().String()

	c := newClient(t, batchclient.WithLanes(1), batchclient.WithHeartbeat(300*time.Millisecond, time.Second))
	waitConnected(t, c, addr)
	var out []byte
	require.NoError(t, c.Call(ctxT(t, 10*time.Second), addr, "Echo", "Bytes", []byte("x"), &out))

	// 1. Hold the server's answers; a call goes through and its reply is held.
	px.s2cHold.Store(true)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		var o []byte
		c.Call(ctx, addr, "Echo", "Bytes", []byte("y"), &o)
	}()
	require.Eventually(t, func() bool { px.mu.Lock(); defer px.mu.Unlock(); return len(px.held) > 0 }, 5*time.Second, 5*time.Millisecond)
	// 2. The peer stops reading; a 14 MiB frame blocks the writer.
	px.c2sPaused.Store(true)
	big := make([]byte, 3<<20)
	for range 4 {
		require.NoError(t, c.Cast(ctxT(t, 10*time.Second), addr, "Echo", "Bytes", big))
	}
	// 3. During that write's first attempt the held reply arrives, then the peer is frozen.
	time.Sleep(1400 * time.Millisecond)
	px.release()
	t0 := time.Now()

	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Second)
	defer cancel()
	err = c.Call(ctx, addr, "Echo", "Bytes", []byte("z"), &out)
	t.Logf("call after freeze: %v after %v", err, time.Since(t0).Round(time.Millisecond))
	require.ErrorIs(t, err, batchclient.ErrConnection, "frozen peer not detected (HeartbeatTimeout 1s)")
}
