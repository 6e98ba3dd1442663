package explore

import (
	"slices"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/protocol"
)

// TestExplainIsPrecise checks the accepted list against differences made
// by hand, so that TestExplore cannot pass by accepting everything: a
// difference two entries make together needs both, and a difference no
// entry describes, or one an entry describes in another scenario, is not
// accepted.
func TestExplainIsPrecise(t *testing.T) {
	sc := &Scenario{
		FailMode: client.Failfast, SelectMode: client.SelectByUser, Servers: []string{roleLive},
		Serialize: protocol.MsgPack, Kind: kindMethod, ClientErrorFunc: true,
		Calls: []CallSpec{{Op: opCall, Outcome: outPanic, Deadline: 300 * time.Millisecond}},
	}
	call := Diff{Phase: "call", Call: 0, Op: opCall, Outcome: outPanic}
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
	panicText := "[service internal error]: boom, method: Do, argv: …, stack: …"

	// A panic's text through ClientErrorFunc: two entries, both needed.
	d := with(call, "err.text", "", "", "E Svc.Do: "+panicText, "E .: rpcxbatch: handler Svc.Do panicked: boom")
	used, ok := explain(sc, d)
	if !ok || !slices.Contains(ids(used), "client-error-func-bare") || !slices.Contains(ids(used), "panic-text") {
		t.Errorf("compound difference: explained %v by %v, want both client-error-func-bare and panic-text", ok, ids(used))
	}
	// The same without the scenario's ClientErrorFunc is not explained.
	noFunc := *sc
	noFunc.ClientErrorFunc = false
	if used, ok := explain(&noFunc, d); ok {
		t.Errorf("a ClientErrorFunc text in a scenario without one was accepted by %v", ids(used))
	}
	// A panic's text in a call that does not panic is not explained.
	value := *sc
	value.Calls = []CallSpec{{Op: opCall, Outcome: outValue}}
	if used, ok := explain(&value, with(Diff{Phase: "call", Op: opCall, Outcome: outValue}, "err.text", "", "", "nil", "rpcxbatch: handler Svc.Do panicked: boom")); ok {
		t.Errorf("a panic text for a call that returns a value was accepted by %v", ids(used))
	}
	// A sequence number that is not 0 on lanes is another difference.
	if used, ok := explain(sc, with(call, "live0", "PostReadRequest", "seq", "3", "5")); ok {
		t.Errorf("seq 3 against 5 was accepted by %v", ids(used))
	}
	if _, ok := explain(sc, with(call, "live0", "PostReadRequest", "seq", "3", "0")); !ok {
		t.Error("seq 3 against 0 in a server hook was not accepted")
	}
	// A reply that differs for no listed reason.
	if used, ok := explain(&value, with(Diff{Phase: "call", Op: opCall, Outcome: outValue}, "reply", "", "", "Reply{N=2 Server=live0 pad=0}", "Reply{N=3 Server=live0 pad=0}")); ok {
		t.Errorf("a different reply to a value call was accepted by %v", ids(used))
	}
	// An extra hook on the batch side for a method.
	if used, ok := explain(&value, with(Diff{Phase: "call", Op: opCall, Outcome: outValue}, "live0", "PreWriteResponse", "", "", "PreWriteResponse ...")); ok {
		t.Errorf("an extra PreWriteResponse for a method was accepted by %v", ids(used))
	}
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
