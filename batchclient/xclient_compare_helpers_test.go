package batchclient_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/server"
	"github.com/smallnest/rpcx/share"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// The fixtures of the XClient comparison suite (xclient_compare_test.go):
// a fleet of named rpcx servers whose handler records every run, the two
// XClients under comparison, and the outcome of a call in a form that
// compares across them.

// CmpArgs is the argument of CmpSvc.Do. Fail and SleepMs are keyed by the
// server's name, "*" for every server.
type CmpArgs struct {
	A, B    int
	Fail    map[string]string
	SleepMs map[string]int
	ResMeta bool
}

// CmpReply is CmpSvc.Do's answer: A*B and the server that ran it.
type CmpReply struct {
	C      int
	Server string
}

// cmpRun is one run of CmpSvc.Do as its handler saw it.
type cmpRun struct {
	Server   string
	Meta     string // request metadata, __ServerTimeout's value masked
	Deadline bool   // the handler's ctx had a deadline
}

// cmpLog records the runs of every server of a fleet.
type cmpLog struct {
	mu   sync.Mutex
	runs []cmpRun
}

func (l *cmpLog) add(r cmpRun) {
	l.mu.Lock()
	l.runs = append(l.runs, r)
	l.mu.Unlock()
}

// take returns the runs recorded so far and forgets them.
func (l *cmpLog) take() []cmpRun {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.runs
	l.runs = nil
	return r
}

func (l *cmpLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.runs)
}

// settle waits until at least want runs are recorded and no more arrive
// for 60 ms (at most 5 s): for calls whose handlers run after the caller
// has its answer (Oneshot, Fork, Failbackup's loser), and to see that a
// call that should not reach a handler did not.
func (l *cmpLog) settle(want int) {
	deadline := time.Now().Add(5 * time.Second)
	n, since := l.len(), time.Now()
	for time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		if m := l.len(); m != n {
			n, since = m, time.Now()
			continue
		}
		if n >= want && time.Since(since) >= 60*time.Millisecond {
			return
		}
	}
}

// waitFor waits, at most 5 s, until at least n runs are recorded.
func (l *cmpLog) waitFor(n int) {
	for deadline := time.Now().Add(5 * time.Second); l.len() < n && time.Now().Before(deadline); {
		time.Sleep(2 * time.Millisecond)
	}
}

// CmpSvc is the service of the comparison fleet: one per server, named.
type CmpSvc struct {
	name string
	log  *cmpLog
}

// Do records the run, sleeps and fails as args say for this server, sets
// the response metadata "srv" when args.ResMeta, and answers A*B.
func (s *CmpSvc) Do(ctx context.Context, a *CmpArgs, r *CmpReply) error {
	req, _ := ctx.Value(share.ReqMetaDataKey).(map[string]string)
	_, dl := ctx.Deadline()
	s.log.add(cmpRun{Server: s.name, Meta: maskedMeta(req), Deadline: dl})
	if a.ResMeta {
		if res, ok := ctx.Value(share.ResMetaDataKey).(map[string]string); ok {
			res["srv"] = s.name
		}
	}
	if ms := pick(a.SleepMs, s.name); ms > 0 {
		select {
		case <-time.After(time.Duration(ms) * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	r.C, r.Server = a.A*a.B, s.name
	if f := pick(a.Fail, s.name); f != "" {
		return errors.New(f)
	}
	return nil
}

func pick[V any](m map[string]V, name string) V {
	if v, ok := m[name]; ok {
		return v
	}
	return m["*"]
}

// maskedMeta formats metadata in key order with __ServerTimeout's value
// (the time left) replaced by "set": its presence is compared, not its
// value. A nil map is "nil".
func maskedMeta(m map[string]string) string {
	if m == nil {
		return "nil"
	}
	kv := make([]string, 0, len(m))
	for k, v := range m {
		if k == share.ServerTimeout {
			v = "set"
		}
		kv = append(kv, k+"="+v)
	}
	sort.Strings(kv)
	return "{" + strings.Join(kv, ",") + "}"
}

// cmpServer is one server of a fleet.
type cmpServer struct {
	name string
	addr string
	srv  *server.Server
}

// cmpFleetConfig says how a fleet's servers are made.
type cmpFleetConfig struct {
	n     int
	plain bool // no batch plugin
	auth  func(ctx context.Context, req *protocol.Message, token string) error
	// dead adds that many addresses nothing listens on (a closed
	// listener's), named "dead0", "dead1", ...
	dead int
}

// cmpFleet is n servers of CmpSvc, named "s0", "s1", ..., on loopback,
// and the dead addresses; all record in log.
type cmpFleet struct {
	log     *cmpLog
	servers []cmpServer
	dead    []string
}

func startCmpFleet(t *testing.T, cfg cmpFleetConfig) *cmpFleet {
	t.Helper()
	f := &cmpFleet{log: &cmpLog{}}
	for i := range cfg.n {
		name := fmt.Sprintf("s%d", i)
		s := server.NewServer()
		if cfg.auth != nil {
			s.AuthFunc = cfg.auth
		}
		if !cfg.plain {
			_, err := batchserver.New(s)
			require.NoError(t, err)
		}
		require.NoError(t, s.RegisterName("Cmp", &CmpSvc{name: name, log: f.log}, ""))
		addr, stop, err := testsvc.Serve(s)
		require.NoError(t, err)
		t.Cleanup(testsvc.StopWhenIdle(s, stop))
		f.servers = append(f.servers, cmpServer{name: name, addr: addr, srv: s})
	}
	for range cfg.dead {
		f.dead = append(f.dead, freeAddr(t))
	}
	return f
}

// pairs are the discovery pairs of the live servers (with value, when
// given, by server name) and then the dead addresses.
func (f *cmpFleet) pairs(values map[string]string) []*client.KVPair {
	var out []*client.KVPair
	for _, s := range f.servers {
		out = append(out, &client.KVPair{Key: "tcp@" + s.addr, Value: values[s.name]})
	}
	for _, d := range f.dead {
		out = append(out, &client.KVPair{Key: "tcp@" + d})
	}
	return out
}

// discovery is a fresh MultipleServersDiscovery over pairs(values).
func (f *cmpFleet) discovery(t *testing.T, values map[string]string) *client.MultipleServersDiscovery {
	t.Helper()
	d, err := client.NewMultipleServersDiscovery(f.pairs(values))
	require.NoError(t, err)
	return d
}

// normalize replaces the fleet's addresses in s by the servers' names
// ("dead" for every dead one: which of them an error names depends on
// the selector's order, which rpcx takes from map iteration).
func (f *cmpFleet) normalize(s string) string {
	for _, sv := range f.servers {
		s = strings.ReplaceAll(s, sv.addr, sv.name)
	}
	for _, d := range f.dead {
		s = strings.ReplaceAll(s, d, "dead")
	}
	return s
}

// name is the server name of an rpcx key or address.
func (f *cmpFleet) name(key string) string {
	_, addr, ok := strings.Cut(key, "@")
	if !ok {
		addr = key
	}
	return f.normalize(addr)
}

// xcMaker makes one of the XClients under comparison.
type xcMaker struct {
	name string
	mk   func(servicePath string, fm client.FailMode, sm client.SelectMode, d client.ServiceDiscovery, opt client.Option) client.XClient
}

// xcMakers are rpcx v1.9.4's own XClient, first (the reference), and the
// drop-in.
var xcMakers = []xcMaker{
	{"rpcx", client.NewXClient},
	{"drop-in", func(servicePath string, fm client.FailMode, sm client.SelectMode, d client.ServiceDiscovery, opt client.Option) client.XClient {
		return batchclient.NewXClient(servicePath, fm, sm, d, opt)
	}},
}

// newCmpXClient makes an XClient of m for the "Cmp" service; it is closed
// when the test ends.
func newCmpXClient(t *testing.T, m xcMaker, fm client.FailMode, sm client.SelectMode, d client.ServiceDiscovery, opt client.Option) client.XClient {
	t.Helper()
	xc := m.mk("Cmp", fm, sm, d, opt)
	t.Cleanup(func() { xc.Close() })
	if m.name == "drop-in" {
		// What is compared is the drop-in's own call path: were rpcx's
		// XClient laid out otherwise than v1.9.4's, every call would
		// quietly go through rpcx's, and these tests would compare rpcx
		// with itself.
		require.True(t, batchclient.OwnCallPath(xc), "the drop-in cannot read rpcx's XClient: its calls take rpcx's path")
	}
	return xc
}

// cmpErr is an error in a form that compares across the two XClients.
type cmpErr struct {
	Text         string
	Type         string
	ServiceError bool
	Is           []string // which of the sentinels below it is
}

var cmpSentinels = []struct {
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
}

// describeErr is err as cmpErr, its addresses normalized by f (when not
// nil); nil for nil.
func describeErr(f *cmpFleet, err error) *cmpErr {
	if err == nil {
		return nil
	}
	e := &cmpErr{Text: err.Error(), Type: fmt.Sprintf("%T", err)}
	// Documented difference (docs/semantics.md, "is unreachable"): where
	// rpcx's XClient returns the dial error, the drop-in returns
	// ErrPeerDown wrapping it. The dial error itself is compared.
	var dial *net.OpError
	if errors.As(err, &dial) && dial.Op == "dial" {
		e.Text, e.Type = dial.Error(), fmt.Sprintf("%T", dial)
	}
	if f != nil {
		e.Text = f.normalize(e.Text)
	}
	var se client.ServiceError
	if errors.As(err, &se) {
		e.ServiceError = se.IsServiceError()
	}
	for _, s := range cmpSentinels {
		if errors.Is(err, s.err) {
			e.Is = append(e.Is, s.name)
		}
	}
	return e
}

// cmpOutcome is what one call did, as caller and handlers saw it.
type cmpOutcome struct {
	Err       *cmpErr
	Reply     CmpReply
	Runs      []cmpRun
	CallerReq string // the caller's request metadata map after the call
	CallerRes string // the caller's response metadata map after the call
}

// cmpCtx is the context of one call: a deadline of d (none for 0, one
// already past for a negative d), and the caller's request and response
// metadata maps when withMaps (the request map starting as reqMeta, or
// {"tag": "t1"} for nil).
func cmpCtx(t *testing.T, d time.Duration, withMaps bool, reqMeta map[string]string) (ctx context.Context, req, res map[string]string) {
	t.Helper()
	ctx = context.Background()
	switch {
	case d > 0:
		ctx = ctxT(t, d)
	case d < 0:
		c, cancel := context.WithDeadline(ctx, time.Now().Add(d))
		t.Cleanup(cancel)
		ctx = c
	}
	if withMaps {
		if reqMeta == nil {
			// A key of the caller's own, which the handler must see.
			reqMeta = map[string]string{"tag": "t1"}
		}
		req, res = map[string]string{}, map[string]string{}
		for k, v := range reqMeta {
			req[k] = v
		}
		ctx = context.WithValue(context.WithValue(ctx, share.ReqMetaDataKey, req), share.ResMetaDataKey, res)
	}
	return ctx, req, res
}

// callOnce makes one Call and returns its outcome; the runs are those
// recorded once the log settled at least at wantRuns (at once for a
// negative wantRuns).
func callOnce(t *testing.T, f *cmpFleet, xc client.XClient, d time.Duration, withMaps bool, args *CmpArgs, wantRuns int) cmpOutcome {
	t.Helper()
	ctx, req, res := cmpCtx(t, d, withMaps, nil)
	var r CmpReply
	err := xc.Call(ctx, "Do", args, &r)
	return finishOutcome(f, err, r, req, res, wantRuns)
}

// goOnce makes one Go call and waits for it.
func goOnce(t *testing.T, f *cmpFleet, xc client.XClient, d time.Duration, withMaps bool, args *CmpArgs, wantRuns int) cmpOutcome {
	t.Helper()
	ctx, req, res := cmpCtx(t, d, withMaps, nil)
	var r CmpReply
	call, err := xc.Go(ctx, "Do", args, &r, nil)
	if err == nil {
		select {
		case <-call.Done:
			err = call.Error
		case <-time.After(10 * time.Second):
			t.Fatal("Go: no answer in 10 s")
		}
	}
	return finishOutcome(f, err, r, req, res, wantRuns)
}

// oneshotOnce makes one Oneshot; the handler is waited for.
func oneshotOnce(t *testing.T, f *cmpFleet, xc client.XClient, d time.Duration, withMaps bool, args *CmpArgs, wantRuns int) cmpOutcome {
	t.Helper()
	ctx, req, res := cmpCtx(t, d, withMaps, nil)
	err := xc.Oneshot(ctx, "Do", args)
	return finishOutcome(f, err, CmpReply{}, req, res, wantRuns)
}

func finishOutcome(f *cmpFleet, err error, r CmpReply, req, res map[string]string, wantRuns int) cmpOutcome {
	if wantRuns >= 0 {
		f.log.settle(wantRuns)
	}
	o := cmpOutcome{Err: describeErr(f, err), Reply: r, Runs: f.log.take()}
	if req != nil {
		o.CallerReq = maskedMeta(req)
		o.CallerRes = f.normalize(maskedMeta(res))
	}
	return o
}

// callKinds are Call, Go and Oneshot, each as a function that makes one
// call of its kind.
var callKinds = []struct {
	name string
	do   func(t *testing.T, f *cmpFleet, xc client.XClient, d time.Duration, withMaps bool, args *CmpArgs, wantRuns int) cmpOutcome
}{
	{"Call", callOnce},
	{"Go", goOnce},
	{"Oneshot", oneshotOnce},
}

// sortedSelector is a user Selector that picks the servers in the order
// of their keys, round robin: deterministic, unlike rpcx's RoundRobin
// whose order is a map's. It records the keys it was given.
type sortedSelector struct {
	mu   sync.Mutex
	keys []string
	i    int
}

func (s *sortedSelector) Select(context.Context, string, string, any) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.keys) == 0 {
		return ""
	}
	k := s.keys[s.i%len(s.keys)]
	s.i++
	return k
}

func (s *sortedSelector) UpdateServer(servers map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys = s.keys[:0]
	for k := range servers {
		s.keys = append(s.keys, k)
	}
	sort.Strings(s.keys)
}
