package batchserver

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/smallnest/rpcx/log"
	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/share"

	"github.com/rpcxbatch/rpcxbatch/codec"
	"github.com/rpcxbatch/rpcxbatch/internal/fastcodec"
	"github.com/rpcxbatch/rpcxbatch/internal/rpcxlayout"
)

// rpcx's metadata keys as interface values, made once: converting the
// string-typed keys on every entry allocates.
var (
	reqMetaKey any = share.ReqMetaDataKey
	resMetaKey any = share.ResMetaDataKey
)

// entryContext builds the context a handler sees, as rpcx builds it for a
// plain request: the connection, the request and response metadata, and the
// caller's deadline, counted from when the entry's frame arrived; or, when
// it comes first, or the caller has none, the one a "__ServerTimeout" in the
// request metadata gives (the caller put it there, or rpcx's XClient did,
// from the caller's deadline), as rpcx gives a handler a context that ends
// that many milliseconds after it took the request up (parseServerTimeout).
// The entry must be ended (end) when it is done. fr is the entry's frame
// (see bytewindow.go).
func entryContext(c *conn, e *codec.Entry, arrived time.Time, fr *frameHold) *entryCtx {
	var deadline time.Time
	hasDeadline := e.TimeoutMicros > 0
	if hasDeadline {
		deadline = arrived.Add(time.Duration(e.TimeoutMicros) * time.Microsecond)
	}
	metaDeadline := false
	if len(e.Metadata) > 0 {
		if d, ok := metadataDeadline(e.Metadata, arrived); ok && (!hasDeadline || d.Before(deadline)) {
			deadline, hasDeadline, metaDeadline = d, true, true
		}
	}
	ec := newEntryCtx(c.c, arrived, e.Metadata, hasDeadline, deadline)
	ec.serverTimeout = e.ServerTimeout
	ec.metaDeadline = metaDeadline
	ec.frame = fr
	return ec
}

// metadataDeadline is the deadline the "__ServerTimeout" of request
// metadata md gives an entry that arrived then, if md has one rpcx reads
// (a whole number of milliseconds).
func metadataDeadline(md map[string]string, arrived time.Time) (time.Time, bool) {
	v, ok := md[share.ServerTimeout]
	if !ok {
		return time.Time{}, false
	}
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return arrived.Add(time.Duration(ms) * time.Millisecond), true
}

// runCall runs one call or cast entry the way rpcx runs a request: auth,
// PreHandleRequest plugins, lookup, decode, PreCall plugins, the method,
// PostCall plugins, encode. A call's outcome goes back as a reply (through
// the write hooks); a cast's is only counted. The entry's read hooks, if
// any, have run on the delivery path. An error goes to the server's
// ServerErrorFunc and HandleServiceError where rpcx hands it to them
// (errKind).
func (p *Plugin) runCall(c *conn, ec *entryCtx, e *codec.Entry, fc *fastcodec.Codec) {
	defer ec.end()
	call := e.Kind == codec.KindCall
	var dst []byte
	if call {
		dst = c.replyBufs.get()
	}
	payload, how, err := p.guarded(ec, e, dst, fc)
	if err == nil {
		if call {
			p.reply(c, ec, e, payload, nil, "")
		}
		return
	}
	var text string
	switch {
	case how == errWritten:
		text = err.Error()
	case call || how == errHandled:
		// rpcx's handleError runs for a oneway request's error too.
		text = p.errorText(ec, e, payload, err)
	}
	if how == errHandled {
		p.handleServiceError(err)
	}
	if call {
		p.reply(c, ec, e, payload, err, text)
	}
	if how == errAuth && p.s.HandleServiceError != nil {
		// After the response, as rpcx's read loop calls it.
		p.s.HandleServiceError(err)
	}
}

// errKind says where rpcx v1.9.4 would have met an entry's error, and so
// which of the server's error functions see it.
type errKind uint8

const (
	// errHandled: returned by rpcx's handleRequest (no such service or
	// method, no codec, the argument's decode, a PreCall or PostCall
	// plugin, the method, the reply's encode). ServerErrorFunc makes its
	// text (handleError), and HandleServiceError gets it before the
	// response is written, or rpcx logs it at WARN.
	errHandled errKind = iota
	// errAuth: refused by the server's AuthFunc. ServerErrorFunc makes a
	// call's text, and HandleServiceError gets it after the response.
	errAuth
	// errWritten: written as the response without handleError: an
	// AddHandler handler's error reply (ctx.WriteError), or a panic
	// outside a service method, which rpcx's processOneRequest recovers
	// and writes. Its text is its own, neither the write hooks nor
	// ServerErrorFunc see it, and HandleServiceError saw it already.
	errWritten
	// errOwn: the plugin's own refusal (ErrDeadlinePassed), which rpcx has
	// no counterpart of. ServerErrorFunc makes its text, as for any error
	// response; HandleServiceError does not get it.
	errOwn
)

// errorText is the text of a call's error reply, made by the server's
// ServerErrorFunc as rpcx's handleError makes it: from the response
// message (the request's header, made a response with status Error, an
// empty metadata map, and as payload the reply sent beside the error) and
// the error. Metadata the function puts in the response goes out with it,
// over what the handler set, as in rpcx. Without one, it is err.Error().
func (p *Plugin) errorText(ec *entryCtx, e *codec.Entry, payload []byte, err error) string {
	f := p.s.ServerErrorFunc
	if f == nil {
		return err.Error()
	}
	req := ec.req
	if req == nil {
		req = requestMessage(ec, e)
	}
	res := req.Clone()
	res.SetMessageType(protocol.Response)
	res.SetMessageStatusType(protocol.Error)
	res.Metadata = make(map[string]string)
	res.Payload = payload
	text := f(res, err)
	ec.addResponseMetadata(res.Metadata)
	return text
}

// addResponseMetadata puts the metadata of a response written for the
// entry (by ServerErrorFunc, or an AddHandler handler) into the entry's
// response metadata, over what the handler set, as rpcx sends it; the
// error text travels in its own field.
func (ec *entryCtx) addResponseMetadata(meta map[string]string) {
	if len(meta) == 0 {
		return
	}
	rm := ec.metadata(&ec.resMeta)
	ec.metaMu.Lock()
	defer ec.metaMu.Unlock()
	for k, v := range meta {
		if k != protocol.ServiceError {
			rm[k] = v
		}
	}
}

// handleServiceError hands an error the handling of an entry returned to
// the server's HandleServiceError, or, without one, logs it at WARN, as
// rpcx's processOneRequest does.
func (p *Plugin) handleServiceError(err error) {
	if p.s.HandleServiceError != nil {
		p.s.HandleServiceError(err)
		return
	}
	log.Warnf("rpcx: failed to handle request: %v", err)
}

// guarded runs execute and turns a panic anywhere in it outside a service
// method (AuthFunc, a PreCall or PostCall plugin, a codec's Unmarshal on
// untrusted bytes, an AddHandler handler) into this entry's error, as
// rpcx's processOneRequest recovers a plain request's: the entry fails
// with the panic value's text, written as the response without the write
// hooks, and the server goes on. A service method's own panic is the
// method's error (callMethod).
//
// A call's reply is encoded by appending to dst. fc is the running
// goroutine's codec.
func (p *Plugin) guarded(ec *entryCtx, e *codec.Entry, dst []byte, fc *fastcodec.Codec) (payload []byte, how errKind, err error) {
	defer func() {
		if r := recover(); r != nil {
			p.metrics.errPanic.Inc(1)
			ec.direct = true
			if h := p.s.HandleServiceError; h != nil {
				h(fmt.Errorf("%v", r))
			} else {
				// At ERROR with the stack, as rpcx logs a plain
				// request's panic: its default logger shows no less.
				log.Errorf("[handler internal error]: servicepath: %s, servicemethod: %s, err: %v, stacks: %s", e.ServicePath, e.ServiceMethod, r, debug.Stack())
			}
			payload, how, err = nil, errWritten, &PanicError{Service: e.ServicePath, Method: e.ServiceMethod, Value: fmt.Sprint(r)}
		}
	}()
	return p.execute(ec, e, dst, fc)
}

// deadlinePassed reports, and counts, an entry whose caller's deadline has
// passed: it had no time left when its frame was written, or the deadline,
// counted from when the frame was read, has passed since (the entry waited
// behind others for a goroutine, or behind its plugins). It is checked when
// the entry's goroutine takes it up and again just before the handler
// starts, so no handler starts after its caller's deadline.
//
// The deadline is arrival time plus the time left, and arrival time has a
// monotonic reading: time.Until then reads only the monotonic clock, where
// time.Now().Before would read the wall clock too, twice per entry.
//
// A deadline the request metadata's "__ServerTimeout" gave the handler's
// context (entryCtx.metaDeadline) does not refuse the entry: rpcx runs
// the handler with a context that has ended. Only the caller's does.
func (p *Plugin) deadlinePassed(ec *entryCtx, e *codec.Entry) bool {
	if e.TimeoutMicros < 0 || (e.TimeoutMicros > 0 && time.Until(callerDeadline(ec, e)) <= 0) {
		p.metrics.errDeadline.Inc(1)
		return true
	}
	return false
}

// callerDeadline is the deadline of an entry whose caller had one
// (TimeoutMicros > 0).
func callerDeadline(ec *entryCtx, e *codec.Entry) time.Time {
	if !ec.metaDeadline {
		return ec.dl.deadline
	}
	// The context's deadline came first: count the caller's from the
	// arrival time, read back from the wall clock reading ec keeps.
	return time.Unix(0, ec.start).Add(time.Duration(e.TimeoutMicros) * time.Microsecond)
}

func (p *Plugin) execute(ec *entryCtx, e *codec.Entry, dst []byte, fc *fastcodec.Codec) (payload []byte, how errKind, err error) {
	ctx := ec.shareContext()
	if p.deadlinePassed(ec, e) {
		return nil, errOwn, ErrDeadlinePassed
	}
	if err := p.auth(ec, e); err != nil {
		if e.Kind != codec.KindCall {
			p.preWriteOneway(ec, err)
		}
		return nil, errAuth, err
	}
	p.preHandle(ec)
	// rpcx looks in its AddHandler router before its services.
	if h := p.router.lookup(e.ServicePath, e.ServiceMethod); h != nil {
		payload, err = p.runHandler(ec, e, h, dst)
		return payload, errWritten, err
	}
	m, found := p.services.lookup(e.ServicePath, e.ServiceMethod)
	if m == nil {
		p.metrics.errUnknown.Inc(1)
		// The same texts rpcx gives, so callers see one error on both paths.
		if !found {
			return nil, errHandled, errors.New("rpcx: can't find service " + e.ServicePath)
		}
		return nil, errHandled, errors.New("rpcx: can't find method " + e.ServiceMethod)
	}
	st := protocol.SerializeType(e.SerializeType)
	cd := fastcodec.Resolve(st) // once for the argument and the reply
	if cd.Missing() {
		p.metrics.errCodec.Inc(1)
		return nil, errHandled, fmt.Errorf("can not find codec for %d", e.SerializeType) // rpcx's text
	}
	argPtr, arg := m.newArg()
	// The argument may keep the frame's bytes (rpcx's ByteCodec does), as
	// a plain request's argument keeps its message's: rpcx reads every
	// frame into a buffer of its own that nothing writes to again, and an
	// entry's payload is capped at its end, so the handler owns its bytes.
	if err := fc.DecodeSharedResolved(cd, e.Payload, argPtr); err != nil {
		p.metrics.errCodec.Inc(1)
		m.recycleArg(argPtr)
		return nil, errHandled, err
	}
	argI, err := p.s.Plugins.DoPreCall(ctx, e.ServicePath, e.ServiceMethod, argPtr)
	if err != nil {
		return nil, errHandled, err
	}
	if argI != argPtr {
		// A PreCall plugin replaced the argument.
		arg = reflect.ValueOf(argI)
		if m.ArgType().Kind() != reflect.Pointer {
			arg = arg.Elem()
		}
	}
	reply := m.newReply()
	how = errHandled
	panicked := false
	if p.deadlinePassed(ec, e) {
		// PostCall still runs, with the error, as after a failed handler:
		// a plugin that began something in PreCall ends it there.
		err, how = ErrDeadlinePassed, errOwn
	} else {
		panicked, err = p.callMethod(ctx, m, arg, reply)
	}
	replyI, err1 := p.s.Plugins.DoPostCall(ctx, e.ServicePath, e.ServiceMethod, argI, reply.Interface(), err)
	if !panicked {
		// A panic's error shows the argument (its Argv): the argument is
		// not reset and handed to another call while the error lives.
		m.recycleArg(argI)
	}
	if err == nil {
		err = err1
	}
	if replyI == nil || (err != nil && m.function) ||
		(e.Kind != codec.KindCall && (err == nil || p.s.ServerErrorFunc == nil)) {
		// rpcx sends no reply beside a function's error
		// (handleRequestForFunction), where it sends a method's; and a
		// cast's reply is only encoded for the ServerErrorFunc, which
		// rpcx shows it in the response of a failed oneway request too.
		m.recycleReply(replyI)
		return nil, how, err
	}
	data, encErr := fc.AppendResolved(dst, cd, replyI)
	m.recycleReply(replyI)
	if encErr != nil {
		p.metrics.errCodec.Inc(1)
		// The reply's encode error is the call's, also in place of the
		// method's own, as in rpcx's handleRequest.
		return nil, errHandled, encErr
	}
	return data, how, err
}

// callMethod calls the service method m, and turns its panic into the
// error rpcx's server makes of it (server/service.go, call): a
// *server.RpcServiceInternalError with the panic value, the method's name,
// the argument and the stack, logged at ERROR as rpcx logs it. The call
// then goes on as after the method's error: PostCall runs with it, and
// the reply goes back beside it.
func (p *Plugin) callMethod(ctx context.Context, m *method, arg, reply reflect.Value) (panicked bool, err error) {
	defer func() {
		if r := recover(); r != nil {
			p.metrics.errPanic.Inc(1)
			buf := make([]byte, 4096)
			buf = buf[:runtime.Stack(buf, false)]
			ie, _ := rpcxlayout.NewServiceInternalError(fmt.Sprintf("%v", r), m.panicName, arg.Interface(), string(buf))
			log.Error(ie)
			panicked, err = true, ie
		}
	}()
	return false, m.Call(ctx, arg, reply)
}

// auth applies the server's AuthFunc to one entry, as rpcx applies it to
// one plain request: with the entry's path, method and metadata and the
// token the caller put in its metadata.
func (p *Plugin) auth(ec *entryCtx, e *codec.Entry) error {
	if p.s.AuthFunc == nil {
		return nil
	}
	ctx := ec.shareContext()
	req := protocol.NewMessage()
	req.ServicePath, req.ServiceMethod, req.Metadata = e.ServicePath, e.ServiceMethod, ec.requestMetadata(e)
	req.SetSerializeType(protocol.SerializeType(e.SerializeType))
	req.SetSeq(entrySeq(e))
	if err := p.s.AuthFunc(ctx, req, e.Metadata[share.AuthKey]); err != nil {
		p.metrics.errAuth.Inc(1)
		return err
	}
	return nil
}

// runSend delivers one send entry to its handler, on the connection's send
// queue, so that the sends of a lane reach their handlers in order. Its
// read hooks have run; AuthFunc and PreHandleRequest run here, as for a
// oneway request.
func (p *Plugin) runSend(c *conn, ec *entryCtx, e *codec.Entry) {
	defer ec.end()
	ctx := ec.shareContext()
	// Recovered here, before auth: a panic must neither reach rpcx nor stop
	// the lane's delivery.
	defer func() {
		if r := recover(); r != nil {
			p.metrics.errPanic.Inc(1)
			log.Errorf("[handler internal error]: send handler %q panicked: %v, stacks: %s", e.ServicePath, r, debug.Stack())
		}
	}()
	if p.deadlinePassed(ec, e) {
		return
	}
	if err := p.auth(ec, e); err != nil {
		p.preWriteOneway(ec, err)
		return
	}
	p.preHandle(ec)
	fn := p.sendHandler(e.ServicePath)
	if fn == nil {
		p.metrics.errUnknownSend.Inc(1)
		return
	}
	fn(ctx, e.Payload)
}
