package explore

import (
	"regexp"
	"strings"

	"github.com/smallnest/rpcx/client"
)

// The differences between the drop-in and rpcx v1.9.4 that the explorer
// accepts: ONE list, which docs/compatibility.md's "What differs" section
// repeats row by row (TestWhatDiffersIsTheAcceptedList). An entry whose
// difference is fixed explains nothing over the CI seeds and fails
// TestExplore as stale: delete the entry here and its row in the docs.
//
// An entry explains a difference (a Diff) by undoing its own effect in it:
// a difference is accepted when the entries, applied in turn, leave its
// two sides equal. So one value that differs in two ways needs both
// entries, and neither hides the other. Put
// narrow entries before broad ones: the first that explains a difference
// is the one credited with it.

// Accepted is one accepted difference.
type Accepted struct {
	// ID names the entry (in the docs and in TestExplore's report).
	ID string
	// Item is the issue 43 item the difference is ("1".."24"), "new" for
	// one the issue does not list, or "kept" for one the project keeps
	// on purpose (documented as better than rpcx, or as a choice).
	Item string
	// Desc is the difference in one line.
	Desc string
	// Explain returns d with this difference undone, and whether the entry
	// applies to d at all. sc is nil for a process-wide difference.
	Explain func(sc *Scenario, d Diff) (Diff, bool)
}

var accepted = []Accepted{
	{
		ID: "late-reply-no-after-decode", Item: "new",
		Desc: "a reply that arrives after its call ended (its deadline passed, Failbackup, Fork or Broadcast cancelled it) runs no ClientAfterDecode on lanes; rpcx's reader runs it. Not fixed: a lane drops a call's slot when its caller gives up, and what would run the hook is gone with it",
		Explain: whole(func(sc *Scenario, d Diff) bool {
			c := callOf(sc, d)
			return c != nil && (c.Deadline != 0 || sc.FailMode == client.Failbackup || c.Op == opFork || c.Op == opBroadcast) &&
				d.Where == "client" && d.Hook == "ClientAfterDecode" && d.Field == "" && d.Batch == ""
		}),
	},
	{
		ID: "go-ends-at-deadline", Item: "kept",
		Desc: "Go's call ends with the context's error at its deadline; rpcx's Go waits for the reply, and for one that never comes (a hung server, a lost reply) it never completes (docs/compatibility.md, client behaviour)",
		Explain: whole(func(sc *Scenario, d Diff) bool {
			c := callOf(sc, d)
			if c == nil || c.Op != opGo || c.Deadline == 0 || !callerField(d) {
				return false
			}
			// rpcx's Go that never completes records nothing past the
			// explorer's guard.
			hung := d.Where == "guard" && strings.HasPrefix(d.Plain, "Go did not return") && d.Batch == absent ||
				d.Plain == absent && d.Batch != absent
			return hung || d.Where == "reply" || d.Where == "go.resmetadata" || strings.HasPrefix(d.Where, "err")
		}),
	},
	{
		ID: "peer-down-wraps-dial", Item: "kept",
		Desc: "a server that cannot be reached fails with ErrPeerDown wrapping rpcx's dial error (docs/semantics.md)",
		Explain: func(sc *Scenario, d Diff) (Diff, bool) {
			if callOf(sc, d) == nil {
				return d, false
			}
			if d.Where == "err.type" && d.Batch == "*fmt.wrapErrors" && (d.Plain == "*net.OpError" || d.Plain == "*tls.CertificateVerificationError") {
				d.Batch = d.Plain
				return d, true
			}
			if !rePeerDown.MatchString(d.Batch) {
				return d, false
			}
			d.Batch = rePeerDown.ReplaceAllString(d.Batch, "")
			return d, true
		},
	},
	{
		ID: "no-handler-reply", Item: "kept",
		Desc: "an AddHandler handler that returns nil without writing fails the call with ErrNoHandlerReply at once; rpcx's caller waits for its deadline",
		Explain: whole(func(sc *Scenario, d Diff) bool {
			c := callOf(sc, d)
			// Under Failbackup the quick error leaves no time for rpcx's
			// backup call.
			return c != nil && c.Outcome == outNoReply && (callerField(d) || d.Where == "client" ||
				(sc.FailMode == client.Failbackup && serverStream(d) && d.Field == "" && d.Batch == ""))
		}),
	},
	{
		ID: "deadline-passed-not-sent", Item: "kept",
		Desc: "a call whose deadline passed before it was sent (already past when made, or passed while a 17 MiB argument was encoded or a hung server's connect was waited for) is not sent on the drop-in and its handler does not run; rpcx sends it with a negative `__ServerTimeout` and runs the handler (docs/semantics.md: no handler starts after its deadline)",
		Explain: whole(func(sc *Scenario, d Diff) bool {
			c := callOf(sc, d)
			if c == nil || c.Deadline == 0 || c.Deadline > 0 && c.ArgPad != hugePad && !sc.has(roleHung) {
				return false
			}
			return (serverStream(d) && d.Field == "" && d.Batch == "") ||
				(d.Hook == "PreReadRequest" && d.Field == "count") || (callerField(d) && d.Where == "reply")
		}),
	},
	{
		ID: "hung-server", Item: "kept",
		Desc: "a server that accepts and never answers is given up as frozen after the lanes' heartbeat timeout (2 s): a call still waiting on it then fails with ErrPeerDown (\"i/o timeout\"), where rpcx's waits for its deadline, and the server is connected to again as often as the drop-in's connects and redials ask, not once per rpcx dial: its accepts and the client's connection hooks differ in count (docs/semantics.md: frozen peers)",
		Explain: func(sc *Scenario, d Diff) (Diff, bool) {
			if sc == nil || !sc.has(roleHung) {
				return d, false
			}
			if (d.Hook == "ClientConnectionClose" || d.Hook == "accept" ||
				(d.Hook == "ConnCreated" || d.Hook == "ClientConnected") && d.Plain == "" && reHungRemote.MatchString(d.Batch)) && d.Field == "" {
				d.Batch = d.Plain
				return d, true
			}
			// A call the heartbeat timeout failed before its deadline: its
			// error, and what the client's PostCall and Inform's receipts
			// show of it, read as rpcx's deadline would.
			if !reHungGivenUp.MatchString(d.Batch) || !strings.Contains(d.Plain, "deadline exceeded") {
				return d, false
			}
			if callOf(sc, d) == nil || !(callerField(d) || d.Where == "client" && d.Hook == "PostCall" && d.Field == "err") {
				return d, false
			}
			d.Batch = d.Plain
			return d, true
		},
	},
}

var rePeerDown = regexp.MustCompile(`batchclient: peer down: [^:]+: `)

// reHungGivenUp is the error of a call a hung server's heartbeat timeout
// failed (peer-down-wraps-dial may have taken its ErrPeerDown prefix off
// already); reHungRemote a connection hook's event on a hung server.
var (
	reHungGivenUp = regexp.MustCompile(`read tcp 127\.0\.0\.1:PORT->hung\d+: i/o timeout`)
	reHungRemote  = regexp.MustCompile(`remote=hung\d+`)
)

// whole is an Explain that accepts the differences pred names whole.
func whole(pred func(sc *Scenario, d Diff) bool) func(*Scenario, Diff) (Diff, bool) {
	return func(sc *Scenario, d Diff) (Diff, bool) {
		if !pred(sc, d) {
			return d, false
		}
		d.Batch = d.Plain
		return d, true
	}
}

// callOf is the call d is in, nil for the setup, the close and
// process-wide differences.
func callOf(sc *Scenario, d Diff) *CallSpec {
	if sc == nil || d.Phase != "call" || d.Call >= len(sc.Calls) {
		return nil
	}
	return &sc.Calls[d.Call]
}

// callerField reports whether d is in what the caller got.
func callerField(d Diff) bool { return d.Phase == "call" && d.Hook == "" }

// serverStream reports whether d is in a server's stream.
func serverStream(d Diff) bool { return d.Hook != "" && d.Where != "client" }

// explain reports which entries, applied in turn, leave d's sides equal;
// ok is false when they do not.
func explain(sc *Scenario, d Diff) (used []int, ok bool) {
	cur := d
	for range accepted {
		progress := false
		for i, a := range accepted {
			next, applies := a.Explain(sc, cur)
			if !applies || next == cur {
				continue
			}
			cur, progress = next, true
			used = append(used, i)
			if cur.Plain == cur.Batch {
				return used, true
			}
		}
		if !progress {
			break
		}
	}
	return nil, false
}
