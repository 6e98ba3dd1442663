package batchclient_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
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
