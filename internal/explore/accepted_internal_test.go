package explore

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/protocol"
)

// TestExplainIsPrecise checks the accepted list against differences made
// by hand, so that TestExplore cannot pass by accepting everything: a
// difference an entry describes is accepted in its scenario, and the same
// difference in another scenario, or one no entry describes, is not.
func TestExplainIsPrecise(t *testing.T) {
	sc := &Scenario{
		FailMode: client.Failfast, SelectMode: client.SelectByUser, Servers: []string{roleLive, roleDown},
		Serialize: protocol.MsgPack, Kind: kindMethod,
		Calls: []CallSpec{{Op: opCall, Outcome: outValue, Deadline: 300 * time.Millisecond}},
	}
	call := Diff{Phase: "call", Call: 0, Op: opCall, Outcome: outValue}
	with := func(d Diff, where, hook, field, plain, batch string) Diff {
		d.Where, d.Hook, d.Field, d.Plain, d.Batch = where, hook, field, plain, batch
		return d
	}
	ids := func(used []int) []string {
		var out []string
		for _, i := range used {
			out = append(out, accepted[i].ID)
		}
		return out
	}
	accept := func(name string, sc *Scenario, d Diff, want string) {
		t.Helper()
		used, ok := explain(sc, d)
		switch {
		case want == "" && ok:
			t.Errorf("%s: accepted by %v", name, ids(used))
		case want != "" && (!ok || !slices.Contains(ids(used), want)):
			t.Errorf("%s: explained %v by %v, want %s", name, ok, ids(used), want)
		}
	}
	with2 := func(sc *Scenario, c CallSpec) *Scenario {
		out := *sc
		out.Calls = []CallSpec{c}
		return &out
	}

	// A server that cannot be reached: ErrPeerDown around rpcx's dial
	// error is accepted; another text around it is not.
	dial := "dial tcp down1: connect: connection refused"
	accept("peer down", sc, with(call, "err.text", "", "", dial, "batchclient: peer down: down1: "+dial), "peer-down-wraps-dial")
	accept("peer down, other error", sc, with(call, "err.text", "", "", dial, "batchclient: peer down: down1: i/o timeout"), "")
	// A call already past its deadline: its handler's run missing on the
	// drop-in is accepted; for a call with time left, it is not.
	run := "run kind=method N=1 outcome=value pad=0 meta={__ServerTimeout=set} deadline=true"
	past := with2(sc, CallSpec{Op: opCall, Outcome: outValue, Deadline: -time.Second})
	accept("past deadline", past, with(call, "live0", "run", "", run, ""), "deadline-passed-not-sent")
	accept("deadline ahead", sc, with(call, "live0", "run", "", run, ""), "")
	// ... nor an extra run on the drop-in.
	accept("extra run", past, with(call, "live0", "run", "", "", run), "")
	// Go's reply at its deadline, not Call's.
	goCall := with2(sc, CallSpec{Op: opGo, Outcome: outBlock, Deadline: 300 * time.Millisecond})
	accept("Go at its deadline", goCall, with(Diff{Phase: "call", Op: opGo, Outcome: outBlock}, "reply", "", "", "Reply{N=2 Server=live0 pad=0}", "Reply{N=-1 Server=prefill pad=0}"), "go-ends-at-deadline")
	accept("Call's reply", sc, with(call, "reply", "", "", "Reply{N=2 Server=live0 pad=0}", "Reply{N=3 Server=live0 pad=0}"), "")
	// ErrNoHandlerReply only for a handler that writes nothing.
	noReply := with2(sc, CallSpec{Op: opCall, Outcome: outNoReply, Deadline: 300 * time.Millisecond})
	accept("no reply", noReply, with(Diff{Phase: "call", Op: opCall, Outcome: outNoReply}, "err.text", "", "", "context deadline exceeded", "batchserver: AddHandler handler returned without writing a response"), "no-handler-reply")
	accept("an error for a value", sc, with(call, "err.text", "", "", "nil", "batchserver: AddHandler handler returned without writing a response"), "")
	// A late reply's ClientAfterDecode, missing on the drop-in, for a call
	// with a deadline; not an extra one, nor one of a call without.
	ad := "ClientAfterDecode type=1 status=0 seq=#0"
	accept("late reply", sc, with(call, "client", "ClientAfterDecode", "", ad, ""), "late-reply-no-after-decode")
	accept("extra after-decode", sc, with(call, "client", "ClientAfterDecode", "", "", ad), "")
	accept("late reply, no deadline", with2(sc, CallSpec{Op: opCall, Outcome: outValue}), with(call, "client", "ClientAfterDecode", "", ad, ""), "")
	// Sequence numbers: labels that differ are not accepted, anywhere.
	accept("seq in a server hook", sc, with(call, "live0", "PostReadRequest", "seq", "#0", "#0 again"), "")
	accept("seq in a client hook", sc, with(call, "client", "ClientAfterDecode", "seq", "#0", "#1"), "")
	// An extra hook on the drop-in for a method.
	accept("extra PreWriteResponse", sc, with(call, "live0", "PreWriteResponse", "", "", "PreWriteResponse ..."), "")
	// A hung server's accepts, in a scenario with one; not in another.
	hung := *sc
	hung.Servers = []string{roleLive, roleHung}
	accept("hung accepts", &hung, with(Diff{Phase: "close"}, "hung1", "accept", "", "", "accept"), "hung-server")
	accept("accept without a hung server", sc, with(Diff{Phase: "close"}, "live0", "accept", "", "", "accept"), "")
}

// TestMaskerKeepsBehaviour checks that masking removes addresses, stacks
// and pointers and nothing else a caller could tell apart.
func TestMaskerKeepsBehaviour(t *testing.T) {
	m := &masker{addrs: map[string]string{"127.0.0.1:4000": "live0", "127.0.0.1:40001": "down1"}}
	for in, want := range map[string]string{
		"dial tcp 127.0.0.1:40001: connect: connection refused": "dial tcp down1: connect: connection refused",
		"read tcp 127.0.0.1:5555->127.0.0.1:4000: i/o timeout":  "read tcp 127.0.0.1:PORT->live0: i/o timeout",
		"rpcxbatch7@127.0.0.1:4000":                             "rpcxbatchN@live0",
		"[service internal error]: boom, method: Do, argv: &{N:1 Pad:[1 2 3]}, stack: goroutine 12 [running]:\nmain.f(0xc000012345)\n\t/x/y.go:10 +0x1d\ncreated by main.g in goroutine 1\n\t/x/y.go:20 +0x2f\n": "[service internal error]: boom, method: Do, argv: …, stack: …",
		"bad": "bad",
	} {
		if got := m.text(in); got != want {
			t.Errorf("text(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestSeqLabelsKeepBehaviour checks that the sequence numbers' masking
// (labelSeqs) makes equal what rpcx cannot make equal (the numbers
// themselves, per connection or per lane) and keeps apart what a plugin
// can tell: the hooks of one request seeing different numbers, two
// requests of a connection seeing the same, a response whose number is
// not its request's.
func TestSeqLabelsKeepBehaviour(t *testing.T) {
	srv := func(hook, seq, conn string) Event { return ev(hook, "seq", seq, "path", "Svc", connField, conn) }
	// steps runs the steps' streams through one side's masker and returns
	// each step's masked events as text.
	steps := func(in ...map[string][]Event) []string {
		m := &masker{addrs: map[string]string{}, seqs: newSeenSeqs()}
		var out []string
		for _, s := range in {
			out = append(out, fmt.Sprint(m.streams(s)))
		}
		return out
	}
	same := func(name string, plain, batch []string, want bool) {
		t.Helper()
		if got := slices.Equal(plain, batch); got != want {
			t.Errorf("%s: equal=%v, want %v\n\tplain: %v\n\tbatch: %v", name, got, want, plain, batch)
		}
	}
	step := func(stream string, evs ...Event) map[string][]Event { return map[string][]Event{stream: evs} }

	// One request a step, on one connection (plain: 0 then 1) or one lane
	// (the lane's ids): the same.
	plain := steps(step("live0", srv("PostReadRequest", "0", "a"), srv("PreHandleRequest", "0", "a")),
		step("live0", srv("PostReadRequest", "1", "a"), srv("PreHandleRequest", "1", "a")))
	same("one lane", plain, steps(step("live0", srv("PostReadRequest", "268435456", "L"), srv("PreHandleRequest", "268435456", "L")),
		step("live0", srv("PostReadRequest", "268435457", "L"), srv("PreHandleRequest", "268435457", "L"))), true)
	// The same number for two requests of one connection (issue 43's item
	// 10: 0 for every entry), even a step apart: different.
	same("one number for two requests", plain, steps(step("live0", srv("PostReadRequest", "0", "L"), srv("PreHandleRequest", "0", "L")),
		step("live0", srv("PostReadRequest", "0", "L"), srv("PreHandleRequest", "0", "L"))), false)
	// Two hooks of one request with different numbers: different.
	same("hooks of a request disagree", plain, steps(step("live0", srv("PostReadRequest", "268435456", "L"), srv("PreHandleRequest", "268435457", "L")),
		step("live0", srv("PostReadRequest", "268435458", "L"), srv("PreHandleRequest", "268435458", "L"))), false)
	// rpcx's client counts from 0 on a new connection: two requests, two
	// labels, as two ids on a lane.
	same("a new connection", steps(step("live0", srv("PostReadRequest", "0", "a")), step("live0", srv("PostReadRequest", "0", "b"))),
		steps(step("live0", srv("PostReadRequest", "268435456", "L")), step("live0", srv("PostReadRequest", "268435457", "L"))), true)
	// The connection field itself is never compared.
	same("connections named apart", steps(step("live0", srv("PostReadRequest", "0", "a"))), steps(step("live0", srv("PostReadRequest", "0", "zz"))), true)

	// The client's stream: a response shows its request's number.
	cli := func(hook, seq string) Event { return ev(hook, "seq", seq, "path", "Svc") }
	plain = steps(step("client", cli("ClientBeforeEncode", "5"), cli("ClientAfterDecode", "5")))
	same("client pair", plain, steps(step("client", cli("ClientBeforeEncode", "268435456"), cli("ClientAfterDecode", "268435456"))), true)
	same("client request 0, response its id", plain, steps(step("client", cli("ClientBeforeEncode", "0"), cli("ClientAfterDecode", "268435456"))), false)
	// A field that is not a sequence number is left alone.
	same("other field", steps(step("live0", ev("run", "N", "1"))), steps(step("live0", ev("run", "N", "2"))), false)
}
