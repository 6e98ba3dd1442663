package batchclient_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/share"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The differences the differential explorer (internal/explore) found
// after issue 43's items were fixed, each side by side: rpcx v1.9.4's
// XClient against the drop-in, over the same servers.

// preCallPlugin is a client plugin of the user's: with it the drop-in's
// calls go through rpcx's own XClient, not the drop-in's own call path.
type preCallPlugin struct{}

func (preCallPlugin) PreCall(context.Context, string, string, any) error { return nil }

// TestXClientCompareOneshotCancelledAtReturn: the first Oneshot of an
// XClient (and Go without a reply value, rpcx's oneway), its context
// cancelled as soon as the call returns (the usual `defer cancel()`):
// rpcx's Oneshot dials before it returns and writes the request on a
// goroutine that does not look at the context again, so the handler
// runs; it must on the drop-in too, whose lane handshake may still be
// under way when Oneshot returns. With a deadline and without one, on
// the drop-in's own call path and through rpcx's (a plugin of the user's),
// to a server with the plugin and to one without (the plain fallback).
func TestXClientCompareOneshotCancelledAtReturn(t *testing.T) {
	fleets := map[string]*cmpFleet{"batch": startCmpFleet(t, cmpFleetConfig{n: 1}), "plain": startCmpFleet(t, cmpFleetConfig{n: 1, plain: true})}
	for _, path := range []string{"batch/own", "batch/rpcx", "plain/own", "plain/rpcx"} {
		f := fleets[strings.Split(path, "/")[0]]
		for _, op := range []string{"Oneshot", "Go"} {
			for _, deadline := range []time.Duration{0, 2 * time.Second} {
				name := path + "/" + op + "/no-deadline"
				if deadline > 0 {
					name = path + "/" + op + "/deadline"
				}
				t.Run(name, func(t *testing.T) {
					var got []string
					for _, m := range xcMakers {
						f.log.take()
						xc := m.mk("Cmp", client.Failfast, client.RandomSelect, f.discovery(t, nil), client.DefaultOption)
						if strings.HasSuffix(path, "rpcx") {
							xc.GetPlugins().Add(preCallPlugin{})
						}
						ctx, cancel := context.WithCancel(context.Background())
						if deadline > 0 {
							ctx, cancel = context.WithTimeout(context.Background(), deadline)
						}
						req := map[string]string{"tag": "t1"}
						ctx = context.WithValue(ctx, share.ReqMetaDataKey, req)
						var err error
						if op == "Oneshot" {
							err = xc.Oneshot(ctx, "Do", &CmpArgs{A: 2, B: 3})
						} else {
							var call *client.Call
							call, err = xc.Go(ctx, "Do", &CmpArgs{A: 2, B: 3}, nil, nil)
							cancel()
							if err == nil {
								select {
								case <-call.Done:
									err = call.Error
								case <-time.After(10 * time.Second):
									t.Fatal("Go: no answer in 10 s")
								}
							}
						}
						cancel()
						o := finishOutcome(f, err, CmpReply{}, req, map[string]string{}, 1)
						xc.Close()
						b, jerr := json.Marshal(o)
						require.NoError(t, jerr)
						got = append(got, string(b))
					}
					assert.Equal(t, got[0], got[1], "rpcx (expected) against the drop-in (actual)")
				})
			}
		}
	}
}

// msgRecorder is a client plugin that records the messages
// ClientBeforeEncode and ClientAfterDecode get, whole (msgDesc, the
// compress flag and Seq).
type msgRecorder struct {
	path string
	ev   *eEvents
}

func (h msgRecorder) add(hook string, m *protocol.Message) {
	h.ev.add("%s %s seq=%s|%d compress=%v %s", h.path, hook, h.path, m.Seq(), m.CompressType(), msgDesc(m))
}

func (h msgRecorder) ClientBeforeEncode(m *protocol.Message) error {
	h.add("ClientBeforeEncode", m)
	return nil
}

func (h msgRecorder) ClientAfterDecode(m *protocol.Message) error {
	h.add("ClientAfterDecode", m)
	return nil
}

// seqLabelled replaces each "seq=<key>" in events by the order of the
// key's first appearance: Seq counts per connection on rpcx, so what is
// compared is that a response has its request's number and that each
// request has its own.
func seqLabelled(events []string) []string {
	labels := map[string]string{}
	out := make([]string, len(events))
	for i, e := range events {
		before, rest, ok := strings.Cut(e, " seq=")
		if !ok {
			out[i] = e
			continue
		}
		key, after, _ := strings.Cut(rest, " ")
		l, seen := labels[key]
		if !seen {
			l = fmt.Sprintf("#%d", len(labels))
			labels[key] = l
		}
		out[i] = before + " seq=" + l + " " + after
	}
	return out
}

// TestXClientCompareAfterDecodeMessages: the messages the XClient's
// ClientBeforeEncode and ClientAfterDecode plugins get, call by call: a
// value, a method's error (rpcx's server sends the reply beside it), a
// panic, rpcx's "can't find method", a function's error and panic (no
// reply beside them), AddHandler handlers, by Call, Go and Oneshot, with
// rpcx's ClientErrorFunc set: the same response metadata (the server's
// error text under __rpcx_error__, not what ClientErrorFunc made of it),
// the same payload (what the server sent, not the caller's reply value
// encoded again: none beside a function's error), and Seq numbers that
// pair each response with its request, distinct per request, as rpcx's.
func TestXClientCompareAfterDecodeMessages(t *testing.T) {
	useClientErrorFunc(t, func() *eEvents { return &eEvents{} })
	var got [][]string
	for i, m := range xcMakers {
		addr := startEServer(t, eServerConfig{plain: i == 0}, &eEvents{})
		ev := &eEvents{}
		xcs := map[string]client.XClient{}
		var side []string
		for _, c := range eCases() {
			xc := xcs[c.path]
			if xc == nil {
				xc = eXClient(t, m, c.path, addr, client.DefaultOption)
				xc.GetPlugins().Add(msgRecorder{path: c.path, ev: ev})
				xcs[c.path] = xc
			}
			ctx := context.WithValue(ctxT(t, 10*time.Second), share.ReqMetaDataKey, map[string]string{"tag": "t1"})
			reply := &EReply{C: 99}
			var err error
			switch c.kind {
			case "Call":
				err = xc.Call(ctx, c.method, c.args, reply)
			case "Go":
				var call *client.Call
				if call, err = xc.Go(ctx, c.method, c.args, reply, nil); err == nil {
					select {
					case <-call.Done:
						err = call.Error
					case <-time.After(10 * time.Second):
						t.Fatalf("%s: Go: no answer in 10 s", c.name)
					}
				}
			case "Oneshot":
				err = xc.Oneshot(ctx, c.method, c.args)
			}
			want := 2
			if c.kind == "Oneshot" {
				want = 1
			}
			side = append(side, fmt.Sprintf("%s: err=%s reply=%+v", c.name, errDesc(err), *reply))
			for _, e := range ev.take(want, 60*time.Millisecond, 3*time.Second) {
				side = append(side, c.name+": "+e)
			}
		}
		got = append(got, seqLabelled(side))
	}
	assert.Equal(t, got[0], got[1], "rpcx (expected) against the drop-in (actual)")
}

// traceStamper is a ClientBeforeEncode plugin that stamps a trace key into
// the request's metadata, as a tracing plugin does.
type traceStamper struct{}

func (traceStamper) ClientBeforeEncode(m *protocol.Message) error {
	if m.Metadata == nil {
		m.Metadata = map[string]string{}
	}
	m.Metadata["trace"] = "span-1"
	return nil
}

// TestXClientCompareGoCallMetadata: the Metadata of the *client.Call Go
// returns, with and without a deadline, a request metadata map of the
// caller's and a ClientBeforeEncode plugin: rpcx's Go puts
// "__ServerTimeout" for a deadline in the request's metadata (a map of
// its own when the caller has none) and the call's Metadata is that map,
// which the plugin then writes into; without a map and a deadline it is
// nil, and the plugin's key goes to the request alone.
func TestXClientCompareGoCallMetadata(t *testing.T) {
	f := startCmpFleet(t, cmpFleetConfig{n: 1})
	for _, plugin := range []bool{false, true} {
		for _, withMap := range []bool{false, true} {
			for _, d := range []time.Duration{0, 10 * time.Second} {
				t.Run(fmt.Sprintf("plugin=%v/map=%v/deadline=%v", plugin, withMap, d > 0), func(t *testing.T) {
					var got []string
					for _, m := range xcMakers {
						xc := m.mk("Cmp", client.Failfast, client.RandomSelect, f.discovery(t, nil), client.DefaultOption)
						t.Cleanup(func() { xc.Close() })
						if plugin {
							xc.GetPlugins().Add(traceStamper{})
						}
						ctx := context.Background()
						if d > 0 {
							ctx = ctxT(t, d)
						}
						if withMap {
							ctx = context.WithValue(ctx, share.ReqMetaDataKey, map[string]string{"tag": "t1"})
						}
						var r CmpReply
						call, err := xc.Go(ctx, "Do", &CmpArgs{A: 2, B: 3}, &r, nil)
						require.NoError(t, err)
						select {
						case <-call.Done:
						case <-time.After(10 * time.Second):
							t.Fatal("Go: no answer in 10 s")
						}
						meta := "nil"
						if call.Metadata != nil {
							meta = maskedMeta(call.Metadata)
						}
						got = append(got, fmt.Sprintf("err=%v reply=%+v metadata=%s", call.Error, r, meta))
					}
					assert.Equal(t, got[0], got[1], "rpcx (expected) against the drop-in (actual)")
				})
			}
		}
	}
}
