package reliability_test

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
	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/server"
	"github.com/smallnest/rpcx/share"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// capturedLog keeps everything rpcx's logger (and so the batch plugin,
// which logs through it) writes, so tests can look for secrets in it.
type capturedLog struct {
	mu  sync.Mutex
	buf strings.Builder
}

var capture = &capturedLog{}

func (l *capturedLog) add(s string) {
	l.mu.Lock()
	l.buf.WriteString(s)
	l.buf.WriteByte('\n')
	l.mu.Unlock()
}

func (l *capturedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// The rpcx log.Logger methods.
func (l *capturedLog) Debug(v ...any)            { l.add(fmt.Sprint(v...)) }
func (l *capturedLog) Debugf(f string, v ...any) { l.add(fmt.Sprintf(f, v...)) }
func (l *capturedLog) Info(v ...any)             { l.add(fmt.Sprint(v...)) }
func (l *capturedLog) Infof(f string, v ...any)  { l.add(fmt.Sprintf(f, v...)) }
func (l *capturedLog) Warn(v ...any)             { l.add(fmt.Sprint(v...)) }
func (l *capturedLog) Warnf(f string, v ...any)  { l.add(fmt.Sprintf(f, v...)) }
func (l *capturedLog) Error(v ...any)            { l.add(fmt.Sprint(v...)) }
func (l *capturedLog) Errorf(f string, v ...any) { l.add(fmt.Sprintf(f, v...)) }
func (l *capturedLog) Fatal(v ...any)            { l.add(fmt.Sprint(v...)) }
func (l *capturedLog) Fatalf(f string, v ...any) { l.add(fmt.Sprintf(f, v...)) }
func (l *capturedLog) Panic(v ...any)            { l.add(fmt.Sprint(v...)) }
func (l *capturedLog) Panicf(f string, v ...any) { l.add(fmt.Sprintf(f, v...)) }

// selfSigned makes a certificate for 127.0.0.1 and the pool that trusts it.
func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
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

// Lanes run over TLS with rpcx's own TLS option on the server; a client
// that does not trust the certificate cannot connect, and the plain
// fallback uses TLS too.
func TestTLSOnLanes(t *testing.T) {
	cert, pool := selfSigned(t)
	srvCfg := &tls.Config{Certificates: []tls.Certificate{cert}}
	addr, p := serve(t, server.NewServer(server.WithTLSConfig(srvCfg)), func(s *server.Server, _ *batchserver.Plugin) {
		require.NoError(t, s.RegisterName("Echo", new(testsvc.Echo), ""))
	})
	// The whole pool, so that every lane of it is a TLS connection.
	c := newClient(t, batchclient.WithTLS(&tls.Config{RootCAs: pool}), batchclient.WithLanes(p.Options().PoolSize))
	in := connect(t, c, addr)
	assert.Equal(t, p.Options().PoolSize, in.Lanes)
	for i := 0; i < 100; i++ {
		var out testsvc.Data
		require.NoError(t, c.Call(ctxT(t, 5*time.Second), addr, "Echo", "Data", testsvc.NewData(i%50), &out))
		require.Equal(t, *testsvc.NewData(i % 50), out)
	}

	untrusting := newClient(t, batchclient.WithTLS(&tls.Config{RootCAs: x509.NewCertPool()}))
	var out testsvc.Data
	err := untrusting.Call(ctxT(t, 5*time.Second), addr, "Echo", "Data", testsvc.NewData(1), &out)
	require.ErrorIs(t, err, batchclient.ErrPeerDown)
	var unknown x509.UnknownAuthorityError
	assert.True(t, errors.As(err, &unknown), "%v", err)

	plainAddr, _ := serve(t, server.NewServer(server.WithTLSConfig(srvCfg)), func(s *server.Server, _ *batchserver.Plugin) {
		require.NoError(t, s.RegisterName("Echo", new(testsvc.Echo), ""))
	}, batchserver.WithPoolSize(batchserver.Disabled))
	require.NoError(t, c.Call(ctxT(t, 5*time.Second), plainAddr, "Echo", "Data", testsvc.NewData(2), &out))
	assert.True(t, c.Info(plainAddr).Plain)
}

// Auth on the batch path: a token never shows in an error a caller gets or
// in what the server logs, whether the handshake, a frame or one entry is
// refused.
func TestTokensNeverInErrorsOrLogs(t *testing.T) {
	const good, badConn, badEntry = "good-7f3a", "conn-secret-91c2", "entry-secret-5d8e"
	addr, _ := serve(t, server.NewServer(), func(s *server.Server, _ *batchserver.Plugin) {
		s.AuthFunc = func(_ context.Context, _ *protocol.Message, token string) error {
			if token != good {
				return errors.New("invalid token")
			}
			return nil
		}
		require.NoError(t, s.RegisterName("Echo", new(testsvc.Echo), ""))
	})
	withToken := func(tok string) context.Context {
		return context.WithValue(ctxT(t, 5*time.Second), share.ReqMetaDataKey, map[string]string{share.AuthKey: tok})
	}
	var errs []error
	var out testsvc.Data

	// A refused handshake.
	bad := newClient(t, batchclient.WithAuth(badConn))
	err := bad.Call(withToken(badConn), addr, "Echo", "Data", testsvc.NewData(1), &out)
	require.Error(t, err)
	var se client.ServiceError
	require.True(t, errors.As(err, &se), "%T %v", err, err)
	errs = append(errs, err)

	// Refused entries on an accepted connection.
	c := newClient(t, batchclient.WithAuth(good))
	require.NoError(t, c.Call(withToken(good), addr, "Echo", "Data", testsvc.NewData(1), &out))
	for i := 0; i < 5; i++ {
		err := c.Call(withToken(badEntry), addr, "Echo", "Data", testsvc.NewData(1), &out)
		require.Error(t, err)
		errs = append(errs, err)
	}
	// The drop-in XClient, through its Auth.
	d, err := client.NewPeer2PeerDiscovery("tcp@"+addr, "")
	require.NoError(t, err)
	xc := batchclient.NewXClient("Echo", client.Failfast, client.RandomSelect, d, client.DefaultOption)
	defer xc.Close()
	xc.Auth(badConn)
	err = xc.Call(ctxT(t, 5*time.Second), "Data", testsvc.NewData(1), &out)
	require.Error(t, err)
	errs = append(errs, err)

	logs := capture.String()
	for _, e := range errs {
		for _, secret := range []string{badConn, badEntry, good} {
			assert.NotContains(t, e.Error(), secret)
			assert.NotContains(t, fmt.Sprintf("%+v", e), secret)
		}
	}
	for _, secret := range []string{badConn, badEntry, good} {
		assert.NotContains(t, logs, secret, "a token reached the log")
	}
}
