package batchclient_test

import (
	"context"
	"encoding/hex"
	"fmt"
	"net"
	"sort"
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

// Issue 34: rpcx's client plugins on the drop-in, side by side with plain
// rpcx's XClient.

// hookRecorder is an rpcx client plugin with every hook rpcx v1.9.4
// defines (client/plugin.go); it records each call with its arguments.
// With only set, it records only those hooks.
type hookRecorder struct {
	mu     sync.Mutex
	events []string
	only   map[string]bool
}

func (h *hookRecorder) add(hook, format string, args ...any) {
	if h.only != nil && !h.only[hook] {
		return
	}
	h.mu.Lock()
	h.events = append(h.events, hook+" "+fmt.Sprintf(format, args...))
	h.mu.Unlock()
}

func (h *hookRecorder) list() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.events...)
}

// waitFor waits, at most 5 s, until an event starting with prefix is
// recorded.
func (h *hookRecorder) waitFor(t *testing.T, prefix string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		for _, e := range h.list() {
			if strings.HasPrefix(e, prefix) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q among %q", prefix, h.list())
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func remote(c net.Conn) string {
	if c == nil {
		return "<nil conn>"
	}
	return c.RemoteAddr().String()
}

// meta formats metadata in key order, without the deadline rpcx adds
// (its value is the time left).
func meta(m map[string]string) string {
	var kv []string
	for k, v := range m {
		if k != share.ServerTimeout {
			kv = append(kv, k+"="+v)
		}
	}
	sort.Strings(kv)
	return "{" + strings.Join(kv, ",") + "}"
}

func message(m *protocol.Message) string {
	return fmt.Sprintf("type=%v oneway=%v status=%v st=%v compress=%v %s.%s meta=%s payload=%s",
		m.MessageType(), m.IsOneway(), m.MessageStatusType(), m.SerializeType(), m.CompressType(),
		m.ServicePath, m.ServiceMethod, meta(m.Metadata), hex.EncodeToString(m.Payload))
}

func (h *hookRecorder) ConnCreated(c net.Conn) (net.Conn, error) {
	h.add("ConnCreated", "%s", remote(c))
	return c, nil
}

func (h *hookRecorder) ConnCreateFailed(network, address string) {
	h.add("ConnCreateFailed", "%s %s", network, address)
}

func (h *hookRecorder) ClientConnected(c net.Conn) (net.Conn, error) {
	h.add("ClientConnected", "%s", remote(c))
	return c, nil
}

func (h *hookRecorder) ClientConnectionClose(c net.Conn) error {
	h.add("ClientConnectionClose", "%s", remote(c))
	return nil
}

func (h *hookRecorder) PreCall(_ context.Context, servicePath, serviceMethod string, args any) error {
	h.add("PreCall", "%s.%s %+v", servicePath, serviceMethod, args)
	return nil
}

func (h *hookRecorder) PostCall(_ context.Context, servicePath, serviceMethod string, args, reply any, err error) error {
	h.add("PostCall", "%s.%s %+v %+v %v", servicePath, serviceMethod, args, reply, err)
	return nil
}

// ClientBeforeEncode records the request and stamps a trace id into its
// metadata, as a tracing plugin does.
func (h *hookRecorder) ClientBeforeEncode(m *protocol.Message) error {
	h.add("ClientBeforeEncode", "%s", message(m))
	if m.Metadata == nil {
		m.Metadata = map[string]string{}
	}
	m.Metadata["trace"] = "span-1"
	return nil
}

func (h *hookRecorder) ClientAfterDecode(m *protocol.Message) error {
	h.add("ClientAfterDecode", "%s", message(m))
	return nil
}

func (h *hookRecorder) WrapSelect(next client.SelectFunc) client.SelectFunc {
	return func(ctx context.Context, servicePath, serviceMethod string, args any) string {
		k := next(ctx, servicePath, serviceMethod, args)
		h.add("Select", "%s.%s %s", servicePath, serviceMethod, k)
		return k
	}
}

// traceArith is Arith whose Mul answers, in the response metadata, the
// trace id the request carried.
type traceArith struct{ testsvc.Arith }

func (traceArith) Mul(ctx context.Context, a *testsvc.Args, r *testsvc.Reply) error {
	req, _ := ctx.Value(share.ReqMetaDataKey).(map[string]string)
	if res, ok := ctx.Value(share.ResMetaDataKey).(map[string]string); ok && req["trace"] != "" {
		res["seen-trace"] = req["trace"]
	}
	r.C = a.A * a.B
	return nil
}

// startTraceServer serves traceArith, with the batch plugin unless plain.
func startTraceServer(t *testing.T, plain bool) string {
	t.Helper()
	s := server.NewServer()
	require.NoError(t, s.RegisterName("Arith", new(traceArith), ""))
	if !plain {
		_, err := batchserver.New(s)
		require.NoError(t, err)
	}
	addr, stop, err := testsvc.Serve(s)
	require.NoError(t, err)
	t.Cleanup(testsvc.StopWhenIdle(s, stop))
	return addr
}

// hookScenario runs the same calls over an XClient made by mk with the
// recorder added, and returns what it recorded: a call, a server's error,
// Go, SendRaw (when sendRaw), Oneshot, and Close.
func hookScenario(t *testing.T, mk func(client.ServiceDiscovery) client.XClient, addr string, sendRaw bool) []string {
	t.Helper()
	d, err := client.NewPeer2PeerDiscovery("tcp@"+addr, "")
	require.NoError(t, err)
	xc := mk(d)
	h := &hookRecorder{}
	xc.GetPlugins().Add(h)
	ctx := context.WithValue(ctxT(t, 10*time.Second), share.ReqMetaDataKey, map[string]string{"tag": "t1"})

	var r testsvc.Reply
	require.NoError(t, xc.Call(ctx, "Mul", &testsvc.Args{A: 6, B: 7}, &r))
	require.Equal(t, 42, r.C)
	// A fresh reply: plain rpcx decodes the zero reply rpcx's server
	// sends with an error into it, lanes leave it alone.
	require.Error(t, xc.Call(ctx, "Reject", &testsvc.Args{A: 1}, &testsvc.Reply{}))
	call, err := xc.Go(ctx, "Mul", &testsvc.Args{A: 2, B: 3}, &testsvc.Reply{}, nil)
	require.NoError(t, err)
	select {
	case c := <-call.Done:
		require.NoError(t, c.Error)
	case <-ctx.Done():
		t.Fatal("Go: no reply")
	}
	if sendRaw {
		sendRawMul(ctx, t, xc)
	}
	require.NoError(t, xc.Oneshot(ctx, "Mul", &testsvc.Args{A: 4, B: 5}))
	// rpcx sends a Oneshot from a goroutine of its own.
	h.waitFor(t, "ClientBeforeEncode type=0 oneway=true")
	require.NoError(t, xc.Close())
	h.waitFor(t, "ClientConnectionClose")
	return h.list()
}

// sendRawMul sends Arith.Mul with SendRaw.
func sendRawMul(ctx context.Context, t *testing.T, xc client.XClient) {
	t.Helper()
	raw := protocol.NewMessage()
	raw.SetMessageType(protocol.Request)
	raw.SetSerializeType(protocol.MsgPack)
	raw.SetSeq(1000)
	raw.ServicePath, raw.ServiceMethod = "Arith", "Mul"
	var err error
	raw.Payload, err = share.Codecs[protocol.MsgPack].Encode(&testsvc.Args{A: 3, B: 3})
	require.NoError(t, err)
	_, payload, err := xc.SendRaw(ctx, raw)
	require.NoError(t, err)
	require.NotEmpty(t, payload)
}

// Every client plugin hook of rpcx v1.9.4 runs on the drop-in, over lanes
// and over the plain fallback, as often, in the same order and with the
// same arguments as on plain rpcx's XClient; the metadata a
// ClientBeforeEncode plugin stamps reaches the server.
func TestClientPluginHooksRunAsOnPlain(t *testing.T) {
	for _, plainServer := range []bool{false, true} {
		name := map[bool]string{false: "lanes", true: "plain fallback"}[plainServer]
		addr := startTraceServer(t, plainServer)
		plain := hookScenario(t, func(d client.ServiceDiscovery) client.XClient {
			return client.NewXClient("Arith", client.Failfast, client.RoundRobin, d, client.DefaultOption)
		}, addr, plainServer)
		// SendRaw has no batch form: over lanes it opens the plain
		// connection too (and ConnCreated runs for it), so it is sent only
		// where the drop-in has that one connection.
		batch := hookScenario(t, func(d client.ServiceDiscovery) client.XClient {
			return batchclient.NewXClient("Arith", client.Failfast, client.RoundRobin, d, client.DefaultOption, batchclient.WithLanes(1))
		}, addr, plainServer)
		assert.Equal(t, plain, batch, name)
		var seen bool
		for _, e := range batch {
			seen = seen || (strings.HasPrefix(e, "ClientAfterDecode") && strings.Contains(e, "seen-trace=span-1"))
		}
		assert.True(t, seen, "%s: the trace id stamped in ClientBeforeEncode reached the server", name)
	}
}

// rpcx's ClientConnected and ClientConnectionClose plugins get the
// connection at the same moments on the drop-in as on plain rpcx, never a
// nil one: when the XClient first uses the server, when the connection is
// lost (the server restarts) and the next call connects again, and when
// the XClient closes.
func TestConnectionHooksSameMomentsAsPlain(t *testing.T) {
	run := func(mk func(client.ServiceDiscovery) client.XClient) []string {
		addr := freeAddr(t)
		s, _ := startServerAt(t, addr)
		d, err := client.NewPeer2PeerDiscovery("tcp@"+addr, "")
		require.NoError(t, err)
		xc := mk(d)
		h := &hookRecorder{only: map[string]bool{"ClientConnected": true, "ClientConnectionClose": true}}
		xc.GetPlugins().Add(h)
		var r testsvc.Reply
		require.NoError(t, xc.Call(ctxT(t, 5*time.Second), "Mul", &testsvc.Args{A: 2, B: 3}, &r))
		require.NoError(t, xc.Call(ctxT(t, 5*time.Second), "Mul", &testsvc.Args{A: 2, B: 3}, &r))

		// The server goes away and comes back at the same address.
		s.Close()
		h.waitFor(t, "ClientConnectionClose")
		startServerAt(t, addr)
		deadline := time.Now().Add(5 * time.Second)
		for xc.Call(ctxT(t, 5*time.Second), "Mul", &testsvc.Args{A: 2, B: 3}, &r) != nil {
			require.True(t, time.Now().Before(deadline), "no call got through after the restart")
			time.Sleep(10 * time.Millisecond)
		}
		require.NoError(t, xc.Close())
		return h.list()
	}
	plain := run(func(d client.ServiceDiscovery) client.XClient {
		return client.NewXClient("Arith", client.Failfast, client.RoundRobin, d, client.DefaultOption)
	})
	batch := run(func(d client.ServiceDiscovery) client.XClient {
		return batchclient.NewXClient("Arith", client.Failfast, client.RoundRobin, d, client.DefaultOption)
	})
	// The addresses differ (a server each); the hooks and their order
	// must not, nor may a connection be nil.
	strip := func(evs []string) []string {
		out := make([]string, len(evs))
		for i, e := range evs {
			hook, conn, _ := strings.Cut(e, " ")
			if conn != "<nil conn>" {
				conn = "conn"
			}
			out[i] = hook + " " + conn
		}
		return out
	}
	assert.Equal(t, []string{"ClientConnected conn", "ClientConnectionClose conn", "ClientConnected conn", "ClientConnectionClose conn"}, strip(plain), "plain rpcx")
	assert.Equal(t, strip(plain), strip(batch), "drop-in: %q", batch)
}
