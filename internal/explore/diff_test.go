package explore

import (
	"fmt"
	"sort"
	"strings"
)

// Comparing the two sides' outcomes into differences, each small enough
// that an accepted entry can name exactly it: one field of what the caller
// got, one event present on one side only, one field of an event both
// sides recorded, or the order of a stream's events.

// Diff is one difference between the plain side and the batch side.
type Diff struct {
	Phase   string // "setup", "call", "close" or "process"
	Call    int    // the call's index, for phase "call"
	Op      string // the call's op and outcome, for phase "call"
	Outcome string
	// Where is the caller field ("err.text", "reply", ...) or the stream
	// ("client", a server's name, "servers", "<name> reads").
	Where string
	// Hook is the event's hook, for a stream; "order" for a difference in
	// the order of a stream's events.
	Hook string
	// Field is the event's field that differs; "" when the whole event is
	// on one side only.
	Field string
	// Plain and Batch are the two sides' values ("" for an event the side
	// did not record).
	Plain, Batch string
}

func (d Diff) String() string {
	var b strings.Builder
	b.WriteString(d.Phase)
	if d.Phase == "call" {
		fmt.Fprintf(&b, " %d (%s:%s)", d.Call, d.Op, d.Outcome)
	}
	b.WriteString(" " + d.Where)
	if d.Hook != "" {
		b.WriteString(" " + d.Hook)
	}
	if d.Field != "" {
		b.WriteString("." + d.Field)
	}
	fmt.Fprintf(&b, ":\n\t\tplain: %s\n\t\tbatch: %s", orNone(d.Plain), orNone(d.Batch))
	return b.String()
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

const absent = "(absent)"

// compare lists the differences between the plain and batch outcomes of sc.
func compare(sc *Scenario, plain, batch *Outcome) []Diff {
	var out []Diff
	out = append(out, compareStreams(Diff{Phase: "setup"}, plain.Setup, batch.Setup)...)
	for i := range sc.Calls {
		base := Diff{Phase: "call", Call: i, Op: sc.Calls[i].Op, Outcome: sc.Calls[i].Outcome}
		var p, b CallOutcome
		if i < len(plain.Calls) {
			p = plain.Calls[i]
		}
		if i < len(batch.Calls) {
			b = batch.Calls[i]
		}
		out = append(out, compareFields(base, p.Fields, b.Fields)...)
		out = append(out, compareStreams(base, p.Streams, b.Streams)...)
	}
	out = append(out, compareStreams(Diff{Phase: "close"}, plain.Close, batch.Close)...)
	return out
}

func compareFields(base Diff, plain, batch []Field) []Diff {
	var keys []string
	pv, bv := map[string]string{}, map[string]string{}
	for _, f := range plain {
		if _, ok := pv[f.K]; !ok {
			keys = append(keys, f.K)
		}
		pv[f.K] = f.V
	}
	for _, f := range batch {
		if _, ok := pv[f.K]; !ok {
			if _, ok := bv[f.K]; !ok {
				keys = append(keys, f.K)
			}
		}
		bv[f.K] = f.V
	}
	var out []Diff
	for _, k := range keys {
		p, okp := pv[k]
		b, okb := bv[k]
		if !okp {
			p = absent
		}
		if !okb {
			b = absent
		}
		if p != b {
			d := base
			d.Where, d.Plain, d.Batch = k, p, b
			out = append(out, d)
		}
	}
	return out
}

func compareStreams(base Diff, plain, batch map[string][]Event) []Diff {
	names := map[string]bool{}
	for k := range plain {
		names[k] = true
	}
	for k := range batch {
		names[k] = true
	}
	sorted := make([]string, 0, len(names))
	for k := range names {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	var out []Diff
	for _, name := range sorted {
		d := base
		d.Where = name
		out = append(out, compareEvents(d, plain[name], batch[name])...)
	}
	return out
}

// compareEvents pairs the k-th event of each hook on one side with the
// k-th of the same hook on the other, and reports the unpaired events,
// the fields that differ in paired ones, and, when every event is paired,
// a difference in their order.
func compareEvents(base Diff, plain, batch []Event) []Diff {
	var out []Diff
	byHook := func(evs []Event) map[string][]Event {
		m := map[string][]Event{}
		for _, e := range evs {
			m[e.Hook] = append(m[e.Hook], e)
		}
		return m
	}
	ph, bh := byHook(plain), byHook(batch)
	var hooks []string
	seen := map[string]bool{}
	for _, e := range append(append([]Event(nil), plain...), batch...) {
		if !seen[e.Hook] {
			seen[e.Hook] = true
			hooks = append(hooks, e.Hook)
		}
	}
	unpaired := false
	for _, h := range hooks {
		p, b := ph[h], bh[h]
		for i := 0; i < max(len(p), len(b)); i++ {
			d := base
			d.Hook = h
			switch {
			case i >= len(p):
				d.Batch = b[i].String()
				out = append(out, d)
				unpaired = true
			case i >= len(b):
				d.Plain = p[i].String()
				out = append(out, d)
				unpaired = true
			default:
				out = append(out, compareEventFields(d, p[i], b[i])...)
			}
		}
	}
	if !unpaired {
		ps, bs := hookSeq(plain), hookSeq(batch)
		if ps != bs {
			d := base
			d.Hook, d.Plain, d.Batch = "order", ps, bs
			out = append(out, d)
		}
	}
	return out
}

func compareEventFields(base Diff, p, b Event) []Diff {
	var out []Diff
	for _, d := range compareFields(base, p.Fields, b.Fields) {
		d.Field, d.Where = d.Where, base.Where
		out = append(out, d)
	}
	return out
}

func hookSeq(evs []Event) string {
	names := make([]string, len(evs))
	for i, e := range evs {
		names[i] = e.Hook
	}
	return strings.Join(names, " ")
}
