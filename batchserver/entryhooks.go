package batchserver

import (
	"errors"
	"fmt"
	"runtime/debug"
	"sync/atomic"

	"github.com/smallnest/rpcx/log"
	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/server"

	"github.com/rpcxbatch/rpcxbatch/codec"
)

// This file runs rpcx's request hooks for one batched entry, at the points
// where rpcx v1.9.4 runs them for one plain request (server/server.go):
//
//	read hooks   PreReadRequest, PostReadRequest   conn delivery, in lane order
//	             AuthFunc                          entry's goroutine
//	handle hook  PreHandleRequest                  entry's goroutine
//	             PreCall, handler, PostCall        entry's goroutine
//	write hooks  PreWriteResponse, (reply queued), PostWriteResponse
//
// Each hook gets a *protocol.Message built for the entry (and, for the
// write hooks of a call, the response message rpcx would write), and the
// entry's own *share.Context, so a value a plugin sets in one hook is seen
// by the next and by the handler, as on a plain request.

// requestMessage builds the request message of e, as rpcx would have read
// it: the entry's sequence number (entrySeq), service path, method,
// metadata, serialize type and payload; casts and sends are oneway.
func requestMessage(ec *entryCtx, e *codec.Entry) *protocol.Message {
	req := protocol.NewMessage()
	req.SetMessageType(protocol.Request)
	req.SetSeq(entrySeq(e))
	req.SetOneway(e.Kind != codec.KindCall)
	req.SetSerializeType(protocol.SerializeType(e.SerializeType))
	req.SetCompressType(e.CompressType) // inflated already, as rpcx's request
	req.ServicePath, req.ServiceMethod = e.ServicePath, e.ServiceMethod
	req.Metadata, req.Payload = ec.requestMetadata(e), e.Payload
	return req
}

// onewaySeq counts the casts and sends that were given a sequence number
// (entrySeq).
var onewaySeq atomic.Uint64

// entrySeq is the sequence number of entry e in the messages its hooks
// get, as rpcx gives each request of a connection its own: a call's is
// its id on its lane, which its reply carries back; a cast or a send,
// which travel without one, is given the next of a count kept by the
// server, with the top bit set, and keeps it (in e.ID) for its later
// hooks. A call's id has that bit clear until its lane has made 2^35
// calls, so every entry of a lane has a number of its own.
func entrySeq(e *codec.Entry) uint64 {
	if e.ID == 0 && e.Kind != codec.KindCall {
		e.ID = 1<<63 | onewaySeq.Add(1)
	}
	return e.ID
}

// readEntry runs the read hooks for one entry, on the connection's
// delivery path (as rpcx runs them in its read loop, one request after the
// other). PreReadRequest, which rpcx runs before it knows what it will
// read, runs just before the entry's PostReadRequest. A rewrite of the
// message by a hook (AliasPlugin's new service path and method) applies to
// the entry. An error refuses the entry.
func (p *Plugin) readEntry(ec *entryCtx, e *codec.Entry, hs hookSet) (err error) {
	if hs == 0 {
		return nil
	}
	req := requestMessage(ec, e)
	ec.req, ec.hs = req, hs
	if hs&(hookPreRead|hookPostRead) == 0 {
		return nil
	}
	defer func() {
		if r := recover(); r != nil {
			p.metrics.errPanic.Inc(1)
			// At ERROR with the stack, as rpcx logs every panic it recovers.
			log.Errorf("rpcxbatch: a read-request plugin panicked on %s.%s: %v, stacks: %s", e.ServicePath, e.ServiceMethod, r, debug.Stack())
			err = &PanicError{Service: e.ServicePath, Method: e.ServiceMethod, Value: fmt.Sprint(r)}
		}
	}()
	ctx := ec.shareContext()
	inner := p.hooks.PluginContainer
	if err = inner.DoPreReadRequest(ctx); err == nil {
		err = inner.DoPostReadRequest(ctx, req, nil)
	}
	e.ServicePath, e.ServiceMethod, e.Payload = req.ServicePath, req.ServiceMethod, req.Payload
	e.SerializeType = uint8(req.SerializeType())
	if req.Metadata != nil {
		// AliasPlugin makes the map when the entry had none.
		e.Metadata = req.Metadata
		ec.reqMeta = req.Metadata
	}
	return err
}

// refuse answers an entry its read hooks refused, as rpcx answers a
// request refused by ErrReqReachLimit: a call gets an error reply (through
// the write hooks), a cast or send is dropped after PreWriteResponse with
// no response. The entry's place in the window is given back.
//
// As rpcx, a call's error text is made by the server's ServerErrorFunc
// (as for its ErrReqReachLimit response), and the server's
// HandleServiceError gets every refusal but ErrReqReachLimit (rpcx calls
// it, and closes the connection, for any other read error).
func (p *Plugin) refuse(c *conn, ec *entryCtx, e *codec.Entry, err error) {
	defer ec.end()
	p.metrics.errRefused.Inc(1)
	if e.Kind == codec.KindCall {
		p.reply(c, ec, e, nil, err, p.errorText(ec, e, nil, err))
	} else {
		p.preWriteOneway(ec, err)
		c.credit(ec.frame)
	}
	if h := p.s.HandleServiceError; h != nil && !errors.Is(err, server.ErrReqReachLimit) {
		h(err)
	}
}

// preHandle runs the PreHandleRequest hooks for the entry. rpcx v1.9.4
// ignores their error (processOneRequest drops it), and so does this: the
// entry runs on.
func (p *Plugin) preHandle(ec *entryCtx) {
	if ec.req == nil || ec.hooks()&hookPreHandle == 0 {
		return
	}
	// rpcx hands PreHandleRequest the request with its metadata map made,
	// the same map the handler sees as share.ReqMetaDataKey.
	ec.req.Metadata = ec.metadata(&ec.reqMeta)
	_ = p.hooks.PluginContainer.DoPreHandleRequest(ec.shareContext(), ec.req)
}

// preWriteOneway runs PreWriteResponse with no response, as rpcx does for
// a oneway request refused by a hook or by AuthFunc.
func (p *Plugin) preWriteOneway(ec *entryCtx, err error) {
	if ec.req == nil || ec.hooks()&hookPreWrite == 0 {
		return
	}
	defer p.recoverHook("PreWriteResponse", ec.req)
	_ = p.hooks.PluginContainer.DoPreWriteResponse(ec.shareContext(), ec.req, nil, err)
}

// reply queues a call's reply: payload (the encoded reply, or nil) and
// err, whose text the caller gets, with the response metadata the handler
// set. With write hooks, the reply goes out as rpcx would write the
// response message after PreWriteResponse (a hook may change its payload,
// metadata or status), and PostWriteResponse runs once the reply is handed
// to the connection's writer (as rpcx runs it with AsyncWrite: the reply
// shares one write with others); not for a response rpcx writes without
// them (entryCtx.direct).
func (p *Plugin) reply(c *conn, ec *entryCtx, e *codec.Entry, payload []byte, err error, text string) {
	// Compressed as rpcx compresses the response to a compressed request.
	rp := codec.Reply{ID: e.ID, Payload: payload, CompressType: e.CompressType}
	if resMeta := ec.responseMetadata(); len(resMeta) > 0 {
		rp.Metadata = resMeta
	}
	if err != nil {
		rp.Status, rp.Error = codec.StatusError, text
	}
	hs := ec.hooks()
	if ec.req == nil || ec.direct || hs&(hookPreWrite|hookPostWrite) == 0 {
		c.queueReply(rp, ec.frame)
		return
	}
	res := responseMessage(ec.req, &rp)
	ctx := ec.shareContext()
	if hs&hookPreWrite != 0 {
		func() {
			defer p.recoverHook("PreWriteResponse", ec.req)
			_ = p.hooks.PluginContainer.DoPreWriteResponse(ctx, ec.req, res, err)
		}()
		rp = replyOf(e.ID, res)
		rp.CompressType = e.CompressType
	}
	if hs&hookPostWrite != 0 && len(rp.Payload) > 0 {
		// The writer recycles the payload it wrote, and PostWriteResponse
		// may still read res.Payload: the writer gets a copy.
		rp.Payload = append(c.replyBufs.get(), rp.Payload...)
	}
	c.queueReply(rp, ec.frame)
	if hs&hookPostWrite != 0 {
		defer p.recoverHook("PostWriteResponse", ec.req)
		_ = p.hooks.PluginContainer.DoPostWriteResponse(ctx, ec.req, res, err)
	}
}

// responseMessage is the response rpcx would write for rp: req.Clone()
// made a response, the reply as payload, the response metadata, and for an
// error status Error with the text in protocol.ServiceError (handleError).
func responseMessage(req *protocol.Message, rp *codec.Reply) *protocol.Message {
	res := protocol.NewMessage()
	*res.Header = *req.Header
	// rpcx's sendResponse flags a response above its threshold to a
	// compressed request, before PreWriteResponse.
	res.SetCompressType(protocol.None)
	if len(rp.Payload) > codec.CompressThreshold {
		res.SetCompressType(req.CompressType())
	}
	res.SetMessageType(protocol.Response)
	res.ServicePath, res.ServiceMethod = req.ServicePath, req.ServiceMethod
	res.Payload = rp.Payload
	if len(rp.Metadata) > 0 {
		res.Metadata = rp.Metadata
	}
	if rp.Status == codec.StatusError {
		res.SetMessageStatusType(protocol.Error)
		meta := make(map[string]string, len(rp.Metadata)+1)
		for k, v := range rp.Metadata {
			meta[k] = v
		}
		meta[protocol.ServiceError] = rp.Error
		res.Metadata = meta
	}
	return res
}

// replyOf turns a response message back into the call's reply.
func replyOf(id uint64, res *protocol.Message) codec.Reply {
	rp := codec.Reply{ID: id, Payload: res.Payload}
	meta := res.Metadata
	if res.MessageStatusType() == protocol.Error {
		rp.Status, rp.Error = codec.StatusError, meta[protocol.ServiceError]
		if _, ok := meta[protocol.ServiceError]; ok {
			// The error travels in its own field.
			rest := make(map[string]string, len(meta))
			for k, v := range meta {
				if k != protocol.ServiceError {
					rest[k] = v
				}
			}
			meta = rest
		}
	}
	if len(meta) > 0 {
		rp.Metadata = meta
	}
	return rp
}

// recoverHook keeps a panicking write hook from taking the server down, as
// rpcx's recover around a plain request does.
func (p *Plugin) recoverHook(hook string, req *protocol.Message) {
	if r := recover(); r != nil {
		p.metrics.errPanic.Inc(1)
		log.Errorf("rpcxbatch: a %s plugin panicked on %s.%s: %v, stacks: %s", hook, req.ServicePath, req.ServiceMethod, r, debug.Stack())
	}
}
