package batchclient_test

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/share"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// More of the XClient comparison suite (see xclient_compare_test.go):
// plugin hooks under the fail modes, Broadcast, Fork, Inform, SendRaw,
// discovery updates and Close.

// TestXClientCompareHooks: rpcx's PreCall, PostCall, ClientConnected and
// ClientConnectionClose plugins run as often, in the same order and with
// the same arguments on both XClients when fail modes retry: a server
// down (Failtry retries the dial, Failover the next server, neither runs
// PreCall for a server it could not reach), a service error (no retry),
// a PreCall plugin's error (not a service error: Failtry and Failover
// retry it, PreCall runs again), Go and Oneshot (no PreCall/PostCall),
// and Close. The user's SortedSelector makes the order deterministic.
func TestXClientCompareHooks(t *testing.T) {
	f := startCmpFleet(t, cmpFleetConfig{n: 1, dead: 1})
	opt := client.DefaultOption
	opt.Retries = 2
	for _, mode := range []struct {
		name string
		fm   client.FailMode
	}{{"Failfast", client.Failfast}, {"Failtry", client.Failtry}, {"Failover", client.Failover}} {
		t.Run(mode.name, func(t *testing.T) {
			var got [][]string
			for _, m := range xcMakers {
				f.log.take()
				xc := m.mk("Cmp", mode.fm, client.SelectByUser, f.discovery(t, nil), opt)
				xc.SetSelector(&sortedSelector{})
				h := &hookRecorder{only: map[string]bool{"PreCall": true, "PostCall": true, "ClientConnected": true, "ClientConnectionClose": true}}
				xc.GetPlugins().Add(h)
				var events []string
				note := func(step string, o cmpOutcome) {
					b, err := json.Marshal(o)
					require.NoError(t, err)
					events = append(events, step+" "+string(b))
				}
				for i := range 4 {
					note(fmt.Sprintf("call %d", i), callOnce(t, f, xc, 10*time.Second, true, &CmpArgs{A: i, B: 5}, -1))
				}
				note("service error", callOnce(t, f, xc, 10*time.Second, true, &CmpArgs{A: 1, B: 5, Fail: map[string]string{"*": "no"}}, -1))
				note("go", goOnce(t, f, xc, 10*time.Second, true, &CmpArgs{A: 2, B: 5}, -1))
				note("go", goOnce(t, f, xc, 10*time.Second, true, &CmpArgs{A: 2, B: 5}, -1))
				note("oneshot", oneshotOnce(t, f, xc, 10*time.Second, true, &CmpArgs{A: 3, B: 5}, 0))
				note("oneshot", oneshotOnce(t, f, xc, 10*time.Second, true, &CmpArgs{A: 3, B: 5}, 0))
				note("close", cmpOutcome{Err: describeErr(f, xc.Close())})
				h.waitFor(t, "ClientConnectionClose")
				for _, e := range h.list() {
					events = append(events, f.normalize(e))
				}
				got = append(got, events)
			}
			assert.Equal(t, got[0], got[1], "rpcx (expected) against the drop-in (actual)")
		})
	}
}

// multiOutcome is what a Broadcast, Fork or Inform did.
type multiOutcome struct {
	Err      *cmpErr
	Reply    CmpReply
	Receipts []string
	Runs     []cmpRun
}

// TestXClientCompareMulticast: Broadcast, Fork and Inform over three
// batch servers, over two with one handler failing, over two and a server
// down, and over plain servers, with and without a deadline: the same
// errors, replies (the value, not which server gave it), receipts
// (address, reply, error) and handler runs on both XClients.
//
// rpcx's Broadcast and Fork return while other calls may still be in
// flight, and cancel their context; rpcx v1.9.4's Client.call then reads
// the call's sequence number unsynchronised with its sending goroutine,
// and Broadcast's goroutines may still append to the error it returned:
// data races inside rpcx that -race reports. So the handlers are arranged
// for every other call to end before the one that decides: Fork's losers
// fail at once and its winner sleeps 100 ms; Broadcast's failing handler
// fails after 100 ms.
func TestXClientCompareMulticast(t *testing.T) {
	fleets := []struct {
		name string
		cfg  cmpFleetConfig
		fail bool // one handler (s1) fails
	}{
		{"three", cmpFleetConfig{n: 3}, false},
		{"one failing", cmpFleetConfig{n: 2}, true},
		{"one down", cmpFleetConfig{n: 2, dead: 1}, false},
		{"plain", cmpFleetConfig{n: 2, plain: true}, false},
	}
	argsFor := func(op string, fail bool) CmpArgs {
		a := CmpArgs{A: 6, B: 7}
		switch {
		case op == "Fork" && fail:
			a.Fail = map[string]string{"*": "refused"}
		case op == "Fork":
			a.Fail = map[string]string{"*": "refused", "s0": ""}
			a.SleepMs = map[string]int{"s0": 100}
		case fail:
			a.Fail = map[string]string{"s1": "s1 refuses"}
			a.SleepMs = map[string]int{"s1": 100}
		}
		return a
	}
	for _, fl := range fleets {
		f := startCmpFleet(t, fl.cfg)
		for _, op := range []string{"Broadcast", "Fork", "Inform"} {
			for _, d := range []time.Duration{10 * time.Second, 0} {
				t.Run(fmt.Sprintf("%s/%s/deadline=%v", fl.name, op, d > 0), func(t *testing.T) {
					var got []multiOutcome
					for _, m := range xcMakers {
						f.log.take()
						xc := newCmpXClient(t, m, client.Failtry, client.RoundRobin, f.discovery(t, nil), client.DefaultOption)
						ctx, _, _ := cmpCtx(t, d, false, nil)
						args := argsFor(op, fl.fail)
						var o multiOutcome
						var r CmpReply
						var err error
						switch op {
						case "Broadcast":
							err = xc.Broadcast(ctx, "Do", &args, &r)
						case "Fork":
							err = xc.Fork(ctx, "Do", &args, &r)
						case "Inform":
							var rs []client.Receipt
							rs, err = xc.Inform(ctx, "Do", &args, &CmpReply{})
							for _, rc := range rs {
								o.Receipts = append(o.Receipts, fmt.Sprintf("%s %+v %v", f.name(rc.Address), rc.Reply, rc.Error))
							}
							sort.Strings(o.Receipts)
						}
						o.Err = describeErr(f, err)
						o.Reply = CmpReply{C: r.C}
						f.log.settle(0)
						o.Runs = f.log.take()
						sort.Slice(o.Runs, func(i, j int) bool { return o.Runs[i].Server < o.Runs[j].Server })
						got = append(got, o)
					}
					assert.Equal(t, got[0], got[1], "rpcx (expected) against the drop-in (actual)")
				})
			}
		}
	}
}

// TestXClientCompareSendRaw: SendRaw of a request to CmpSvc.Do, answered
// and refused by the handler, over a batch server and a plain one: the
// same response metadata, payload, error and handler run on both.
func TestXClientCompareSendRaw(t *testing.T) {
	for _, plain := range []bool{false, true} {
		f := startCmpFleet(t, cmpFleetConfig{n: 1, plain: plain})
		for _, fail := range []bool{false, true} {
			t.Run(fmt.Sprintf("plain=%v/fail=%v", plain, fail), func(t *testing.T) {
				type rawOutcome struct {
					Meta  string
					Reply CmpReply
					Err   *cmpErr
					Runs  []cmpRun
				}
				var got []rawOutcome
				for _, m := range xcMakers {
					f.log.take()
					xc := newCmpXClient(t, m, client.Failtry, client.RoundRobin, f.discovery(t, nil), client.DefaultOption)
					args := &CmpArgs{A: 4, B: 4, ResMeta: true}
					if fail {
						args.Fail = map[string]string{"*": "raw refused"}
					}
					raw := protocol.NewMessage()
					raw.SetMessageType(protocol.Request)
					raw.SetSerializeType(protocol.MsgPack)
					raw.ServicePath, raw.ServiceMethod = "Cmp", "Do"
					raw.Metadata = map[string]string{"raw": "1"}
					var err error
					raw.Payload, err = share.Codecs[protocol.MsgPack].Encode(args)
					require.NoError(t, err)
					ctx, _, _ := cmpCtx(t, 10*time.Second, false, nil)
					meta, payload, err := xc.SendRaw(ctx, raw)
					o := rawOutcome{Meta: f.normalize(maskedMeta(meta)), Err: describeErr(f, err)}
					if len(payload) > 0 {
						require.NoError(t, share.Codecs[protocol.MsgPack].Decode(payload, &o.Reply))
					}
					o.Runs = f.log.take()
					got = append(got, o)
				}
				assert.Equal(t, got[0], got[1], "rpcx (expected) against the drop-in (actual)")
			})
		}
	}
}

// TestXClientCompareDiscoveryUpdate: a MultipleServersDiscovery's Update
// adds two servers to the one the XClient started with, then removes all
// but one: once the XClient has seen each update (rpcx applies them on a
// goroutine of its own), RoundRobin calls reach the new set, evenly, and
// Broadcast reaches every server of it, on both XClients.
func TestXClientCompareDiscoveryUpdate(t *testing.T) {
	f := startCmpFleet(t, cmpFleetConfig{n: 3})
	type phase struct {
		Calls     map[string]int
		Broadcast []string
	}
	var got [][]phase
	for _, m := range xcMakers {
		f.log.take()
		// Fresh pairs: rpcx's XClient sorts the discovery's slice in place.
		d, err := client.NewMultipleServersDiscovery(f.pairs(nil)[:1])
		require.NoError(t, err)
		xc := newCmpXClient(t, m, client.Failtry, client.RoundRobin, d, client.DefaultOption)
		// until calls until the servers hit in a row of len(want) calls
		// are want, at most 5 s.
		until := func(want []string) {
			deadline := time.Now().Add(5 * time.Second)
			for {
				var hit []string
				for range want {
					o := callOnce(t, f, xc, 5*time.Second, false, &CmpArgs{A: 1, B: 1}, -1)
					require.Nil(t, o.Err, m.name)
					for _, r := range o.Runs {
						hit = append(hit, r.Server)
					}
				}
				sort.Strings(hit)
				if fmt.Sprint(hit) == fmt.Sprint(want) {
					return
				}
				require.True(t, time.Now().Before(deadline), "%s: calls still reach %v, not %v", m.name, hit, want)
				time.Sleep(10 * time.Millisecond)
			}
		}
		measure := func() phase {
			var p phase
			p.Calls = map[string]int{}
			for range 6 {
				o := callOnce(t, f, xc, 5*time.Second, false, &CmpArgs{A: 1, B: 1}, -1)
				require.Nil(t, o.Err, m.name)
				for _, r := range o.Runs {
					p.Calls[r.Server]++
				}
			}
			require.NoError(t, xc.Broadcast(ctxT(t, 5*time.Second), "Do", &CmpArgs{A: 1, B: 1}, &CmpReply{}), m.name)
			for _, r := range f.log.take() {
				p.Broadcast = append(p.Broadcast, r.Server)
			}
			sort.Strings(p.Broadcast)
			return p
		}
		var phases []phase
		phases = append(phases, measure())
		d.Update(f.pairs(nil))
		until([]string{"s0", "s1", "s2"})
		phases = append(phases, measure())
		d.Update(f.pairs(nil)[2:])
		until([]string{"s2", "s2", "s2"})
		phases = append(phases, measure())
		got = append(got, phases)
	}
	assert.Equal(t, []phase{
		{Calls: map[string]int{"s0": 6}, Broadcast: []string{"s0"}},
		{Calls: map[string]int{"s0": 2, "s1": 2, "s2": 2}, Broadcast: []string{"s0", "s1", "s2"}},
		{Calls: map[string]int{"s2": 6}, Broadcast: []string{"s2"}},
	}, got[0], "rpcx")
	assert.Equal(t, got[0], got[1], "rpcx (expected) against the drop-in (actual)")
}

// TestXClientCompareClose: after Close every call of the XClient fails
// with rpcx's ErrXClientShutdown (the same text and errors.Is) on both,
// a second Close returns the same, and no call reaches a handler.
func TestXClientCompareClose(t *testing.T) {
	f := startCmpFleet(t, cmpFleetConfig{n: 2})
	var got [][]string
	for _, m := range xcMakers {
		f.log.take()
		xc := m.mk("Cmp", client.Failover, client.RoundRobin, f.discovery(t, nil), client.DefaultOption)
		require.Nil(t, callOnce(t, f, xc, 5*time.Second, false, &CmpArgs{A: 1, B: 1}, -1).Err, m.name)
		var out []string
		add := func(what string, err error) {
			e := describeErr(f, err)
			out = append(out, fmt.Sprintf("%s: %+v", what, e))
			if what != "Close" && what != "Close again" {
				assert.ErrorIs(t, err, client.ErrXClientShutdown, "%s: %s", m.name, what)
			}
		}
		add("Close", xc.Close())
		ctx := ctxT(t, 5*time.Second)
		add("Call", xc.Call(ctx, "Do", &CmpArgs{}, &CmpReply{}))
		_, err := xc.Go(ctx, "Do", &CmpArgs{}, &CmpReply{}, nil)
		add("Go", err)
		add("Oneshot", xc.Oneshot(ctx, "Do", &CmpArgs{}))
		add("Broadcast", xc.Broadcast(ctx, "Do", &CmpArgs{}, &CmpReply{}))
		add("Fork", xc.Fork(ctx, "Do", &CmpArgs{}, &CmpReply{}))
		rs, err := xc.Inform(ctx, "Do", &CmpArgs{}, &CmpReply{})
		add(fmt.Sprintf("Inform (%d receipts)", len(rs)), err)
		raw := protocol.NewMessage()
		raw.ServicePath, raw.ServiceMethod = "Cmp", "Do"
		_, _, err = xc.SendRaw(ctx, raw)
		add("SendRaw", err)
		add("Close again", xc.Close())
		f.log.settle(0)
		out = append(out, fmt.Sprintf("runs after Close: %d", len(f.log.take())))
		got = append(got, out)
	}
	assert.Equal(t, got[0], got[1], "rpcx (expected) against the drop-in (actual):\n%s", strings.Join(got[1], "\n"))
}
