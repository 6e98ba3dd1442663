package batchclient_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/server"
	"github.com/smallnest/rpcx/share"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// MetaArgs says what MetaSvc.Set puts in the response metadata, and
// whether it fails.
type MetaArgs struct {
	Set  map[string]string
	Fail string
}

// MetaSvc sets response metadata the rpcx way: through the map at
// share.ResMetaDataKey in the handler's context.
type MetaSvc struct{}

// Set copies a.Set into the response metadata and fails with a.Fail when
// it is not empty.
func (MetaSvc) Set(ctx context.Context, a *MetaArgs, r *testsvc.Reply) error {
	res, _ := ctx.Value(share.ResMetaDataKey).(map[string]string)
	for k, v := range a.Set {
		res[k] = v
	}
	r.C = len(a.Set)
	if a.Fail != "" {
		return errors.New(a.Fail)
	}
	return nil
}

// startMetaServer serves MetaSvc on loopback, with the batch plugin
// unless plain is set.
func startMetaServer(t *testing.T, plain bool) string {
	t.Helper()
	s := server.NewServer()
	if !plain {
		_, err := batchserver.New(s)
		require.NoError(t, err)
	}
	require.NoError(t, s.RegisterName("Meta", new(MetaSvc), ""))
	addr, stop, err := testsvc.Serve(s)
	require.NoError(t, err)
	t.Cleanup(testsvc.StopWhenIdle(s, stop))
	return addr
}

// metaCases are the scenarios every path runs: metadata or none, success
// or failure, and a map that already holds a key.
var metaCases = []struct {
	name string
	args MetaArgs
	pre  map[string]string // the caller's map before the call
}{
	{name: "metadata", args: MetaArgs{Set: map[string]string{"a": "1", "b": "two"}}},
	{name: "none", args: MetaArgs{}},
	{name: "kept keys", args: MetaArgs{Set: map[string]string{"a": "new"}}, pre: map[string]string{"a": "old", "mine": "x"}},
	{name: "error with metadata", args: MetaArgs{Set: map[string]string{"why": "quota"}, Fail: "over quota"}},
	{name: "error alone", args: MetaArgs{Fail: "plain failure"}},
}

// metaOutcome is what a caller sees of one call: the error text, the map
// at share.ResMetaDataKey, and (for Go) the call's ResMetadata.
type metaOutcome struct {
	Err         string
	Map         map[string]string
	ResMetadata map[string]string
}

// metaCall runs one case through call, with the response map in a plain
// context or in an rpcx share.Context.
func metaCall(t *testing.T, shared bool, pre map[string]string, call func(ctx context.Context) (map[string]string, error)) metaOutcome {
	t.Helper()
	m := map[string]string{}
	for k, v := range pre {
		m[k] = v
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if shared {
		sc := share.NewContext(ctx)
		sc.SetValue(share.ResMetaDataKey, m)
		ctx = sc
	} else {
		ctx = context.WithValue(ctx, share.ResMetaDataKey, m)
	}
	rm, err := call(ctx)
	o := metaOutcome{Map: m, ResMetadata: rm}
	if err != nil {
		o.Err = err.Error()
	}
	return o
}

// Response metadata reaches the caller as with rpcx v1.9.4: Call copies it
// into the map at share.ResMetaDataKey and adds share.ServerAddress (when
// the reply carried any), Go leaves the map alone and fills the call's
// ResMetadata. The same server is reached by plain rpcx's XClient, the
// drop-in XClient and batchclient.Client.Call, over lanes (batch server)
// and over the plain fallback (plain server, and a stopped address); every
// outcome must equal plain rpcx's.
func TestResponseMetadataAsRPCX(t *testing.T) {
	batchAddr := startMetaServer(t, false)
	plainAddr := startMetaServer(t, true)
	bc := newClient(t)
	stopped := newClient(t)

	for _, server := range []struct {
		name string
		addr string
	}{{"batch server", batchAddr}, {"plain server", plainAddr}} {
		addr := server.addr
		disc, err := client.NewPeer2PeerDiscovery("tcp@"+addr, "")
		require.NoError(t, err)
		plainXC := client.NewXClient("Meta", client.Failtry, client.RandomSelect, disc, client.DefaultOption)
		t.Cleanup(func() { plainXC.Close() })
		batchXC := batchclient.NewXClient("Meta", client.Failtry, client.RandomSelect, disc, client.DefaultOption)
		t.Cleanup(func() { batchXC.Close() })
		// A stopped address takes the plain fallback of Client.Call.
		stopped.Stop(addr)
		if server.name == "batch server" {
			waitConnected(t, bc, addr)
		}

		for _, tc := range metaCases {
			for _, shared := range []bool{false, true} {
				name := server.name + "/" + tc.name
				if shared {
					name += "/share.Context"
				}
				t.Run(name, func(t *testing.T) {
					args := tc.args
					want := metaCall(t, shared, tc.pre, func(ctx context.Context) (map[string]string, error) {
						return nil, plainXC.Call(ctx, "Set", &args, &testsvc.Reply{})
					})
					if len(args.Set) > 0 || args.Fail != "" {
						require.Equal(t, addr, want.Map[share.ServerAddress], "rpcx reports the server's address")
					}
					got := map[string]metaOutcome{
						"drop-in XClient.Call": metaCall(t, shared, tc.pre, func(ctx context.Context) (map[string]string, error) {
							return nil, batchXC.Call(ctx, "Set", &args, &testsvc.Reply{})
						}),
						"Client.Call": metaCall(t, shared, tc.pre, func(ctx context.Context) (map[string]string, error) {
							return nil, bc.Call(ctx, addr, "Meta", "Set", &args, &testsvc.Reply{})
						}),
						"Client.Call, stopped address": metaCall(t, shared, tc.pre, func(ctx context.Context) (map[string]string, error) {
							return nil, stopped.Call(ctx, addr, "Meta", "Set", &args, &testsvc.Reply{})
						}),
					}
					for path, o := range got {
						require.Equal(t, want, o, path)
					}

					goCall := func(xc client.XClient) func(ctx context.Context) (map[string]string, error) {
						return func(ctx context.Context) (map[string]string, error) {
							call, err := xc.Go(ctx, "Set", &args, &testsvc.Reply{}, nil)
							if err != nil {
								return nil, err
							}
							<-call.Done
							return call.ResMetadata, call.Error
						}
					}
					wantGo := metaCall(t, shared, tc.pre, goCall(plainXC))
					require.Equal(t, wantGo, metaCall(t, shared, tc.pre, goCall(batchXC)), "drop-in XClient.Go")
					require.Equal(t, wantGo, metaCall(t, shared, tc.pre, func(ctx context.Context) (map[string]string, error) {
						call := bc.Go(ctx, addr, "Meta", "Set", &args, &testsvc.Reply{}, nil)
						<-call.Done
						return call.ResMetadata, call.Error
					}), "Client.Go")
				})
			}
		}
	}
}
