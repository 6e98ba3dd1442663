package explore

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"sync"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/server"

	"github.com/rpcxbatch/rpcxbatch/batchserver"
)

// A side's fleet: the scenario's servers on loopback, plain rpcx or with
// the batch plugin, recording into the side's recorder.

type fleetServer struct {
	name, role, addr string
	srv              *server.Server
	hooks            *serverHooks
	hung             *hungServer
}

type fleet struct {
	rec     *recorder
	mask    *masker
	servers []*fleetServer
}

// startFleet starts sc's servers; stop them with stop.
func startFleet(sc *Scenario, batch bool, rec *recorder) (*fleet, error) {
	f := &fleet{rec: rec, mask: &masker{addrs: map[string]string{}, homogeneous: sc.homogeneous(), seqs: newSeenSeqs()}}
	for i, role := range sc.Servers {
		fs := &fleetServer{name: fmt.Sprintf("%s%d", role, i), role: role}
		f.servers = append(f.servers, fs)
		var err error
		switch role {
		case roleDown:
			fs.addr, err = freeAddr()
		case roleHung:
			fs.hung, err = startHung(rec, fs.name)
			if err == nil {
				fs.addr = fs.hung.ln.Addr().String()
			}
		default:
			err = f.startServer(sc, batch, fs)
		}
		if err != nil {
			f.stop()
			return nil, err
		}
		f.mask.addrs[fs.addr] = fs.name
	}
	return f, nil
}

func (f *fleet) startServer(sc *Scenario, batch bool, fs *fleetServer) error {
	var opts []server.OptionFn
	if sc.TLS != tlsOff {
		cert, _ := testCert()
		opts = append(opts, server.WithTLSConfig(&tls.Config{Certificates: []tls.Certificate{cert}}))
	}
	s := server.NewServer(opts...)
	fs.srv = s
	if sc.ServerPlugins {
		fs.hooks = &serverHooks{rec: f.rec, name: fs.name}
		s.Plugins.Add(fs.hooks)
	}
	if sc.ServerErrorFunc {
		s.ServerErrorFunc = func(_ *protocol.Message, err error) string { return "server-said: " + err.Error() }
	}
	if sc.HandleServiceError {
		rec, name := f.rec, fs.name
		s.HandleServiceError = func(err error) { rec.add(name, ev("HandleServiceError", "err", errString(err))) }
	}
	if batch {
		if _, err := batchserver.New(s); err != nil {
			return err
		}
	}
	st := &srvState{name: fs.name, replyName: fs.name, slow: fs.role == roleSlow, rec: f.rec}
	if sc.homogeneous() || len(sc.Servers) > 1 {
		// Which of several servers answered a fan-out call is a race; the
		// response metadata still names the server.
		st.replyName = "srv"
	}
	if err := st.register(s); err != nil {
		return err
	}
	go s.Serve("tcp", "127.0.0.1:0")
	for deadline := time.Now().Add(5 * time.Second); s.Address() == nil; {
		if time.Now().After(deadline) {
			return errors.New("explore: server did not start")
		}
		time.Sleep(time.Millisecond)
	}
	fs.addr = s.Address().String()
	return nil
}

// pairs are the discovery's pairs, in the scenario's order; each value
// names its server for the ordered selector.
func (f *fleet) pairs() []*client.KVPair {
	var out []*client.KVPair
	for i, s := range f.servers {
		out = append(out, &client.KVPair{Key: "tcp@" + s.addr, Value: fmt.Sprintf("ord=%d", i)})
	}
	return out
}

// preReads is each server's PreReadRequest count since the last call,
// as events of a stream of its own ("<name> reads").
func (f *fleet) preReads() map[string][]Event {
	out := map[string][]Event{}
	for _, s := range f.servers {
		if s.hooks != nil {
			if n := s.hooks.takePreReads(); n > 0 {
				out[s.name+" reads"] = []Event{ev("PreReadRequest", "count", fmt.Sprint(n))}
			}
		}
	}
	return out
}

func (f *fleet) stop() {
	f.rec.freeze()
	for _, s := range f.servers {
		if s.srv != nil {
			s.srv.Close()
		}
		if s.hung != nil {
			s.hung.close()
		}
	}
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// hungServer accepts connections and reads them, and never answers: a
// hung process. Each accept is an event of its stream.
type hungServer struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
	wg    sync.WaitGroup
}

func startHung(rec *recorder, name string) (*hungServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	h := &hungServer{ln: ln}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			rec.add(name, ev("accept"))
			h.mu.Lock()
			h.conns = append(h.conns, c)
			h.mu.Unlock()
			h.wg.Add(1)
			go func() {
				defer h.wg.Done()
				io.Copy(io.Discard, c)
			}()
		}
	}()
	return h, nil
}

func (h *hungServer) close() {
	h.ln.Close()
	h.mu.Lock()
	for _, c := range h.conns {
		c.Close()
	}
	h.mu.Unlock()
	h.wg.Wait()
}

var (
	certOnce sync.Once
	cert     tls.Certificate
	certPool *x509.CertPool
)

// testCert is a certificate for 127.0.0.1 and the pool that trusts it,
// made once.
func testCert() (tls.Certificate, *x509.CertPool) {
	certOnce.Do(func() {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			panic(err)
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(1),
			Subject:      pkix.Name{CommonName: "rpcxbatch explore"},
			IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
			NotBefore:    time.Now().Add(-time.Hour),
			NotAfter:     time.Now().Add(24 * time.Hour),
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			panic(err)
		}
		c, err := x509.ParseCertificate(der)
		if err != nil {
			panic(err)
		}
		certPool = x509.NewCertPool()
		certPool.AddCert(c)
		cert = tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	})
	return cert, certPool
}
