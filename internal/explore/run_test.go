package explore

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/smallnest/rpcx/client"
	rpcxerrors "github.com/smallnest/rpcx/errors"
	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/share"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
)

// Running a scenario on one side: plain (rpcx's client.NewXClient, plain
// rpcx servers) or batch (batchclient.NewXClient, servers with
// batchserver.New), into an Outcome that compares across the two.

// Outcome is what a side did, masked.
type Outcome struct {
	Setup map[string][]Event // what the servers recorded as they started (Register, ...)
	Calls []CallOutcome
	Close map[string][]Event // what was recorded as the XClient closed
}

// CallOutcome is what one call did: what its caller got (Fields) and what
// the plugins, handlers and servers recorded during it (Streams).
type CallOutcome struct {
	Fields  []Field
	Streams map[string][]Event
}

const (
	settleQuiet = 100 * time.Millisecond
	settleHuge  = 700 * time.Millisecond
	settleMax   = 4 * time.Second
	// callGuard bounds a call whatever it waits for: no scenario's call
	// should take this long on either side.
	callGuard = 15 * time.Second
	// overrunSlack is how far past its deadline a call may return before
	// the outcome says it overran: generous, for a loaded machine.
	overrunSlack = time.Second
)

// clientErrorFunc is the ClientErrorFunc of scenarios that set one: it
// builds its text from the whole error response, as a user's does.
func clientErrorFunc(res *protocol.Message, e string) client.ServiceError {
	return client.NewServiceError(fmt.Sprintf("E%s %s.%s: %s", res.Metadata["code"], res.ServicePath, res.ServiceMethod, e))
}

// runSide runs sc on one side.
func runSide(sc *Scenario, batch bool) (*Outcome, error) {
	rec := newRecorder()
	f, err := startFleet(sc, batch, rec)
	if err != nil {
		return nil, err
	}
	defer f.stop()
	out := &Outcome{Setup: f.mask.streams(rec.take())}

	if sc.ClientErrorFunc {
		// runScenario holds clientErrorFuncMu: no other scenario runs.
		client.ClientErrorFunc = clientErrorFunc
		defer func() { client.ClientErrorFunc = nil }()
	}

	d, err := client.NewMultipleServersDiscovery(f.pairs())
	if err != nil {
		return nil, err
	}
	opt := client.DefaultOption
	opt.Retries = sc.Retries
	opt.SerializeType = sc.Serialize
	if sc.Compress {
		opt.CompressType = protocol.Gzip
	}
	switch sc.TLS {
	case tlsOK:
		_, pool := testCert()
		opt.TLSConfig = &tls.Config{RootCAs: pool}
	case tlsWrong:
		opt.TLSConfig = &tls.Config{RootCAs: x509.NewCertPool()}
	}
	var xc client.XClient
	if batch {
		xc = batchclient.NewXClient(sc.servicePath(), sc.FailMode, sc.SelectMode, d, opt)
	} else {
		xc = client.NewXClient(sc.servicePath(), sc.FailMode, sc.SelectMode, d, opt)
	}
	if sc.SelectMode == client.SelectByUser {
		xc.SetSelector(&orderedSelector{})
	}
	if sc.ClientPlugins {
		pc := client.NewPluginContainer()
		pc.Add(&clientHooks{rec: rec, rewrite: sc.RewritePayload})
		xc.SetPlugins(pc)
	}

	// Under Failbackup two servers (or one, twice) run each call at once:
	// the order of their events, and when connections open, are a race.
	race := sc.FailMode == client.Failbackup
	for i, c := range sc.Calls {
		fields, err := runCall(sc, xc, i, c, f.mask)
		quiet := settleQuiet
		if c.Outcome == outHuge || c.ArgPad == hugePad {
			// A message over 16 MiB may still be encoded, compressed or
			// on its way, with nothing to record, when the call returns.
			quiet = settleHuge
		}
		rec.settle(quiet, settleMax)
		streams := rec.take()
		for k, v := range f.preReads() {
			streams[k] = v
		}
		var sorted []string
		m := f.mask
		if race || sc.homogeneous() {
			// Which server rpcx's own selectors pick, and so whether a
			// call opens a connection, is not reproducible.
			dropConnEvents(streams)
		}
		if race {
			// Under Failbackup whether the backup call is made at all is a
			// race: what is compared is what ran, and how.
			fm := *f.mask
			fm.dedupe = true
			m = &fm
			sorted = []string{"*"}
		}
		switch {
		case (c.Op == opFork || c.Op == opBroadcast) && len(sc.Servers) > 1:
			// Fork cancels the other calls once one answered, Broadcast
			// once one failed: which of them were sent by then, and ran,
			// is a race. What is compared is what ran at all, and how.
			fm := *m
			fm.homogeneous, fm.dedupe = true, true
			m = &fm
			dropForkCancels(streams)
			sorted = []string{"*"}
		case fanOut(c.Op) && !race:
			// The calls to the servers run at once: their order in the
			// client's stream is a race on either side.
			sorted = []string{"client"}
		}
		// The error is read now that the calls a fan-out left running have
		// ended: rpcx's Broadcast returns at the first error while its
		// other calls still add theirs.
		fields = append(fields, errFields(err, m, c.Op)...)
		out.Calls = append(out.Calls, CallOutcome{Fields: fields, Streams: m.streams(streams, sorted...)})
	}
	xc.Close()
	rec.settle(settleQuiet, settleMax)
	closing := rec.take()
	for k, v := range f.preReads() {
		closing[k] = v
	}
	if race || sc.homogeneous() {
		dropConnEvents(closing)
	}
	// rpcx's Close closes its server clients in map order.
	out.Close = f.mask.streams(closing, "client")
	return out, nil
}

// String is the outcome in full, one event or field a line.
func (o *Outcome) String() string {
	var b strings.Builder
	streams := func(indent string, m map[string][]Event) {
		names := make([]string, 0, len(m))
		for k := range m {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			fmt.Fprintf(&b, "%s%s:\n", indent, k)
			for _, e := range m[k] {
				fmt.Fprintf(&b, "%s\t%s\n", indent, e)
			}
		}
	}
	b.WriteString("setup:\n")
	streams("\t", o.Setup)
	for i, c := range o.Calls {
		fmt.Fprintf(&b, "call %d:\n", i)
		for _, f := range c.Fields {
			fmt.Fprintf(&b, "\t%s = %s\n", f.K, f.V)
		}
		streams("\t", c.Streams)
	}
	b.WriteString("close:\n")
	streams("\t", o.Close)
	return b.String()
}

// dropConnEvents drops the events of when connections open (accepts and
// the reads they set off), for scenarios where that is a race.
func dropConnEvents(streams map[string][]Event) {
	for name, evs := range streams {
		if strings.HasSuffix(name, " reads") {
			delete(streams, name)
			continue
		}
		kept := evs[:0]
		for _, e := range evs {
			// HandleServiceError(EOF) is rpcx's word that a connection
			// closed.
			if !connHooks[e.Hook] && e.String() != "HandleServiceError err=EOF" {
				kept = append(kept, e)
			}
		}
		streams[name] = kept
	}
}

var connHooks = map[string]bool{
	"PostConnAccept": true, "PostConnClose": true, "accept": true,
	"ConnCreated": true, "ConnCreateFailed": true, "ClientConnected": true, "ClientConnectionClose": true,
}

// dropForkCancels drops, from a Fork's or Broadcast's streams, the
// connection events and the client's PostCall of the calls it cancelled.
func dropForkCancels(streams map[string][]Event) {
	dropConnEvents(streams)
	evs := streams["client"]
	kept := evs[:0]
	for _, e := range evs {
		if !(e.Hook == "PostCall" && strings.Contains(e.String(), "err=context canceled")) {
			kept = append(kept, e)
		}
	}
	streams["client"] = kept
}

func fanOut(op string) bool { return op == opBroadcast || op == opFork || op == opInform }

// sortEvents puts events in a canonical order: by their text, sequence
// numbers left out (they differ between the sides, and between the
// connections of one side, for events that are otherwise alike).
func sortEvents(evs []Event) {
	key := func(e Event) string {
		var b strings.Builder
		b.WriteString(e.Hook)
		for _, f := range e.Fields {
			if f.K != "seq" && !strings.HasSuffix(f.K, ".seq") {
				b.WriteString(" " + f.K + "=" + f.V)
			}
		}
		return b.String()
	}
	sort.SliceStable(evs, func(i, j int) bool { return key(evs[i]) < key(evs[j]) })
}

// runCall makes call i of sc and returns what its caller got, and the
// error it returned (to be read once the scenario settled).
func runCall(sc *Scenario, xc client.XClient, i int, c CallSpec, m *masker) ([]Field, error) {
	ctx := context.Background()
	var cancel context.CancelFunc = func() {}
	switch {
	case c.Deadline > 0:
		ctx, cancel = context.WithTimeout(ctx, c.Deadline)
	case c.Deadline < 0:
		ctx, cancel = context.WithDeadline(ctx, time.Now().Add(c.Deadline))
	}
	defer cancel()
	var req, res map[string]string
	if c.Maps || c.ServerTimeout > 0 {
		req = map[string]string{"tag": "t1"}
		if c.ServerTimeout > 0 {
			req[share.ServerTimeout] = strconv.Itoa(c.ServerTimeout)
		}
		ctx = context.WithValue(ctx, share.ReqMetaDataKey, req)
		// rpcx v1.9.4's Broadcast, Fork and Inform write the replies'
		// metadata into this map from a goroutine per server, unlocked
		// (they wrap the context, so Client.call never sees a
		// *share.Context to lock): over several servers the process dies
		// of concurrent map writes. Those calls get no response map.
		if !fanOut(c.Op) || len(sc.Servers) == 1 {
			res = map[string]string{}
			ctx = context.WithValue(ctx, share.ResMetaDataKey, res)
		}
	}
	in := input{N: i + 1, Outcome: c.Outcome, Pad: pattern(c.ArgPad)}
	var args, reply any
	if sc.Serialize == protocol.SerializeNone {
		args = argBytes(in)
		b := []byte("prefill")
		reply = &b
	} else {
		args = &Args{N: in.N, Outcome: in.Outcome, Pad: in.Pad}
		reply = &Reply{N: -1, Server: "prefill"}
	}

	var fields []Field
	add := func(k, v string) { fields = append(fields, Field{k, m.text(v)}) }
	start := time.Now()
	done := make(chan struct{})
	var err error
	var goFields []Field // written by the call's goroutine, read once it is done
	go func() {
		defer close(done)
		switch c.Op {
		case opCall:
			err = xc.Call(ctx, "Do", args, reply)
		case opGo:
			var call *client.Call
			call, err = xc.Go(ctx, "Do", args, reply, nil)
			if err != nil {
				return
			}
			select {
			case <-call.Done:
				err = call.Error
				goFields = append(goFields, Field{"go.metadata", m.text(metaString(call.Metadata))},
					Field{"go.resmetadata", m.text(metaString(call.ResMetadata))})
			case <-time.After(callGuard):
				err = errors.New("explore: Go's call never completed")
			}
		case opOneshot:
			err = xc.Oneshot(ctx, "Do", args)
		case opBroadcast:
			err = xc.Broadcast(ctx, "Do", args, reply)
		case opFork:
			err = xc.Fork(ctx, "Do", args, reply)
		case opInform:
			var rs []client.Receipt
			rs, err = xc.Inform(ctx, "Do", args, reply)
			var lines []string
			for _, r := range rs {
				lines = append(lines, fmt.Sprintf("%s: reply=%s err=%s", m.text(r.Address), valueString(r.Reply), errString(r.Error)))
			}
			sort.Strings(lines)
			goFields = append(goFields, Field{"receipts", m.text(strings.Join(lines, "; "))})
		}
	}()
	select {
	case <-done:
	case <-time.After(callGuard):
		// The goroutine ends when the XClient closes.
		add("guard", fmt.Sprintf("%s did not return in %s", c.Op, callGuard))
		return fields, nil
	}
	elapsed := time.Since(start)
	fields = append(fields, goFields...)
	if c.Deadline != 0 {
		limit := max(c.Deadline, 0) + overrunSlack
		add("overran deadline", fmt.Sprint(elapsed > limit))
	}
	switch {
	case fanOut(c.Op):
		// Which server's reply (and response metadata) the caller gets
		// is a race.
		anyServer := func(k, v string) {
			fields = append(fields, Field{k, reServerName.ReplaceAllString(m.text(v), "srv")})
		}
		anyServer("reply", valueString(reply))
		if res != nil {
			anyServer("caller res meta", metaString(res))
		}
	case c.Op != opOneshot:
		add("reply", valueString(reply))
	}
	if req != nil {
		add("caller req meta", metaString(req))
		if !fanOut(c.Op) {
			add("caller res meta", metaString(res))
		}
	}
	return fields, err
}

var sentinels = []struct {
	name string
	err  error
}{
	{"context.DeadlineExceeded", context.DeadlineExceeded},
	{"context.Canceled", context.Canceled},
	{"client.ErrXClientShutdown", client.ErrXClientShutdown},
	{"client.ErrXClientNoServer", client.ErrXClientNoServer},
	{"client.ErrServerUnavailable", client.ErrServerUnavailable},
	{"client.ErrShutdown", client.ErrShutdown},
	{"client.ErrBreakerOpen", client.ErrBreakerOpen},
	{"client.ErrUnsupportedCodec", client.ErrUnsupportedCodec},
	{"io.EOF", io.EOF},
	{"io.ErrUnexpectedEOF", io.ErrUnexpectedEOF},
}

// errFields is an error as the fields a caller can tell it by: text, type,
// whether it is rpcx's ServiceError, which sentinels it is, and the
// network operation of a *net.OpError inside it.
//
// The errors of an rpcx MultiError (Broadcast, Fork, Inform) are compared
// as a set: their order is the order the calls ended in. Broadcast returns
// at the first error, with what its other calls had added by then: for it,
// the set leaves out their cancellations.
func errFields(err error, m *masker, op string) []Field {
	if err == nil {
		return []Field{{"err", "nil"}}
	}
	text := err.Error()
	var multi *rpcxerrors.MultiError
	if errors.As(err, &multi) {
		var texts []string
		for _, e := range multi.Errors {
			if t := m.text(e.Error()); !(op == opBroadcast && t == context.Canceled.Error()) && !slices.Contains(texts, t) {
				texts = append(texts, t)
			}
		}
		sort.Strings(texts)
		text = "[" + strings.Join(texts, " | ") + "]"
	}
	f := []Field{{"err.text", m.text(text)}, {"err.type", fmt.Sprintf("%T", err)}}
	var se client.ServiceError
	if errors.As(err, &se) {
		f = append(f, Field{"err.service", fmt.Sprint(se.IsServiceError())})
	}
	var is []string
	for _, s := range sentinels {
		if errors.Is(err, s.err) {
			is = append(is, s.name)
		}
	}
	f = append(f, Field{"err.is", strings.Join(is, ",")})
	var netErr *net.OpError
	if errors.As(err, &netErr) {
		f = append(f, Field{"err.netop", netErr.Op})
	}
	return f
}

// orderedSelector is a user Selector that picks the servers in the order
// the discovery lists them (the "ord" of each value), round robin: the
// same order on both sides, unlike rpcx's built-in selectors.
type orderedSelector struct {
	mu   sync.Mutex
	keys []string
	i    int
}

func (s *orderedSelector) Select(context.Context, string, string, any) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.keys) == 0 {
		return ""
	}
	k := s.keys[s.i%len(s.keys)]
	s.i++
	return k
}

func (s *orderedSelector) UpdateServer(servers map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	type kv struct {
		k   string
		ord int
	}
	var all []kv
	for k, v := range servers {
		ord, _ := strconv.Atoi(strings.TrimPrefix(v, "ord="))
		all = append(all, kv{k, ord})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].ord < all[j].ord })
	s.keys = s.keys[:0]
	for _, x := range all {
		s.keys = append(s.keys, x.k)
	}
}
