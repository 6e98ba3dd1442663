package explore

import (
	"context"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"net"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/server"
	"github.com/smallnest/rpcx/share"
)

// What a side records: events (hook calls with their arguments, handler
// runs, the server's HandleServiceError calls) in streams, "client" for
// the client's plugin and one per server name; and how they are masked
// into a form that compares across the two sides.

// Field is one named value of an event.
type Field struct{ K, V string }

// Event is one hook call or handler step, with its arguments.
type Event struct {
	Hook   string
	Fields []Field
}

func (e Event) String() string {
	var b strings.Builder
	b.WriteString(e.Hook)
	for _, f := range e.Fields {
		b.WriteString(" " + f.K + "=" + f.V)
	}
	return b.String()
}

func ev(hook string, kv ...string) Event {
	e := Event{Hook: hook}
	for i := 0; i+1 < len(kv); i += 2 {
		e.Fields = append(e.Fields, Field{kv[i], kv[i+1]})
	}
	return e
}

// recorder collects a side's events.
type recorder struct {
	mu       sync.Mutex
	streams  map[string][]Event
	last     time.Time // of the last event or handler end
	inflight int       // handlers running
	frozen   bool
}

func newRecorder() *recorder { return &recorder{streams: map[string][]Event{}, last: time.Now()} }

func (r *recorder) add(stream string, e Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.frozen {
		return
	}
	r.streams[stream] = append(r.streams[stream], e)
	r.last = time.Now()
}

func (r *recorder) handlerStart() {
	r.mu.Lock()
	r.inflight++
	r.last = time.Now()
	r.mu.Unlock()
}

func (r *recorder) handlerEnd() {
	r.mu.Lock()
	r.inflight--
	r.last = time.Now()
	r.mu.Unlock()
}

// take returns the streams recorded so far and forgets them.
func (r *recorder) take() map[string][]Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.streams
	r.streams = map[string][]Event{}
	return s
}

// freeze makes the recorder ignore what comes after (the fleet's stop).
func (r *recorder) freeze() {
	r.mu.Lock()
	r.frozen = true
	r.mu.Unlock()
}

// settle waits until no handler runs and nothing was recorded for quiet,
// at most max: for what happens after the caller has its answer (Oneshot,
// Fork, a write hook, a handler that runs on past the caller's deadline).
func (r *recorder) settle(quiet, max time.Duration) {
	// What the step that just ended set off may not have begun yet: wait
	// a full quiet spell from now in any case.
	r.mu.Lock()
	r.last = time.Now()
	r.mu.Unlock()
	end := time.Now().Add(max)
	for time.Now().Before(end) {
		r.mu.Lock()
		idle := r.inflight == 0 && time.Since(r.last) >= quiet
		r.mu.Unlock()
		if idle {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// masker turns what differs between two runs of the same scenario and is
// not behaviour (addresses and ports, which server of interchangeable ones,
// pointers, stacks, the drop-in's internal network names) into fixed text.
type masker struct {
	addrs       map[string]string // host:port to server name
	homogeneous bool
	// dedupe keeps one of equal events in each stream.
	dedupe bool
	// seqs holds the (stream, connection, sequence number) keys the
	// servers' streams showed in the scenario's steps so far (see
	// labelSeqs); a copy of the masker shares it.
	seqs *seenSeqs
}

// seenSeqs is a scenario's set of sequence number keys seen.
type seenSeqs struct{ keys map[string]bool }

func newSeenSeqs() *seenSeqs { return &seenSeqs{keys: map[string]bool{}} }

// seqLabels names each request a stream saw within one step by its order
// of first appearance there ("#k").
type seqLabels struct {
	label map[string]string
	next  map[string]int
}

func newSeqLabels() *seqLabels {
	return &seqLabels{label: map[string]string{}, next: map[string]int{}}
}

// connField is the field of a server hook's event that names the
// connection its request came on: it keys the sequence number (which
// counts per connection on rpcx, per lane on the drop-in) and is dropped
// before the events are compared.
const connField = "conn"

func isSeqField(k string) bool { return k == "seq" || k == "req.seq" || k == "res.seq" }

// labelSeqs replaces the sequence numbers of a stream's events by labels,
// and drops their connField. Sequence numbers are per connection (rpcx's
// client counts from 0 on each) or per lane (the drop-in's call ids), so
// their values cannot be equal across the two sides; what rpcx
// guarantees, and what is compared, is that every hook of one request
// sees the same number, and that the requests of a connection have
// distinct ones. So within a step each (connection, number) is labelled
// by the order of its first appearance in the stream ("#0", "#1"): in a
// server's stream keyed by the connection the hook's context names, in
// the client's (whose hooks get no connection) by the number alone, so
// that a ClientAfterDecode shows the label of the ClientBeforeEncode whose
// response it is. A server's number that an earlier step of the scenario
// saw on the same connection gets " again": a request that reuses an
// earlier request's number. (Labels are per step, so that a request one
// side did not make in an earlier step, which other entries explain, does
// not shift every later label.) Where the client's events are put in a
// canonical order (racy), its numbers are masked whole ("*").
func (m *masker) labelSeqs(name string, evs []Event, sorted bool) []Event {
	client := name == "client"
	step := newSeqLabels()
	var seen map[string]bool
	if m.seqs != nil && !client {
		seen = m.seqs.keys // keys of earlier steps, read here, added below
	}
	var now []string
	out := make([]Event, len(evs))
	for i, e := range evs {
		conn := ""
		fields := make([]Field, 0, len(e.Fields))
		for _, f := range e.Fields {
			if f.K == connField {
				conn = f.V
				continue
			}
			fields = append(fields, f)
		}
		for j, f := range fields {
			if !isSeqField(f.K) {
				continue
			}
			switch {
			case client && sorted:
				fields[j].V = "*"
			default:
				key := name + "|" + conn + "|" + f.V
				l := step.of(name, conn, f.V)
				if seen[key] {
					l += " again"
				}
				fields[j].V = l
				now = append(now, key)
			}
		}
		out[i] = Event{Hook: e.Hook, Fields: fields}
	}
	if seen != nil {
		for _, k := range now {
			seen[k] = true
		}
	}
	return out
}

// of is the label of sequence number seq on conn in stream.
func (l *seqLabels) of(stream, conn, seq string) string {
	k := stream + "|" + conn + "|" + seq
	if v, ok := l.label[k]; ok {
		return v
	}
	v := fmt.Sprintf("#%d", l.next[stream])
	l.next[stream]++
	l.label[k] = v
	return v
}

var (
	reLoopback = regexp.MustCompile(`127\.0\.0\.1:\d+`)
	rePointer  = regexp.MustCompile(`0x[0-9a-f]{6,}`)
	// reStack is a goroutine's stack as runtime.Stack writes it: the
	// header, then pairs of a function line and a tab-indented file line
	// ending in the frame's offset.
	reStack       = regexp.MustCompile(`goroutine \d+ \[[^\]\n]*\]:(?:\n[^\n]*\n\t[^\n]*?\+0x[0-9a-f]+)+\n?`)
	reServerName  = regexp.MustCompile(`\b(live|slow)\d\b`)
	reBatchNet    = regexp.MustCompile(`rpcxbatch\d+@`)
	reServerTimer = regexp.MustCompile(`__ServerTimeout=\d+`)
	// reArgv is the argument in rpcx's RpcServiceInternalError text.
	reArgv = regexp.MustCompile(`(?s)(\[service internal error\]: .*?, argv: ).*?(, stack: )`)
)

func (m *masker) text(s string) string {
	if s == "" {
		return s
	}
	// Longest first, so that no address is a prefix of another's mask.
	addrs := make([]string, 0, len(m.addrs))
	for a := range m.addrs {
		addrs = append(addrs, a)
	}
	sort.Slice(addrs, func(i, j int) bool { return len(addrs[i]) > len(addrs[j]) })
	for _, a := range addrs {
		s = strings.ReplaceAll(s, a, m.addrs[a])
	}
	s = reLoopback.ReplaceAllString(s, "127.0.0.1:PORT")
	s = reBatchNet.ReplaceAllString(s, "rpcxbatchN@")
	s = reStack.ReplaceAllString(s, "…")
	s = reArgv.ReplaceAllString(s, "${1}…${2}")
	s = rePointer.ReplaceAllString(s, "0xPTR")
	s = reServerTimer.ReplaceAllString(s, "__ServerTimeout=set")
	if m.homogeneous {
		s = reServerName.ReplaceAllString(s, "srv")
	}
	return short(s)
}

// short keeps a long text comparable and readable: its start, length and
// hash.
func short(s string) string {
	if len(s) <= 1500 {
		return s
	}
	return fmt.Sprintf("%s…(%d bytes, fnv %08x)", s[:200], len(s), fnv32(s))
}

func fnv32(s string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(s))
	return h.Sum32()
}

func (m *masker) event(e Event) Event {
	out := Event{Hook: e.Hook, Fields: make([]Field, len(e.Fields))}
	for i, f := range e.Fields {
		out.Fields[i] = Field{f.K, m.text(f.V)}
	}
	return out
}

// streams masks the streams; with interchangeable servers their streams
// become one, "servers", made of theirs in a canonical order. The
// streams named in sorted (every stream for "*") have their events put in
// a canonical order: those whose order is a race on either side.
func (m *masker) streams(in map[string][]Event, sorted ...string) map[string][]Event {
	out := map[string][]Event{}
	var merged [][]Event
	sortAll := len(sorted) == 1 && sorted[0] == "*"
	names := make([]string, 0, len(in))
	for name := range in {
		names = append(names, name)
	}
	// In name order: the labels of sequence numbers are the scenario's.
	sort.Strings(names)
	for _, name := range names {
		evs := m.labelSeqs(name, in[name], sortAll || slices.Contains(sorted, name))
		masked := make([]Event, len(evs))
		for i, e := range evs {
			masked[i] = m.event(e)
		}
		if sortAll || slices.Contains(sorted, name) {
			sortEvents(masked)
		}
		if m.homogeneous && reServerName.MatchString(name) {
			merged = append(merged, masked)
			continue
		}
		out[name] = masked
	}
	if len(merged) > 0 {
		sort.Slice(merged, func(i, j int) bool { return joinEvents(merged[i]) < joinEvents(merged[j]) })
		var all []Event
		for _, s := range merged {
			all = append(all, s...)
		}
		if sortAll {
			sortEvents(all)
		}
		out["servers"] = all
	}
	if m.dedupe {
		for k, evs := range out {
			out[k] = dedupe(evs)
		}
	}
	return out
}

// dedupe keeps the first of equal events, their sequence numbers (which
// count what went before on each connection) masked.
func dedupe(evs []Event) []Event {
	seen := map[string]bool{}
	var out []Event
	for _, e := range evs {
		for i, f := range e.Fields {
			if isSeqField(f.K) {
				e.Fields[i].V = "*"
			}
		}
		if s := e.String(); !seen[s] {
			seen[s] = true
			out = append(out, e)
		}
	}
	return out
}

func joinEvents(evs []Event) string {
	var b strings.Builder
	for _, e := range evs {
		b.WriteString(e.String())
		b.WriteString("\n")
	}
	return b.String()
}

// metaString is metadata in key order, "nil" for a nil map.
func metaString(m map[string]string) string {
	if m == nil {
		return "nil"
	}
	kv := make([]string, 0, len(m))
	for k, v := range m {
		kv = append(kv, k+"="+v)
	}
	sort.Strings(kv)
	return "{" + strings.Join(kv, ",") + "}"
}

func payloadString(p []byte) string {
	if len(p) <= 48 {
		return hex.EncodeToString(p)
	}
	return fmt.Sprintf("len=%d fnv=%08x", len(p), fnv32(string(p)))
}

// msgFields are a message's fields as plugins see them.
func msgFields(m *protocol.Message) []string {
	if m == nil {
		return []string{"msg", "nil"}
	}
	return []string{
		"type", fmt.Sprint(m.MessageType()), "oneway", fmt.Sprint(m.IsOneway()), "heartbeat", fmt.Sprint(m.IsHeartbeat()),
		"status", fmt.Sprint(m.MessageStatusType()), "st", stName(m.SerializeType()), "compress", fmt.Sprint(m.CompressType()),
		"seq", fmt.Sprint(m.Seq()), "path", m.ServicePath, "method", m.ServiceMethod,
		"meta", metaString(m.Metadata), "payload", payloadString(m.Payload),
	}
}

func errString(err error) string {
	if err == nil {
		return "nil"
	}
	return err.Error()
}

func remote(c net.Conn) string {
	if c == nil {
		return "nil"
	}
	return c.RemoteAddr().String()
}

// valueString is an argument or reply value in short.
func valueString(v any) string {
	switch x := v.(type) {
	case nil:
		return "nil"
	case *Args:
		if x == nil {
			return "(*Args)nil"
		}
		return fmt.Sprintf("Args{N=%d Outcome=%s pad=%d}", x.N, x.Outcome, len(x.Pad))
	case *Reply:
		if x == nil {
			return "(*Reply)nil"
		}
		return fmt.Sprintf("Reply{N=%d Server=%s pad=%d}", x.N, x.Server, len(x.Pad))
	case *[]byte:
		if x == nil {
			return "(*[]byte)nil"
		}
		return bytesString(*x)
	case []byte:
		return bytesString(x)
	}
	return fmt.Sprintf("%T", v)
}

func bytesString(b []byte) string {
	if b == nil {
		return "[]byte(nil)"
	}
	if len(b) <= 48 {
		return fmt.Sprintf("%q", b)
	}
	return fmt.Sprintf("%q…(%d bytes, fnv %08x)", b[:24], len(b), fnv32(string(b)))
}

// clientHooks is an rpcx client plugin with every hook rpcx v1.9.4
// defines (client/plugin.go); it records each call with its arguments.
// ClientBeforeEncode stamps a trace id into the request's metadata, as a
// tracing plugin does, and with rewrite changes the payload, as a signing
// plugin may.
type clientHooks struct {
	rec     *recorder
	rewrite bool
}

func (h *clientHooks) add(hook string, kv ...string) { h.rec.add("client", ev(hook, kv...)) }

func (h *clientHooks) ConnCreated(c net.Conn) (net.Conn, error) {
	h.add("ConnCreated", "remote", remote(c))
	return c, nil
}

func (h *clientHooks) ConnCreateFailed(network, address string) {
	h.add("ConnCreateFailed", "network", network, "address", address)
}

func (h *clientHooks) ClientConnected(c net.Conn) (net.Conn, error) {
	h.add("ClientConnected", "remote", remote(c))
	return c, nil
}

func (h *clientHooks) ClientConnectionClose(c net.Conn) error {
	h.add("ClientConnectionClose", "remote", remote(c))
	return nil
}

func (h *clientHooks) PreCall(_ context.Context, servicePath, serviceMethod string, args any) error {
	h.add("PreCall", "path", servicePath, "method", serviceMethod, "args", valueString(args))
	return nil
}

func (h *clientHooks) PostCall(_ context.Context, servicePath, serviceMethod string, args, reply any, err error) error {
	h.add("PostCall", "path", servicePath, "method", serviceMethod, "args", valueString(args), "reply", valueString(reply), "err", errString(err))
	return nil
}

func (h *clientHooks) ClientBeforeEncode(m *protocol.Message) error {
	h.add("ClientBeforeEncode", msgFields(m)...)
	if m.Metadata == nil {
		m.Metadata = map[string]string{}
	}
	m.Metadata["trace"] = "span-1"
	if h.rewrite {
		m.Payload = rewritePayload(m.SerializeType(), m.Payload)
	}
	return nil
}

func (h *clientHooks) ClientAfterDecode(m *protocol.Message) error {
	h.add("ClientAfterDecode", msgFields(m)...)
	return nil
}

func (h *clientHooks) WrapSelect(next client.SelectFunc) client.SelectFunc {
	return func(ctx context.Context, servicePath, serviceMethod string, args any) string {
		k := next(ctx, servicePath, serviceMethod, args)
		h.add("Select", "path", servicePath, "method", serviceMethod, "key", k)
		return k
	}
}

// serverHooks is an rpcx server plugin with every hook rpcx v1.9.4
// defines (server/plugin.go) but MuxMatch and PostHTTPRequest (neither
// is reached over tcp); it records each call with its arguments in the
// server's stream. PreReadRequest, which rpcx runs before each read (also
// the one a connection waits in), is counted apart: its moment against
// the handler's hooks is a race on either side.
type serverHooks struct {
	rec  *recorder
	name string

	mu        sync.Mutex
	preReads  int
	connCount int
}

func (h *serverHooks) add(hook string, kv ...string) { h.rec.add(h.name, ev(hook, kv...)) }

func (h *serverHooks) Register(name string, _ any, metadata string) error {
	h.add("Register", "name", name, "metadata", metadata)
	return nil
}

func (h *serverHooks) RegisterFunction(serviceName, fname string, _ any, metadata string) error {
	h.add("RegisterFunction", "service", serviceName, "fname", fname, "metadata", metadata)
	return nil
}

func (h *serverHooks) Unregister(name string) error {
	h.add("Unregister", "name", name)
	return nil
}

func (h *serverHooks) HandleConnAccept(c net.Conn) (net.Conn, bool) {
	h.add("PostConnAccept")
	return c, true
}

func (h *serverHooks) HandleConnClose(net.Conn) bool {
	h.add("PostConnClose")
	return true
}

func (h *serverHooks) PreReadRequest(context.Context) error {
	h.mu.Lock()
	h.preReads++
	h.mu.Unlock()
	return nil
}

// takePreReads returns the PreReadRequest count so far and resets it.
func (h *serverHooks) takePreReads() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := h.preReads
	h.preReads = 0
	return n
}

func (h *serverHooks) PostReadRequest(ctx context.Context, r *protocol.Message, e error) error {
	if r != nil && r.IsHeartbeat() {
		return nil // see HeartbeatRequest
	}
	h.add("PostReadRequest", append(msgFields(r), "err", errString(e), connField, connOf(ctx))...)
	return nil
}

func (h *serverHooks) PreHandleRequest(ctx context.Context, r *protocol.Message) error {
	h.add("PreHandleRequest", append(msgFields(r), connField, connOf(ctx))...)
	return nil
}

func (h *serverHooks) PreCall(ctx context.Context, serviceName, methodName string, args any) (any, error) {
	h.add("PreCall", "service", serviceName, "method", methodName, "args", valueString(args))
	return args, nil
}

func (h *serverHooks) PostCall(ctx context.Context, serviceName, methodName string, args, reply any, err error) (any, error) {
	h.add("PostCall", "service", serviceName, "method", methodName, "args", valueString(args), "reply", valueString(reply), "err", errString(err))
	return reply, nil
}

func (h *serverHooks) PreWriteResponse(ctx context.Context, req, res *protocol.Message, err error) error {
	if req != nil && req.IsHeartbeat() {
		return nil
	}
	h.add("PreWriteResponse", append(append(prefixed("req.", msgFields(req)), prefixed("res.", msgFields(res))...), "err", errString(err), connField, connOf(ctx))...)
	return nil
}

func (h *serverHooks) PostWriteResponse(ctx context.Context, req, res *protocol.Message, err error) error {
	if req != nil && req.IsHeartbeat() {
		return nil
	}
	h.add("PostWriteResponse", append(append(prefixed("req.", msgFields(req)), prefixed("res.", msgFields(res))...), "err", errString(err), connField, connOf(ctx))...)
	return nil
}

func (h *serverHooks) PreWriteRequest(context.Context) error {
	h.add("PreWriteRequest")
	return nil
}

func (h *serverHooks) PostWriteRequest(_ context.Context, r *protocol.Message, e error) error {
	h.add("PostWriteRequest", append(msgFields(r), "err", errString(e))...)
	return nil
}

// HeartbeatRequest is not recorded: the lanes keep a heartbeat of their
// own (docs/compatibility.md, client options), whose count is a matter
// of time, not of the calls.
func (h *serverHooks) HeartbeatRequest(context.Context, *protocol.Message) error { return nil }

// connOf names the connection a server hook's context carries.
func connOf(ctx context.Context) string {
	c, _ := ctx.Value(server.RemoteConnContextKey).(net.Conn)
	if c == nil {
		return "nil"
	}
	return c.RemoteAddr().String() + ">" + c.LocalAddr().String()
}

func prefixed(p string, kv []string) []string {
	out := make([]string, len(kv))
	for i := range kv {
		if i%2 == 0 {
			out[i] = p + kv[i]
		} else {
			out[i] = kv[i]
		}
	}
	return out
}

// handlerView is what a handler records of the context it runs in.
func handlerView(value func(any) any, deadline bool) []string {
	req, _ := value(share.ReqMetaDataKey).(map[string]string)
	return []string{"meta", metaString(req), "deadline", fmt.Sprint(deadline)}
}
