package explore

import (
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/protocol"
)

// The differences between the drop-in and rpcx v1.9.4 that the explorer
// accepts: ONE list, which docs/compatibility.md's "What differs" section
// repeats row by row (TestWhatDiffersIsTheAcceptedList). An entry whose
// difference is fixed explains nothing over the CI seeds and fails
// TestExplore as stale: delete the entry here and its row in the docs.
//
// An entry explains a difference (a Diff) by undoing its own effect in it:
// a difference is accepted when the entries, applied in turn, leave its
// two sides equal. So one value that differs in two ways (a ClientErrorFunc
// text of a panic) needs both entries, and neither hides the other. Put
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
		ID: "max-message-length", Item: "8",
		Desc:    "batchserver.New sets rpcx's process-wide protocol.MaxMessageLength",
		Explain: whole(func(_ *Scenario, d Diff) bool { return d.Phase == "process" && d.Where == "protocol.MaxMessageLength" }),
	},
	{
		ID: "server-hook-seq", Item: "10",
		Desc: "Seq is 0 in the messages server plugins get for batched entries",
		Explain: whole(func(_ *Scenario, d Diff) bool {
			return serverStream(d) && slices.Contains([]string{"seq", "req.seq", "res.seq"}, d.Field) && d.Batch == "0"
		}),
	},
	{
		ID: "client-hook-seq", Item: "new",
		Desc: "Seq is 0 in the messages ClientBeforeEncode and ClientAfterDecode get on lanes; rpcx gives the connection's sequence number",
		Explain: whole(func(_ *Scenario, d Diff) bool {
			return d.Where == "client" && (d.Hook == "ClientBeforeEncode" || d.Hook == "ClientAfterDecode") && d.Field == "seq" && d.Batch == "0"
		}),
	},
	{
		ID: "client-error-func-bare", Item: "1",
		Desc: "ClientErrorFunc gets a message without service path, method and response metadata on lanes",
		Explain: func(sc *Scenario, d Diff) (Diff, bool) {
			if sc == nil || !sc.ClientErrorFunc || !strings.Contains(d.Batch, "E .: ") {
				return d, false
			}
			d.Plain = reClientErrorFunc.ReplaceAllString(d.Plain, "")
			d.Batch = strings.ReplaceAll(d.Batch, "E .: ", "")
			return d, true
		},
	},
	{
		ID: "server-error-func-ignored", Item: "3",
		Desc: "Server.ServerErrorFunc is not applied to batched errors",
		Explain: func(sc *Scenario, d Diff) (Diff, bool) {
			if sc == nil || !sc.ServerErrorFunc || !strings.Contains(d.Plain, serverSaid) || strings.Contains(d.Batch, serverSaid) {
				return d, false
			}
			d.Plain = strings.ReplaceAll(d.Plain, serverSaid, "")
			return d, true
		},
	},
	{
		ID: "handle-service-error-silent", Item: "2",
		Desc: "Server.HandleServiceError is not called for batched calls' errors",
		Explain: whole(func(sc *Scenario, d Diff) bool {
			return sc != nil && sc.HandleServiceError && d.Hook == "HandleServiceError" && d.Field == "" && d.Batch == ""
		}),
	},
	{
		ID: "panic-text", Item: "4",
		Desc: "a handler's panic reads \"rpcxbatch: handler P.M panicked: v\", not rpcx's RpcServiceInternalError text (or the bare value for AddHandler)",
		Explain: func(sc *Scenario, d Diff) (Diff, bool) {
			if c := callOf(sc, d); c == nil || c.Outcome != outPanic || !reBatchPanic.MatchString(d.Batch) {
				return d, false
			}
			d.Plain = rePlainPanic.ReplaceAllString(d.Plain, "boom")
			d.Batch = reBatchPanic.ReplaceAllString(d.Batch, "boom")
			return d, true
		},
	},
	{
		ID: "panic-no-postcall", Item: "4",
		Desc: "server PostCall does not run for a handler that panicked",
		Explain: whole(func(sc *Scenario, d Diff) bool {
			c := callOf(sc, d)
			return c != nil && c.Outcome == outPanic && serverStream(d) && d.Hook == "PostCall" && d.Field == "" && d.Batch == ""
		}),
	},
	{
		ID: "panic-reply-kept", Item: "4",
		Desc: "after a panic the caller's reply is left as it was, where rpcx decodes the zero reply into it",
		Explain: whole(func(sc *Scenario, d Diff) bool {
			c := callOf(sc, d)
			return c != nil && c.Outcome == outPanic && sc.Kind != kindHandler &&
				(isReply(d) || (serverStream(d) && d.Field == "res.payload" && d.Batch == "") ||
					(d.Where == "client" && d.Hook == "ClientAfterDecode" && d.Field == "payload"))
		}),
	},
	{
		ID: "function-error-reply", Item: "5",
		Desc: "a RegisterFunction function that fails sends its partial reply beside the error, and the caller decodes it",
		Explain: func(sc *Scenario, d Diff) (Diff, bool) {
			c := callOf(sc, d)
			if c == nil || (c.Outcome != outError && c.Outcome != outBlock) || sc.Kind != kindFunction {
				return d, false
			}
			if d.Where == "receipts" {
				// Inform's receipts: each reply is a fresh value.
				zero := "reply=Reply{N=0 Server= pad=0}"
				if sc.Serialize == protocol.SerializeNone {
					zero = "reply=[]byte(nil)"
				}
				d.Batch = rePartialReceipt.ReplaceAllString(d.Batch, zero)
				return d, true
			}
			if isReply(d) || (serverStream(d) && d.Field == "res.payload" && d.Plain == "") ||
				(d.Where == "client" && d.Hook == "ClientAfterDecode" && d.Field == "payload" && d.Plain == "") {
				d.Batch = d.Plain
				return d, true
			}
			return d, false
		},
	},
	{
		ID: "after-decode-payload-reencoded", Item: "new",
		Desc: "ClientAfterDecode's Payload on lanes is the caller's reply value encoded again, also for an error response that carried no payload",
		Explain: whole(func(sc *Scenario, d Diff) bool {
			c := callOf(sc, d)
			return c != nil && d.Where == "client" && d.Hook == "ClientAfterDecode" && d.Field == "payload" && d.Plain == "" && d.Batch != ""
		}),
	},
	{
		ID: "compress-flag", Item: "11",
		Desc: "the compress flag plugins see is None on lanes where rpcx shows Gzip",
		Explain: whole(func(sc *Scenario, d Diff) bool {
			return sc != nil && sc.Compress && slices.Contains([]string{"compress", "req.compress", "res.compress"}, d.Field) && d.Plain == "1" && d.Batch == "0"
		}),
	},
	{
		ID: "handler-write-hooks", Item: "12",
		Desc: "PreWriteResponse and PostWriteResponse run for AddHandler replies on lanes",
		Explain: whole(func(sc *Scenario, d Diff) bool {
			return sc != nil && sc.Kind == kindHandler && serverStream(d) && (d.Hook == "PreWriteResponse" || d.Hook == "PostWriteResponse") && d.Field == "" && d.Plain == ""
		}),
	},
	{
		ID: "rewrite-payload-lost", Item: "9",
		Desc: "a ClientBeforeEncode plugin's change of Payload does not reach the server",
		Explain: whole(func(sc *Scenario, d Diff) bool {
			if sc == nil || !sc.RewritePayload || callOf(sc, d) == nil {
				return false
			}
			return isReply(d) || (callerField(d) && d.Where == "receipts") ||
				slices.Contains([]string{"payload", "req.payload", "res.payload", "args", "reply", "outcome", "N"}, d.Field) && !(d.Where == "client" && d.Hook == "ClientBeforeEncode")
		}),
	},
	{
		ID: "fanout-handler-deadline", Item: "new",
		Desc: "Broadcast, Fork and Inform without a deadline give the handler one (rpcx's one-minute guard, which rpcx keeps on the client)",
		Explain: whole(func(sc *Scenario, d Diff) bool {
			c := callOf(sc, d)
			return c != nil && fanOut(c.Op) && c.Deadline == 0 && d.Hook == "run" && d.Field == "deadline" && d.Plain == "false" && d.Batch == "true"
		}),
	},
	{
		ID: "late-reply-no-after-decode", Item: "new",
		Desc: "a reply that arrives after its call ended (its deadline passed, Failbackup, Fork or Broadcast cancelled it) runs no ClientAfterDecode on lanes; rpcx's reader runs it",
		Explain: whole(func(sc *Scenario, d Diff) bool {
			c := callOf(sc, d)
			return c != nil && (c.Deadline != 0 || sc.FailMode == client.Failbackup || c.Op == opFork || c.Op == opBroadcast) &&
				d.Where == "client" && d.Hook == "ClientAfterDecode" && d.Field == "" && d.Batch == ""
		}),
	},
	{
		ID: "past-deadline-not-sent", Item: "new",
		Desc: "a call whose deadline has already passed is not sent on lanes; rpcx sends it, with a negative `__ServerTimeout`, and the handler runs",
		Explain: whole(func(sc *Scenario, d Diff) bool {
			c := callOf(sc, d)
			return c != nil && c.Deadline < 0 && ((d.Hook != "" && d.Field == "" && d.Batch == "") ||
				(d.Hook == "PreReadRequest" && d.Field == "count") || (callerField(d) && d.Where == "reply"))
		}),
	},
	{
		ID: "go-call-metadata", Item: "new",
		Desc: "Go's call.Metadata is not rpcx's: it lacks the `__ServerTimeout` rpcx's Go adds for a deadline, and holds the keys a ClientBeforeEncode plugin added",
		Explain: func(sc *Scenario, d Diff) (Diff, bool) {
			c := callOf(sc, d)
			if c == nil || c.Op != opGo || !callerField(d) || d.Where != "go.metadata" {
				return d, false
			}
			p, b := d.Plain, d.Batch
			if c.Deadline != 0 {
				p = withoutKey(p, "__ServerTimeout=set")
			}
			if sc.ClientPlugins {
				b = withoutKey(b, "trace=span-1")
			}
			if p == "{}" {
				p = "nil"
			}
			if b == "{}" {
				b = "nil"
			}
			if p == d.Plain && b == d.Batch {
				return d, false
			}
			d.Plain, d.Batch = p, b
			return d, true
		},
	},
	{
		ID: "go-ends-at-deadline", Item: "kept",
		Desc: "Go's call ends with the context's error at its deadline; rpcx's Go waits for the reply (docs/compatibility.md, client behaviour)",
		Explain: whole(func(sc *Scenario, d Diff) bool {
			c := callOf(sc, d)
			return c != nil && c.Op == opGo && c.Deadline != 0 && callerField(d) &&
				(d.Where == "reply" || d.Where == "go.resmetadata" || strings.HasPrefix(d.Where, "err"))
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
		ID: "empty-reply-decoded", Item: "19",
		Desc: "a reply whose encoding is empty is decoded anyway (a `[]byte` emptied, JSON and msgpack fail), where rpcx leaves the reply alone",
		Explain: whole(func(sc *Scenario, d Diff) bool {
			c := callOf(sc, d)
			return c != nil && c.Outcome == outEmpty && (sc.Kind == kindHandler || sc.Serialize == protocol.SerializeNone) && (callerField(d) || d.Where == "client")
		}),
	},
	{
		ID: "server-timeout-metadata", Item: "18",
		Desc: "a `__ServerTimeout` in the caller's own request metadata (no deadline) does not end the handler's context",
		Explain: whole(func(sc *Scenario, d Diff) bool {
			c := callOf(sc, d)
			return c != nil && c.ServerTimeout > 0 && c.Deadline == 0
		}),
	},
	{
		ID: "over-16mib", Item: "7",
		Desc: "an argument or reply over 16 MiB fails on lanes (ErrTooLarge, ErrReplyTooLarge)",
		Explain: whole(func(sc *Scenario, d Diff) bool {
			if c := callOf(sc, d); c != nil && (c.Outcome == outHuge || c.ArgPad == hugePad) {
				return true
			}
			// The encoding, compression or write of a large message may
			// end after its call did, in the next step's events.
			return sc != nil && sc.hasHuge() && (d.Phase == "close" || (d.Field == "" && hugePayload(d.Plain+" "+d.Batch)))
		}),
	},
	{
		ID: "hung-server", Item: "13",
		Desc: "a server that accepts and never answers: the drop-in waits for the lane handshake outside the caller's context (ErrPeerDown after seconds, calls to the other servers held up)",
		Explain: whole(func(sc *Scenario, d Diff) bool {
			// After the calls, the drop-in may still be redialling it.
			return sc != nil && sc.has(roleHung) && (d.Phase == "call" ||
				(d.Phase == "close" && (d.Hook == "ClientConnectionClose" || d.Hook == "accept")))
		}),
	},
}

const serverSaid = "server-said: "

var (
	// reClientErrorFunc is clientErrorFunc's prefix on a full message.
	reClientErrorFunc = regexp.MustCompile(`E\w* \w+\.\w+: `)
	rePlainPanic      = regexp.MustCompile(`\[service internal error\]: boom, method: \S+, argv: …, stack: …\n?`)
	reBatchPanic      = regexp.MustCompile(`rpcxbatch: handler \S+ panicked: boom`)
	rePartialReceipt  = regexp.MustCompile(`reply=(?:Reply\{N=\d+ Server=\w+ pad=0\}|"\d+\|\w+\|")`)
	rePeerDown        = regexp.MustCompile(`batchclient: peer down: [^:]+: `)
)

var rePayloadLen = regexp.MustCompile(`(?:payload=len=|pad=)(\d+)`)

// hugePayload reports whether an event's text shows a payload or an
// argument's pad over 16 MiB.
func hugePayload(s string) bool {
	for _, m := range rePayloadLen.FindAllStringSubmatch(s, -1) {
		if n, err := strconv.Atoi(m[1]); err == nil && n > 16<<20 {
			return true
		}
	}
	return false
}

// withoutKey is a metaString without the key=value kv.
func withoutKey(meta, kv string) string {
	if !strings.HasPrefix(meta, "{") {
		return meta
	}
	var kept []string
	for _, f := range strings.Split(strings.Trim(meta, "{}"), ",") {
		if f != kv && f != "" {
			kept = append(kept, f)
		}
	}
	return "{" + strings.Join(kept, ",") + "}"
}

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

// isReply reports whether d is the reply the caller got, or the one the
// client's PostCall saw.
func isReply(d Diff) bool {
	return (callerField(d) && d.Where == "reply") || (d.Where == "client" && d.Hook == "PostCall" && d.Field == "reply")
}

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
