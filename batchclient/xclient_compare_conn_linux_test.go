//go:build linux

package batchclient_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/server"
	"github.com/smallnest/rpcx/serverplugin"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// Issue 43, connecting: what a connection is made with, and the hooks of
// a connection the server refuses, on rpcx's XClient and on the drop-in.

// selfSignedCert makes a certificate for 127.0.0.1 and the pool that
// trusts it.
func selfSignedCert(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "rpcxbatch test"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pool
}

// startConnServer serves CmpSvc with the batch plugin, over TLS when
// cert is set, with the given server plugins.
func startConnServer(t *testing.T, cert *tls.Certificate, plugins ...server.Plugin) string {
	t.Helper()
	var opts []server.OptionFn
	if cert != nil {
		opts = append(opts, server.WithTLSConfig(&tls.Config{Certificates: []tls.Certificate{*cert}}))
	}
	s := server.NewServer(opts...)
	for _, p := range plugins {
		s.Plugins.Add(p)
	}
	_, err := batchserver.New(s)
	require.NoError(t, err)
	require.NoError(t, s.RegisterName("Cmp", &CmpSvc{name: "s0", log: &cmpLog{}}, ""))
	addr, stop, err := testsvc.Serve(s)
	require.NoError(t, err)
	t.Cleanup(testsvc.StopWhenIdle(s, stop))
	return addr
}

// connCatcher is a client plugin that keeps the connections ConnCreated
// gets.
type connCatcher struct {
	mu    sync.Mutex
	conns []net.Conn
}

func (c *connCatcher) ConnCreated(conn net.Conn) (net.Conn, error) {
	c.mu.Lock()
	c.conns = append(c.conns, conn)
	c.mu.Unlock()
	return conn, nil
}

func (c *connCatcher) first(t *testing.T) net.Conn {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	require.NotEmpty(t, c.conns, "ConnCreated never ran")
	return c.conns[0]
}

// Option.TCPKeepAlivePeriod (issue 43, item 16): rpcx applies it to a
// plain *net.TCPConn only, and only when above 0; otherwise the
// connection keeps Go's default keep-alive (on, 15 s). Over TLS, with a
// period, and with a negative one: the same socket options on the
// connection the drop-in's XClient makes as on rpcx's.
func TestXClientCompareTCPKeepAlive(t *testing.T) {
	cert, pool := selfSignedCert(t)
	plainAddr := startConnServer(t, nil)
	tlsAddr := startConnServer(t, &cert)
	cases := []struct {
		name   string
		addr   string
		tls    bool
		period time.Duration
	}{
		{"tcp/37s", plainAddr, false, 37 * time.Second},
		{"tcp/-1s", plainAddr, false, -time.Second},
		{"tcp/0", plainAddr, false, 0},
		{"tls/37s", tlsAddr, true, 37 * time.Second},
		{"tls/-1s", tlsAddr, true, -time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got [2]string
			for mi, m := range xcMakers {
				opt := client.DefaultOption
				opt.TCPKeepAlivePeriod = tc.period
				if tc.tls {
					opt.TLSConfig = &tls.Config{RootCAs: pool}
				}
				d, err := client.NewPeer2PeerDiscovery("tcp@"+tc.addr, "")
				require.NoError(t, err)
				xc := newCmpXClient(t, m, client.Failfast, client.RoundRobin, d, opt)
				cc := &connCatcher{}
				xc.GetPlugins().Add(cc)
				var r CmpReply
				require.NoError(t, xc.Call(ctxT(t, 5*time.Second), "Do", &CmpArgs{A: 1, B: 2}, &r))
				conn := cc.first(t)
				if tc, ok := conn.(*tls.Conn); ok {
					conn = tc.NetConn()
				}
				on, idle := keepAlive(t, conn)
				got[mi] = fmt.Sprintf("keep-alive %v, idle %v", on, idle)
			}
			assert.Equal(t, got[0], got[1], "rpcx (expected) against the drop-in (actual)")
		})
	}
}

// A client whose TLS roots do not trust the server (issue 43, item 15):
// rpcx makes one TLS handshake per call and nothing in between; a
// certificate error is not transient, so the drop-in does not redial it
// in the background either. Two calls and a pause: the same number of
// connections reach the server, and both XClients fail with the
// certificate's error.
func TestXClientCompareUntrustedCertificate(t *testing.T) {
	cert, _ := selfSignedCert(t)
	for _, m := range xcMakers {
		t.Run(m.name, func(t *testing.T) {
			// Counted by a proxy in front: rpcx's server runs no plugin for
			// a connection whose TLS handshake failed.
			px := startStallProxy(t, startConnServer(t, &cert))
			addr := px.addr()
			opt := client.DefaultOption
			opt.TLSConfig = &tls.Config{RootCAs: x509.NewCertPool(), ServerName: "127.0.0.1"}
			d, err := client.NewPeer2PeerDiscovery("tcp@"+addr, "")
			require.NoError(t, err)
			xc := newCmpXClient(t, m, client.Failfast, client.RoundRobin, d, opt)
			for i := range 2 {
				var r CmpReply
				err := xc.Call(ctxT(t, 5*time.Second), "Do", &CmpArgs{A: 1, B: 2}, &r)
				var unknown x509.UnknownAuthorityError
				require.True(t, errors.As(err, &unknown), "call %d: %v", i, err)
			}
			time.Sleep(1500 * time.Millisecond)
			assert.Equal(t, int64(2), px.accepted.Load(), "%s: connections made for 2 calls", m.name)
		})
	}
}

// A connection the server refuses at accept (issue 43, item 24: rpcx's
// BlacklistPlugin closes it in HandleConnAccept): rpcx's dial succeeded,
// so its client runs ConnCreated and ClientConnected, then
// ClientConnectionClose when the call's read fails, and the call fails
// with a connection error, for each call. The drop-in runs the same hooks
// in the same order.
func TestXClientCompareRefusedAtAccept(t *testing.T) {
	bl := &serverplugin.BlacklistPlugin{Blacklist: map[string]bool{"127.0.0.1": true}}
	addr := startConnServer(t, nil, bl)
	var got [2][]string
	for mi, m := range xcMakers {
		d, err := client.NewPeer2PeerDiscovery("tcp@"+addr, "")
		require.NoError(t, err)
		xc := newCmpXClient(t, m, client.Failfast, client.RoundRobin, d, client.DefaultOption)
		h := &hookRecorder{only: map[string]bool{"ConnCreated": true, "ConnCreateFailed": true, "ClientConnected": true, "ClientConnectionClose": true}}
		xc.GetPlugins().Add(h)
		for i := range 2 {
			var r CmpReply
			err := xc.Call(ctxT(t, 5*time.Second), "Do", &CmpArgs{A: 1, B: 2}, &r)
			require.Error(t, err, "%s: call %d", m.name, i)
			h.waitFor(t, "ClientConnectionClose")
			time.Sleep(50 * time.Millisecond)
		}
		for _, e := range h.list() {
			hook, _, _ := strings.Cut(e, " ")
			got[mi] = append(got[mi], hook)
		}
	}
	assert.Equal(t, got[0], got[1], "rpcx (expected) against the drop-in (actual)")
}

var _ = context.Background

// Option.IdleTimeout (issue 43, item 17): rpcx's client drops a
// connection nothing was read from for that long (its read deadline,
// renewed at each message read and each send): the server sees the
// connection close, the client runs ClientConnectionClose, and the next
// call connects again. The drop-in's lanes do the same, with the same
// hooks and the same connections on the server.
func TestXClientCompareIdleTimeout(t *testing.T) {
	var got [2][]string
	for mi, m := range xcMakers {
		cc := &connCounter{}
		addr := startConnServer(t, nil, cc)
		opt := client.DefaultOption
		opt.IdleTimeout = 300 * time.Millisecond
		d, err := client.NewPeer2PeerDiscovery("tcp@"+addr, "")
		require.NoError(t, err)
		xc := newCmpXClient(t, m, client.Failfast, client.RoundRobin, d, opt)
		h := &hookRecorder{only: map[string]bool{"ConnCreated": true, "ClientConnected": true, "ClientConnectionClose": true}}
		xc.GetPlugins().Add(h)
		step := func(name string) {
			var hooks []string
			for _, e := range h.list() {
				hook, _, _ := strings.Cut(e, " ")
				hooks = append(hooks, hook)
			}
			got[mi] = append(got[mi], fmt.Sprintf("%s: hooks %v, server accepted %d, open %d", name, hooks, cc.accepted.Load(), cc.open.Load()))
		}
		var r CmpReply
		require.NoError(t, xc.Call(ctxT(t, 5*time.Second), "Do", &CmpArgs{A: 1, B: 2}, &r))
		step("after a call")
		// Idle for over twice IdleTimeout: the connection is gone on both
		// ends.
		h.waitFor(t, "ClientConnectionClose")
		require.Eventually(t, func() bool { return cc.open.Load() == 0 }, 5*time.Second, 5*time.Millisecond, "%s: the server's connection stayed open", m.name)
		step("idle")
		require.NoError(t, xc.Call(ctxT(t, 5*time.Second), "Do", &CmpArgs{A: 1, B: 2}, &r))
		step("after the next call")
	}
	assert.Equal(t, got[0], got[1], "rpcx (expected) against the drop-in (actual)")
}
