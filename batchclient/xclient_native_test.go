package batchclient_test

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/server"
	"github.com/smallnest/rpcx/share"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// metaSeen records the request metadata each stage of a server saw, per
// call (keyed by the call's "id" metadata or argument).
type metaSeen struct {
	mu   sync.Mutex
	seen map[string][]string
}

func (m *metaSeen) add(id, stage string, md map[string]string) {
	var kv []string
	for k, v := range md {
		if k == share.ServerTimeout {
			// The time left differs between runs: its presence and form
			// are compared, and that it is within the caller's timeout.
			if ms, err := strconv.Atoi(v); err != nil || ms <= 0 || ms > 5000 {
				v = "bad:" + v
			} else {
				v = "ok"
			}
		}
		kv = append(kv, k+"="+v)
	}
	sort.Strings(kv)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seen[id] = append(m.seen[id], stage+"{"+strings.Join(kv, ",")+"}")
}

// metaService's Note records the metadata its handler sees.
type metaService struct{ m *metaSeen }

// Note records the request metadata of call a.
func (s metaService) Note(ctx context.Context, a *testsvc.Args, r *testsvc.Reply) error {
	md, _ := ctx.Value(share.ReqMetaDataKey).(map[string]string)
	s.m.add(strconv.Itoa(a.A), "handler", md)
	r.C = a.A
	return nil
}

// readPlugin records the metadata rpcx's PostReadRequest hook sees.
type readPlugin struct{ m *metaSeen }

func (p readPlugin) PostReadRequest(_ context.Context, r *protocol.Message, _ error) error {
	if r.ServiceMethod == "Note" {
		p.m.add(r.ServicePath+"?", "read", r.Metadata)
	}
	return nil
}

// TestDropInNativeMetadataAsRPCX runs the same calls through rpcx's
// XClient and the drop-in's own path (which carries the server timeout in
// the frame instead of a map, and the server makes the map on demand) and
// compares the request metadata the handler, AuthFunc and a read plugin
// see, and what the caller's own map holds afterwards: with and without a
// deadline, with and without a map of the caller's, with and without
// Auth, for Call, Go and Oneshot.
func TestDropInNativeMetadataAsRPCX(t *testing.T) {
	run := func(t *testing.T, dropIn, withAuth, withHooks bool) []string {
		m := &metaSeen{seen: map[string][]string{}}
		s := server.NewServer()
		if withAuth {
			s.AuthFunc = func(_ context.Context, req *protocol.Message, token string) error {
				if req.ServiceMethod == "Note" {
					m.add("auth", "auth("+token+")", req.Metadata)
				}
				return nil
			}
		}
		if withHooks {
			s.Plugins.Add(readPlugin{m})
		}
		require.NoError(t, s.RegisterName("Meta", metaService{m}, ""))
		_, err := batchserver.New(s)
		require.NoError(t, err)
		addr, stop, err := testsvc.Serve(s)
		require.NoError(t, err)
		t.Cleanup(testsvc.StopWhenIdle(s, stop))

		d, err := client.NewPeer2PeerDiscovery("tcp@"+addr, "")
		require.NoError(t, err)
		var xc client.XClient
		if dropIn {
			xc = batchclient.NewXClient("Meta", client.Failtry, client.RandomSelect, d, client.DefaultOption)
		} else {
			xc = client.NewXClient("Meta", client.Failtry, client.RandomSelect, d, client.DefaultOption)
		}
		defer xc.Close()
		if withAuth {
			xc.Auth("tok")
		}
		if dropIn {
			require.True(t, batchclient.NativeCalls(xc), "the drop-in should run these calls on its own path")
		}

		var out []string
		id := 0
		for _, deadline := range []bool{false, true} {
			for _, callerMap := range []bool{false, true} {
				for _, how := range []string{"call", "go", "oneshot"} {
					id++
					ctx := context.Background()
					if deadline {
						var cancel context.CancelFunc
						ctx, cancel = context.WithTimeout(ctx, 5*time.Second)
						defer cancel()
					}
					var mine map[string]string
					if callerMap {
						mine = map[string]string{"k": "v"}
						ctx = context.WithValue(ctx, share.ReqMetaDataKey, mine)
					}
					args := &testsvc.Args{A: id}
					switch how {
					case "call":
						require.NoError(t, xc.Call(ctx, "Note", args, &testsvc.Reply{}))
					case "go":
						call, err := xc.Go(ctx, "Note", args, &testsvc.Reply{}, nil)
						require.NoError(t, err)
						select {
						case <-call.Done:
							require.NoError(t, call.Error)
						case <-time.After(5 * time.Second):
							t.Fatal("Go never completed")
						}
					case "oneshot":
						require.NoError(t, xc.Oneshot(ctx, "Note", args))
						deadline := time.Now().Add(5 * time.Second)
						for {
							m.mu.Lock()
							n := len(m.seen[strconv.Itoa(id)])
							m.mu.Unlock()
							if n > 0 {
								break
							}
							require.True(t, time.Now().Before(deadline), "oneshot %d never ran", id)
							time.Sleep(time.Millisecond)
						}
					}
					m.mu.Lock()
					line := fmt.Sprintf("%s deadline=%v map=%v: %v %v %v", how, deadline, callerMap,
						m.seen[strconv.Itoa(id)], m.seen["auth"], m.seen["Meta?"])
					delete(m.seen, "auth")
					delete(m.seen, "Meta?")
					m.mu.Unlock()
					if callerMap {
						m.add("caller", "after", mine)
						m.mu.Lock()
						line += fmt.Sprint(" caller", m.seen["caller"])
						delete(m.seen, "caller")
						m.mu.Unlock()
					}
					out = append(out, line)
				}
			}
		}
		return out
	}
	for _, withAuth := range []bool{false, true} {
		for _, withHooks := range []bool{false, true} {
			t.Run(fmt.Sprintf("auth=%v,hooks=%v", withAuth, withHooks), func(t *testing.T) {
				want := run(t, false, withAuth, withHooks)
				got := run(t, true, withAuth, withHooks)
				require.Equal(t, want, got)
			})
		}
	}
}

// whoService's Who answers with the name of its server.
type whoService struct{ name string }

// Who replies with the server's name in C's place (as a length).
func (w whoService) Who(_ context.Context, _ *testsvc.Args, r *testsvc.Reply) error {
	r.C = len(w.name)
	return nil
}

// TestDropInRandomChoosesAmongRPCXsServers checks that the drop-in's own
// random choice (made without rpcx's lock, from the discovery's list)
// leaves out the servers rpcx's XClient leaves out: state=inactive, and
// those not in Option.Group. Servers are told apart by the length of
// their names; both XClients must reach the same set.
func TestDropInRandomChoosesAmongRPCXsServers(t *testing.T) {
	names := []string{"a", "bb", "ccc", "dddd"}
	meta := []string{"group=g1", "group=g2", "state=inactive&group=g1", ""}
	var pairs []*client.KVPair
	for i, n := range names {
		s := server.NewServer()
		require.NoError(t, s.RegisterName("Who", whoService{n}, ""))
		_, err := batchserver.New(s)
		require.NoError(t, err)
		addr, stop, err := testsvc.Serve(s)
		require.NoError(t, err)
		t.Cleanup(testsvc.StopWhenIdle(s, stop))
		pairs = append(pairs, &client.KVPair{Key: "tcp@" + addr, Value: meta[i]})
	}
	reached := func(dropIn bool, group string) map[int]bool {
		d, err := client.NewMultipleServersDiscovery(pairs)
		require.NoError(t, err)
		opt := client.DefaultOption
		opt.Group = group
		var xc client.XClient
		if dropIn {
			xc = batchclient.NewXClient("Who", client.Failfast, client.RandomSelect, d, opt)
			require.True(t, batchclient.NativeCalls(xc))
		} else {
			xc = client.NewXClient("Who", client.Failfast, client.RandomSelect, d, opt)
		}
		defer xc.Close()
		got := map[int]bool{}
		for range 200 {
			var r testsvc.Reply
			require.NoError(t, xc.Call(ctxT(t, 5*time.Second), "Who", &testsvc.Args{}, &r))
			got[r.C] = true
		}
		return got
	}
	for _, group := range []string{"", "g1", "g2"} {
		want := reached(false, group)
		require.Equal(t, want, reached(true, group), "group %q", group)
	}
}
