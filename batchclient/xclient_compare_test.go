package batchclient_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/protocol"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The XClient comparison suite (issue 31): every scenario runs the same
// steps through rpcx v1.9.4's client.NewXClient and through
// batchclient.NewXClient, against the same real rpcx servers on loopback,
// and compares what the caller and the handlers saw: results, errors
// (text, type, ServiceError, errors.Is), replies, the request metadata
// the handler got (__ServerTimeout's presence, not its value), the
// caller's request and response metadata maps after the call, how many
// times the handler ran, and plugin hook sequences. Helpers are in
// xclient_compare_helpers_test.go. Where rpcx itself is not deterministic
// (its RoundRobin and WeightedRoundRobin orders and its ConsistentHash
// placement come from map iteration), what is compared is what rpcx fixes:
// the cycle, the counts, the partition of keys.

// selectionOf runs calls of kind through xc and returns, per call, the
// server its one handler run was on ("" for none, "a,b" for several),
// failing the test on an error.
func selectionOf(t *testing.T, f *cmpFleet, xc client.XClient, kind int, calls int, args func(i int) *CmpArgs) []string {
	t.Helper()
	var out []string
	oneshot := callKinds[kind].name == "Oneshot"
	for i := range calls {
		o := callKinds[kind].do(t, f, xc, 10*time.Second, false, args(i), -1)
		require.Nil(t, o.Err, "%s call %d", callKinds[kind].name, i)
		if oneshot && len(o.Runs) == 0 {
			// The handler runs after Oneshot returns.
			f.log.waitFor(1)
			o.Runs = f.log.take()
		}
		var names []string
		for _, r := range o.Runs {
			names = append(names, r.Server)
			assert.Equal(t, cmpRun{Server: r.Server, Meta: "{__ServerTimeout=set}", Deadline: true}, r, "the handler's view of call %d", i)
		}
		out = append(out, strings.Join(names, ","))
	}
	f.log.settle(0)
	assert.Empty(t, f.log.take(), "handler runs after the last call returned")
	return out
}

// firstSeenLabels renames servers by order of first appearance: "s2 s0 s1
// s2" becomes "A B C A", what rpcx's RoundRobin fixes whatever its order.
func firstSeenLabels(seq []string) string {
	label := map[string]string{}
	var out []string
	for _, s := range seq {
		if _, ok := label[s]; !ok {
			label[s] = string(rune('A' + len(label)))
		}
		out = append(out, label[s])
	}
	return strings.Join(out, " ")
}

func counts(seq []string) map[string]int {
	m := map[string]int{}
	for _, s := range seq {
		m[s]++
	}
	return m
}

func mulArgs(i int) *CmpArgs { return &CmpArgs{A: i, B: 3} }

// TestXClientCompareSelectModes: rpcx's select modes pick the same way on
// both XClients, for Call, Go and Oneshot, over three batch servers:
// RandomSelect reaches every server; RoundRobin cycles through all three
// (the same first-seen cycle); WeightedRoundRobin hits each server as
// often as its weight; ConsistentHash sends the same args to the same
// server and splits the args into the same groups; SelectByUser with
// SetSelector follows the user's Selector exactly; a WrapSelect plugin
// sees the keys of the servers that then run the call.
func TestXClientCompareSelectModes(t *testing.T) {
	f := startCmpFleet(t, cmpFleetConfig{n: 3})
	weights := map[string]string{"s0": "weight=1", "s1": "weight=2", "s2": "weight=3"}
	type result struct {
		Derived any
		Keys    string
	}
	cases := []struct {
		name   string
		mode   client.SelectMode
		values map[string]string
		setup  func(f *cmpFleet, xc client.XClient) func() string // returns what a plugin or selector saw
		calls  int
		args   func(i int) *CmpArgs
		derive func(seq []string) any
	}{
		{name: "RandomSelect", mode: client.RandomSelect, calls: 45, args: mulArgs,
			derive: func(seq []string) any {
				var hit []string
				for s := range counts(seq) {
					hit = append(hit, s)
				}
				sort.Strings(hit)
				return hit
			}},
		{name: "RoundRobin", mode: client.RoundRobin, calls: 9, args: mulArgs,
			derive: func(seq []string) any { return firstSeenLabels(seq) }},
		{name: "WeightedRoundRobin", mode: client.WeightedRoundRobin, values: weights, calls: 12, args: mulArgs,
			derive: func(seq []string) any { return counts(seq) }},
		{name: "ConsistentHash", mode: client.ConsistentHash, calls: 24,
			// Each of 12 args twice.
			args: func(i int) *CmpArgs { return &CmpArgs{A: i % 12, B: 1} },
			derive: func(seq []string) any {
				groups := map[string][]int{}
				for i, s := range seq {
					if i >= 12 {
						if seq[i-12] != s {
							return fmt.Sprintf("args %d went to %s, then to %s", i%12, seq[i-12], s)
						}
						continue
					}
					groups[s] = append(groups[s], i)
				}
				var out []string
				for _, g := range groups {
					out = append(out, fmt.Sprint(g))
				}
				sort.Strings(out)
				return out
			}},
		{name: "SelectByUser", mode: client.SelectByUser, calls: 7, args: mulArgs,
			setup: func(f *cmpFleet, xc client.XClient) func() string {
				sel := &sortedSelector{}
				xc.SetSelector(sel)
				return func() string {
					sel.mu.Lock()
					defer sel.mu.Unlock()
					var names []string
					for _, k := range sel.keys {
						names = append(names, k[:strings.Index(k, "@")]+"@"+f.name(k))
					}
					return strings.Join(names, " ")
				}
			},
			derive: func(seq []string) any { return seq }},
		{name: "RoundRobin with WrapSelect", mode: client.RoundRobin, calls: 6, args: mulArgs,
			setup: func(f *cmpFleet, xc client.XClient) func() string {
				kp := &keyPlugin{}
				xc.GetPlugins().Add(kp)
				return func() string {
					kp.mu.Lock()
					defer kp.mu.Unlock()
					var names []string
					for _, k := range kp.keys {
						names = append(names, k[:strings.Index(k, "@")]+"@"+f.name(k))
					}
					kp.keys = nil
					return strings.Join(names, " ")
				}
			},
			derive: func(seq []string) any { return firstSeenLabels(seq) }},
	}
	for _, tc := range cases {
		for kind := range callKinds {
			t.Run(tc.name+"/"+callKinds[kind].name, func(t *testing.T) {
				var results []result
				for _, m := range xcMakers {
					xc := newCmpXClient(t, m, client.Failfast, tc.mode, f.discovery(t, tc.values), client.DefaultOption)
					var seen func() string
					if tc.setup != nil {
						seen = tc.setup(f, xc)
					}
					seq := selectionOf(t, f, xc, kind, tc.calls, tc.args)
					r := result{Derived: tc.derive(seq)}
					if seen != nil {
						r.Keys = seen()
						if tc.name == "RoundRobin with WrapSelect" {
							// The plugin saw the keys of the servers that ran.
							var want []string
							for _, s := range seq {
								want = append(want, "tcp@"+s)
							}
							assert.Equal(t, strings.Join(want, " "), r.Keys, m.name)
							r.Keys = ""
						}
					}
					if tc.name == "WeightedRoundRobin" {
						assert.Equal(t, map[string]int{"s0": 2, "s1": 4, "s2": 6}, r.Derived, m.name)
					}
					if tc.name == "SelectByUser" {
						assert.Equal(t, []string{"s0", "s1", "s2", "s0", "s1", "s2", "s0"}, sortedNames(f, seq), m.name)
					}
					results = append(results, r)
				}
				assert.Equal(t, results[0], results[1], "rpcx (expected) against the drop-in (actual)")
			})
		}
	}
}

// sortedNames maps the servers of seq to their rank in the order of their
// rpcx keys, as sortedSelector picks them: "s0" for the first key.
func sortedNames(f *cmpFleet, seq []string) []string {
	type ks struct{ key, name string }
	var all []ks
	for _, s := range f.servers {
		all = append(all, ks{"tcp@" + s.addr, s.name})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].key < all[j].key })
	rank := map[string]string{}
	for i, k := range all {
		rank[k.name] = fmt.Sprintf("s%d", i)
	}
	out := make([]string, len(seq))
	for i, s := range seq {
		out[i] = rank[s]
	}
	return out
}

// compareCalls runs steps through an XClient of each maker, made by mk
// over a fresh discovery of f, and compares their outcomes: call by call
// when exact, else as multisets (where rpcx's own order is a map's).
// expect, when not nil, turns each of rpcx's outcomes into the drop-in's
// documented difference from it.
func compareCalls(t *testing.T, f *cmpFleet, exact bool, mk func(m xcMaker) client.XClient, steps func(m xcMaker, xc client.XClient) []cmpOutcome, expect func(o *cmpOutcome)) {
	t.Helper()
	var got [][]string
	for mi, m := range xcMakers {
		f.log.take()
		var out []string
		for _, o := range steps(m, mk(m)) {
			if mi == 0 && expect != nil {
				expect(&o)
			}
			b, err := json.Marshal(o)
			require.NoError(t, err)
			out = append(out, string(b))
		}
		if !exact {
			sort.Strings(out)
		}
		got = append(got, out)
	}
	assert.Equal(t, got[0], got[1], "rpcx (expected) against the drop-in (actual)")
}

// TestXClientCompareFailModes: Failfast, Failtry, Failover and Failbackup
// with Option.Retries = 2, through Call, Go and Oneshot, with a handler
// that fails (a service error: rpcx does not retry), a server down (a
// closed listener: a connection error, which Failtry retries on the same
// server and Failover on the next), every server down, and a slow handler
// (Failbackup sends a backup call after BackupLatency): the same errors,
// replies, handler runs and metadata on both XClients.
func TestXClientCompareFailModes(t *testing.T) {
	opt := client.DefaultOption
	opt.Retries = 2
	opt.BackupLatency = 150 * time.Millisecond
	modes := []struct {
		name string
		fm   client.FailMode
	}{{"Failfast", client.Failfast}, {"Failtry", client.Failtry}, {"Failover", client.Failover}, {"Failbackup", client.Failbackup}}
	cases := []struct {
		name  string
		cfg   cmpFleetConfig
		args  CmpArgs
		calls int
		exact bool
	}{
		{name: "service error", cfg: cmpFleetConfig{n: 1}, args: CmpArgs{Fail: map[string]string{"*": "refused by the handler"}}, calls: 2, exact: true},
		{name: "service error on one of two", cfg: cmpFleetConfig{n: 2}, args: CmpArgs{Fail: map[string]string{"s0": "s0 refuses"}}, calls: 4},
		{name: "one of two down", cfg: cmpFleetConfig{n: 1, dead: 1}, calls: 4},
		{name: "two of three down", cfg: cmpFleetConfig{n: 1, dead: 2}, calls: 3},
		{name: "all down", cfg: cmpFleetConfig{dead: 2}, calls: 2, exact: true},
		{name: "slow handler", cfg: cmpFleetConfig{n: 1}, args: CmpArgs{SleepMs: map[string]int{"*": 400}}, calls: 1, exact: true},
	}
	for _, tc := range cases {
		f := startCmpFleet(t, tc.cfg)
		for _, mode := range modes {
			for _, kind := range callKinds {
				if kind.name != "Call" && (tc.name == "slow handler" || mode.fm == client.Failbackup) {
					// Go and Oneshot ignore the fail mode: they run under
					// the modes the drop-in could get wrong by retrying.
					continue
				}
				if mode.fm == client.Failbackup && kind.name == "Call" && tc.cfg.n > 0 && tc.cfg.dead > 0 {
					// rpcx's Failbackup, when its backup call cannot
					// reach its server, removes the live rpcx Client it
					// selected first, whose UnregisterServerMessageChan
					// races with its reader goroutine: a data race
					// inside rpcx v1.9.4 that -race reports.
					continue
				}
				t.Run(tc.name+"/"+mode.name+"/"+kind.name, func(t *testing.T) {
					opt := opt
					if tc.name != "slow handler" {
						// A backup call only where the test wants one: a
						// first call slowed past BackupLatency by its dial
						// (a lane handshake on a loaded machine) would send
						// one, and the extra selection would shift the
						// round robin of the calls after it.
						opt.BackupLatency = 5 * time.Second
					}
					mk := func(m xcMaker) client.XClient {
						xc := newCmpXClient(t, m, mode.fm, client.RoundRobin, f.discovery(t, nil), opt)
						if mode.fm == client.Failbackup {
							// rpcx's Failbackup selects twice a call (once
							// for its error, once in Go), so with two
							// servers every call goes to the second of
							// rpcx's round robin, whose order is a map's:
							// the same server on both XClients only by
							// chance (one run in five differed).
							xc.SetSelector(&sortedSelector{})
						}
						return xc
					}
					compareCalls(t, f, tc.exact, mk, func(_ xcMaker, xc client.XClient) []cmpOutcome {
						var out []cmpOutcome
						for i := range tc.calls {
							args := tc.args
							args.A, args.B, args.ResMeta = 1, 7, true
							if tc.exact {
								args.A = i
							}
							wait := -1
							if kind.name == "Oneshot" || mode.fm == client.Failbackup {
								// Handlers that run after the caller returned.
								wait = 0
							}
							out = append(out, kind.do(t, f, xc, 10*time.Second, true, &args, wait))
						}
						return out
					}, nil)
				})
			}
		}
	}
}

// TestXClientCompareDeadlines: a ctx with a deadline (rpcx's XClient
// sends __ServerTimeout, and the handler's ctx has a deadline), one
// without (neither), and one already past, through Call, Go and Oneshot,
// with and without the caller's metadata maps, over a batch server and a
// plain one: the same errors, handler runs and metadata on both.
func TestXClientCompareDeadlines(t *testing.T) {
	for _, plain := range []bool{false, true} {
		f := startCmpFleet(t, cmpFleetConfig{n: 1, plain: plain})
		server := map[bool]string{false: "batch server", true: "plain server"}[plain]
		for _, dl := range []struct {
			name string
			d    time.Duration
		}{{"deadline", 10 * time.Second}, {"no deadline", 0}, {"expired", -time.Millisecond}} {
			for _, withMaps := range []bool{true, false} {
				for _, kind := range callKinds {
					name := fmt.Sprintf("%s/%s/maps=%v/%s", server, dl.name, withMaps, kind.name)
					t.Run(name, func(t *testing.T) {
						mk := func(m xcMaker) client.XClient {
							return newCmpXClient(t, m, client.Failtry, client.RoundRobin, f.discovery(t, nil), client.DefaultOption)
						}
						compareCalls(t, f, true, mk, func(m xcMaker, xc client.XClient) []cmpOutcome {
							wait := -1
							if kind.name == "Oneshot" || dl.d < 0 {
								wait = 0
							}
							var out []cmpOutcome
							if m.name == "rpcx" && dl.d < 0 && kind.name == "Call" {
								return expiredCallOnRPCX(withMaps, plain)
							}
							for i := range 2 {
								out = append(out, kind.do(t, f, xc, dl.d, withMaps, &CmpArgs{A: i, B: 2, ResMeta: true}, wait))
							}
							return out
						}, func(o *cmpOutcome) {
							if dl.d >= 0 {
								return
							}
							if !plain && o.Runs != nil {
								// Documented (README, "Deadlines reach the
								// server"): an entry past its caller's
								// deadline is not run; rpcx sends it and its
								// handler runs.
								require.Len(t, o.Runs, 1, "rpcx runs the expired call")
								o.Runs = nil
							}
							if kind.name == "Go" {
								// Documented (docs/compatibility.md): the
								// drop-in's Go completes with the context's
								// error; rpcx's Go does not watch it.
								require.Nil(t, o.Err, "rpcx's Go ignores the expired context")
								o.Err, o.Reply = describeErr(f, context.DeadlineExceeded), CmpReply{}
							}
						})
					})
				}
			}
		}
	}
}

// expiredCallOnRPCX is what rpcx's XClient.Call does, twice, with a
// context already past its deadline: it sends the request, returns
// context.DeadlineExceeded, and the handler runs with __ServerTimeout set.
// It is written out, not run: rpcx v1.9.4's Client.call then reads the
// call's sequence number unsynchronised with its sending goroutine, and
// decodes the late reply into the caller's value after Call returned,
// data races inside rpcx that -race reports. Over a batch server the
// drop-in does not run it (documented), so the handler's run is left out.
func expiredCallOnRPCX(withMaps, plain bool) []cmpOutcome {
	o := cmpOutcome{Err: describeErr(nil, context.DeadlineExceeded)}
	if plain {
		o.Runs = []cmpRun{{Server: "s0", Meta: "{__ServerTimeout=set}", Deadline: true}}
	}
	if withMaps {
		o.CallerReq, o.CallerRes = "{__ServerTimeout=set,tag=t1}", "{}"
		if plain {
			o.Runs[0].Meta = "{__ServerTimeout=set,tag=t1}"
		}
	}
	return []cmpOutcome{o, o}
}

// TestXClientCompareAuth: Auth with a token the server's AuthFunc accepts,
// one it rejects, and no Auth at all, through Call, Go and Oneshot, with
// and without the caller's metadata map (rpcx's XClient puts __AUTH in
// it), over a batch server and a plain one.
func TestXClientCompareAuth(t *testing.T) {
	auth := func(_ context.Context, _ *protocol.Message, token string) error {
		if token != "good" {
			return fmt.Errorf("token %q refused", token)
		}
		return nil
	}
	for _, plain := range []bool{false, true} {
		f := startCmpFleet(t, cmpFleetConfig{n: 1, plain: plain, auth: auth})
		server := map[bool]string{false: "batch server", true: "plain server"}[plain]
		for _, token := range []string{"good", "bad", ""} {
			for _, withMaps := range []bool{true, false} {
				for _, kind := range callKinds {
					if token == "" && !withMaps {
						continue // as "bad"
					}
					name := fmt.Sprintf("%s/token=%q/maps=%v/%s", server, token, withMaps, kind.name)
					t.Run(name, func(t *testing.T) {
						mk := func(m xcMaker) client.XClient {
							xc := newCmpXClient(t, m, client.Failtry, client.RoundRobin, f.discovery(t, nil), client.DefaultOption)
							if token != "" {
								xc.Auth(token)
							}
							return xc
						}
						compareCalls(t, f, true, mk, func(_ xcMaker, xc client.XClient) []cmpOutcome {
							wait := -1
							if kind.name == "Oneshot" || token != "good" {
								wait = 0
							}
							var out []cmpOutcome
							for i := range 2 {
								out = append(out, kind.do(t, f, xc, 10*time.Second, withMaps, &CmpArgs{A: i, B: 2, ResMeta: true}, wait))
							}
							return out
						}, nil)
					})
				}
			}
		}
	}
}
