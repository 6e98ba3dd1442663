package batchserver

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/share"

	"github.com/rpcxbatch/rpcxbatch/codec"
	"github.com/rpcxbatch/rpcxbatch/internal/fastcodec"
)

// rpcx's metadata keys as interface values, made once: converting the
// string-typed keys on every entry allocates.
var (
	reqMetaKey any = share.ReqMetaDataKey
	resMetaKey any = share.ResMetaDataKey
)

// entryContext builds the context a handler sees, as rpcx builds it for a
// plain request: the connection, the request and response metadata, and the
// caller's deadline, counted from when the entry's frame arrived. The entry
// must be ended (end) when it is done.
func entryContext(c *conn, e *codec.Entry, arrived time.Time) *entryCtx {
	var deadline time.Time
	if e.TimeoutMicros > 0 {
		deadline = arrived.Add(time.Duration(e.TimeoutMicros) * time.Microsecond)
	}
	return newEntryCtx(c.c, arrived, e.Metadata, e.TimeoutMicros > 0, deadline)
}

// runCall runs one call or cast entry the way rpcx runs a request: auth,
// lookup, decode, PreCall plugins, the method, PostCall plugins, encode. A
// call's outcome goes back as a reply; a cast's is only counted.
func (p *Plugin) runCall(c *conn, e *codec.Entry, arrived time.Time, fc *fastcodec.Codec) {
	ec := entryContext(c, e, arrived)
	defer ec.end()
	var dst []byte
	if e.Kind == codec.KindCall {
		dst = c.replyBufs.get()
	}
	payload, err := p.guarded(ec.shareContext(), e, dst, fc)
	if e.Kind != codec.KindCall {
		return
	}
	rp := codec.Reply{ID: e.ID, Payload: payload}
	if resMeta := ec.responseMetadata(); len(resMeta) > 0 {
		rp.Metadata = resMeta
	}
	if err != nil {
		rp.Status, rp.Error = codec.StatusError, err.Error()
	}
	c.queueReply(rp)
}

// guarded runs execute and turns a panic anywhere in it (AuthFunc, a
// PreCall or PostCall plugin, a codec's Unmarshal on untrusted bytes, the
// handler) into this entry's error, as rpcx recovers a plain request: the
// entry fails, the server goes on.
//
// A call's reply is encoded by appending to dst. fc is the running
// goroutine's codec.
func (p *Plugin) guarded(ctx *share.Context, e *codec.Entry, dst []byte, fc *fastcodec.Codec) (payload []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			p.metrics.errPanic.Inc(1)
			logf("rpcxbatch: %s.%s panicked: %v", e.ServicePath, e.ServiceMethod, r)
			payload, err = nil, &PanicError{Service: e.ServicePath, Method: e.ServiceMethod, Value: fmt.Sprint(r)}
		}
	}()
	return p.execute(ctx, e, dst, fc)
}

// deadlinePassed reports, and counts, an entry whose caller had no time
// left when its frame was written. (An entry starts as soon as its frame
// is read, so the deadline, set from the time it arrived, cannot have
// passed since.)
func (p *Plugin) deadlinePassed(e *codec.Entry) bool {
	if e.TimeoutMicros < 0 {
		p.metrics.errDeadline.Inc(1)
		return true
	}
	return false
}

func (p *Plugin) execute(ctx *share.Context, e *codec.Entry, dst []byte, fc *fastcodec.Codec) (payload []byte, err error) {
	if p.deadlinePassed(e) {
		return nil, ErrDeadlinePassed
	}
	if err := p.auth(ctx, e); err != nil {
		return nil, err
	}
	m, found := p.services.lookup(e.ServicePath, e.ServiceMethod)
	if m == nil {
		p.metrics.errUnknown.Inc(1)
		// The same texts rpcx gives, so callers see one error on both paths.
		if !found {
			return nil, errors.New("rpcx: can't find service " + e.ServicePath)
		}
		return nil, errors.New("rpcx: can't find method " + e.ServiceMethod)
	}
	st := protocol.SerializeType(e.SerializeType)
	if share.Codecs[st] == nil {
		p.metrics.errCodec.Inc(1)
		return nil, fmt.Errorf("can not find codec for %d", e.SerializeType) // rpcx's text
	}
	argPtr, arg := m.newArg()
	if err := fc.Decode(st, e.Payload, argPtr); err != nil {
		p.metrics.errCodec.Inc(1)
		m.recycleArg(argPtr)
		return nil, err
	}
	argI, err := p.s.Plugins.DoPreCall(ctx, e.ServicePath, e.ServiceMethod, argPtr)
	if err != nil {
		return nil, err
	}
	if argI != argPtr {
		// A PreCall plugin replaced the argument.
		arg = reflect.ValueOf(argI)
		if m.argType.Kind() != reflect.Pointer {
			arg = arg.Elem()
		}
	}
	reply := m.newReply()
	err = m.invoke(ctx, arg, reply)
	replyI, err1 := p.s.Plugins.DoPostCall(ctx, e.ServicePath, e.ServiceMethod, argI, reply.Interface(), err)
	m.recycleArg(argI)
	if err == nil {
		err = err1
	}
	if e.Kind != codec.KindCall || replyI == nil {
		m.recycleReply(replyI)
		return nil, err
	}
	data, encErr := fc.Append(dst, st, replyI)
	m.recycleReply(replyI)
	if encErr != nil {
		p.metrics.errCodec.Inc(1)
		if err == nil {
			err = encErr
		}
		return nil, err
	}
	return data, err
}

// PanicError is the error a call gets when its handler panicked. The client
// receives its text.
type PanicError struct {
	Service, Method string
	// Value is the panic value, formatted with fmt.Sprint.
	Value string
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("rpcxbatch: handler %s.%s panicked: %s", e.Service, e.Method, e.Value)
}

// auth applies the server's AuthFunc to one entry, as rpcx applies it to
// one plain request: with the entry's path, method and metadata and the
// token the caller put in its metadata.
func (p *Plugin) auth(ctx context.Context, e *codec.Entry) error {
	if p.s.AuthFunc == nil {
		return nil
	}
	req := protocol.NewMessage()
	req.ServicePath, req.ServiceMethod, req.Metadata = e.ServicePath, e.ServiceMethod, e.Metadata
	req.SetSerializeType(protocol.SerializeType(e.SerializeType))
	if err := p.s.AuthFunc(ctx, req, e.Metadata[share.AuthKey]); err != nil {
		p.metrics.errAuth.Inc(1)
		return err
	}
	return nil
}

// runSend delivers one send entry to its handler, inline, so that the
// entries of a lane reach their handlers in order.
func (p *Plugin) runSend(c *conn, e *codec.Entry, arrived time.Time) {
	fn := p.sendHandler(e.ServicePath)
	if fn == nil {
		p.metrics.errUnknownSend.Inc(1)
		return
	}
	ec := entryContext(c, e, arrived)
	defer ec.end()
	ctx := ec.shareContext()
	// Recovered here, before auth: a panic must neither reach rpcx nor stop
	// the lane's delivery.
	defer func() {
		if r := recover(); r != nil {
			p.metrics.errPanic.Inc(1)
			logf("rpcxbatch: send handler %q panicked: %v", e.ServicePath, r)
		}
	}()
	if p.deadlinePassed(e) {
		return
	}
	if err := p.auth(ctx, e); err != nil {
		return
	}
	fn(ctx, e.Payload)
}
