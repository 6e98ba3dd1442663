package batchclient_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
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
