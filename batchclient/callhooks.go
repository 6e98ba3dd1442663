package batchclient

import (
	"bytes"
	"context"
	"errors"

	"github.com/smallnest/rpcx/client"
	rpcxcodec "github.com/smallnest/rpcx/codec"
	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/share"

	"github.com/rpcxbatch/rpcxbatch/batchclient/internal/lane"
	"github.com/rpcxbatch/rpcxbatch/internal/plainconn"
	"github.com/rpcxbatch/rpcxbatch/internal/resmeta"
)

// rpcx's per-message client plugin hooks on the drop-in XClient. rpcx's
// Client runs ClientBeforeEncode on each request message it is about to
// write (payload encoded, metadata from the context) and ClientAfterDecode
// on each response it read, before decoding the reply. The drop-in's
// RPCClient runs them per call, on lanes and on the plain fallback alike,
// with the XClient's own plugins, on a *protocol.Message built as rpcx
// builds it: type, oneway flag, serialize type, compress flag, service
// path and method, metadata and the encoded arguments (or, for the reply,
// the response metadata rpcx reads, with __rpcx_error__ and status Error
// for a server's error, and the payload the server sent: on lanes the
// reply's own bytes, on the plain fallback the reply value encoded
// again). Seq numbers the RPCClient's calls from 0, as rpcx's Client
// numbers its connection's requests: a response has its request's
// number, each request its own (entries have ids of their own on their
// lane, which the server's hooks see).
//
// What a ClientBeforeEncode plugin does to the request's metadata reaches
// the server (a tracing plugin's span context, say), and so does a payload
// it sets, as the call's arguments (payloadArgs). What a
// ClientAfterDecode plugin changes in the response has no effect: the
// reply is already decoded. The encoding costs only a client with such a
// plugin.

// callHooks reports which per-message hooks pc has.
func callHooks(pc client.PluginContainer) (before, after bool) {
	if pc == nil {
		return false, false
	}
	for _, p := range pc.All() {
		if _, ok := p.(client.ClientBeforeEncodePlugin); ok {
			before = true
		}
		if _, ok := p.(client.ClientAfterDecodePlugin); ok {
			after = true
		}
	}
	return before, after
}

// beforeEncode runs the ClientBeforeEncode plugins on the request rpcx
// would write for the call, and returns ctx with the request metadata the
// plugins left (it reaches the server), and the arguments to send: args,
// or, when a plugin changed the payload, a value the codec encodes as the
// plugin's payload (payloadArgs). As rpcx, the plugins do not run for
// arguments the codec cannot encode: the call fails with the codec's
// error.
func (r *rpcClient) beforeEncode(ctx context.Context, pc client.PluginContainer, seq uint64, servicePath, serviceMethod string, args any, oneway bool) (context.Context, any) {
	st := r.bc.opts.SerializeType
	cd, data, err := plainconn.Encode(st, args)
	if cd == nil || err != nil {
		return ctx, args
	}
	req := protocol.NewMessage()
	req.SetMessageType(protocol.Request)
	req.SetSeq(seq)
	req.SetOneway(oneway)
	req.SetSerializeType(st)
	if meta, ok := ctx.Value(share.ReqMetaDataKey).(map[string]string); ok && meta != nil {
		// A copy, as rpcx's Client.Go makes: the plugins' changes are
		// this request's, not the caller's map's.
		req.Metadata = make(map[string]string, len(meta))
		for k, v := range meta {
			req.Metadata[k] = v
		}
	}
	req.ServicePath, req.ServiceMethod = servicePath, serviceMethod
	if len(data) > 1024 && r.bc.opts.CompressType != protocol.None {
		req.SetCompressType(r.bc.opts.CompressType)
	}
	// A copy the plugins may write to: data may be args' own bytes
	// (rpcx's byte codec returns a []byte argument as it is).
	req.Payload = bytes.Clone(data)
	_ = pc.DoClientBeforeEncode(req)
	if !bytes.Equal(req.Payload, data) {
		args = payloadArgs(cd, req.Payload, args)
	}
	if req.Metadata == nil {
		return ctx, args
	}
	return context.WithValue(ctx, share.ReqMetaDataKey, req.Metadata), args
}

// payloadArgs returns arguments that the codec cd encodes as payload, a
// ClientBeforeEncode plugin's (plainconn.EncodedArgs, on a copy: the
// plugin's message is not the call's).
func payloadArgs(cd rpcxcodec.Codec, payload []byte, args any) any {
	return plainconn.EncodedArgs(cd, bytes.Clone(payload), args)
}

// afterDecode runs the ClientAfterDecode plugins on the response rpcx
// would have read for a completed call: only when one was read (a reply,
// or the server's error), as rpcx runs them on messages it reads. res is
// the response metadata the server sent; resp what a reply on a lane
// carried (its payload and compress flag), when it came on one.
func (r *rpcClient) afterDecode(pc client.PluginContainer, seq uint64, resp *lane.Response, servicePath, serviceMethod string, args, reply any, res map[string]string, err error) {
	st := r.bc.opts.SerializeType
	if resp.Read {
		afterDecodeFull(pc, seq, st, resp.Compress, servicePath, serviceMethod, res, resp.Payload, err)
		return
	}
	// The plain fallback's rpcx client decoded the response: its payload
	// is the reply value encoded again, which rpcx's server sends with an
	// error too when the caller's reply value was fresh.
	var payload []byte
	if cd := share.Codecs[st]; cd != nil && reply != nil {
		if data, encErr := cd.Encode(reply); encErr == nil {
			payload = data
		}
	}
	// The response's compress flag as rpcx's client reads it: its server
	// compresses a response above 1 KiB to a compressed request, which
	// its client compressed for arguments above 1 KiB.
	ct := protocol.None
	if c := r.bc.opts.CompressType; c != protocol.None && len(payload) > 1024 {
		if cd := share.Codecs[st]; cd != nil {
			if data, encErr := cd.Encode(args); encErr == nil && len(data) > 1024 {
				ct = c
			}
		}
	}
	afterDecodeFull(pc, seq, st, ct, servicePath, serviceMethod, res, payload, err)
}

// afterDecodeMessage runs the ClientAfterDecode plugins on the response
// of serialize type st with metadata res and payload, when one was read.
func afterDecodeMessage(pc client.PluginContainer, st protocol.SerializeType, servicePath, serviceMethod string, res map[string]string, payload []byte, err error) {
	afterDecodeFull(pc, 0, st, protocol.None, servicePath, serviceMethod, res, payload, err)
}

// afterDecodeFull is afterDecodeMessage for the response numbered seq,
// flagged compressed with ct. The server's error text is the one in res
// (under protocol.ServiceError, as rpcx's client reads it), not what
// client.ClientErrorFunc made of it; err's text where res has none.
func afterDecodeFull(pc client.PluginContainer, seq uint64, st protocol.SerializeType, ct protocol.CompressType, servicePath, serviceMethod string, res map[string]string, payload []byte, err error) {
	var se client.ServiceError
	if err != nil && !errors.As(err, &se) {
		return // nothing was read: a transport error or the context's
	}
	m := protocol.NewMessage()
	m.SetMessageType(protocol.Response)
	m.SetSeq(seq)
	m.SetSerializeType(st)
	m.SetCompressType(ct)
	m.ServicePath, m.ServiceMethod = servicePath, serviceMethod
	m.Metadata = make(map[string]string, len(res)+1)
	for k, v := range res {
		if k != share.ServerAddress {
			m.Metadata[k] = v
		}
	}
	if err != nil {
		m.SetMessageStatusType(protocol.Error)
		if _, ok := m.Metadata[protocol.ServiceError]; !ok {
			m.Metadata[protocol.ServiceError] = err.Error()
		}
	}
	m.Payload = payload
	_ = pc.DoClientAfterDecode(m)
}

// hookedCall is Call with the per-message hooks of pc.
func (r *rpcClient) hookedCall(ctx context.Context, pc client.PluginContainer, before, after bool, servicePath, serviceMethod string, args, reply any) error {
	seq := r.nextSeq()
	if before {
		ctx, args = r.beforeEncode(ctx, pc, seq, servicePath, serviceMethod, args, false)
	}
	if !after {
		return r.bc.Call(ctx, r.addr, servicePath, serviceMethod, args, reply)
	}
	// The response metadata the server sent, kept apart from the
	// caller's map (which may hold keys of earlier calls) and copied
	// there as rpcx would.
	res := map[string]string{}
	user, _ := ctx.Value(share.ResMetaDataKey).(map[string]string)
	var resp lane.Response
	err := r.bc.call(context.WithValue(ctx, share.ResMetaDataKey, res), r.addr, servicePath, serviceMethod, args, reply, false, &resp)
	r.afterDecode(pc, seq, &resp, servicePath, serviceMethod, args, reply, res, err)
	if user != nil && len(res) > 0 {
		copyResMetadataMap(ctx, user, res)
	}
	return err
}

// hookedGo is Go with the per-message hooks of pc: the call is made on a
// channel of its own, and a goroutine, which ends with the call (a call
// always completes: reply, error, or its context's end), runs the
// ClientAfterDecode plugins and then completes the caller's call.
func (r *rpcClient) hookedGo(ctx context.Context, pc client.PluginContainer, before, after bool, servicePath, serviceMethod string, args, reply any, done chan *client.Call) *client.Call {
	seq := r.nextSeq()
	// rpcx's call.Metadata is a copy of the caller's map, when there is
	// one, and its request's metadata is that map, which the plugins then
	// write into; without one the plugins write into the request's alone.
	_, callerMap := ctx.Value(share.ReqMetaDataKey).(map[string]string)
	if before {
		ctx, args = r.beforeEncode(ctx, pc, seq, servicePath, serviceMethod, args, false)
	}
	if !after {
		call := r.bc.Go(ctx, r.addr, servicePath, serviceMethod, args, reply, done)
		if !callerMap {
			call.Metadata = nil
		}
		return call
	}
	if done == nil {
		done = make(chan *client.Call, 10)
	} else if cap(done) == 0 {
		panic("rpcxbatch: Go: done channel is unbuffered")
	}
	outer := &client.Call{ServicePath: servicePath, ServiceMethod: serviceMethod, Args: args, Reply: reply, Done: done}
	if m, ok := ctx.Value(share.ReqMetaDataKey).(map[string]string); ok && callerMap {
		outer.Metadata = m
	}
	resp := new(lane.Response)
	inner := r.bc.goCall(ctx, r.addr, servicePath, serviceMethod, args, reply, make(chan *client.Call, 1), false, resp)
	go func() {
		c := <-inner.Done
		r.afterDecode(pc, seq, resp, servicePath, serviceMethod, args, reply, c.ResMetadata, c.Error)
		outer.Error, outer.ResMetadata = c.Error, c.ResMetadata
		plainconn.Deliver(outer)
	}()
	return outer
}

// nextSeq is the Seq of the RPCClient's next call's messages, counted
// from 0 as rpcx's Client counts its connection's requests.
func (r *rpcClient) nextSeq() uint64 { return r.hookSeq.Add(1) - 1 }

// copyResMetadataMap copies src into the caller's response metadata map
// dst, under the share.Context's lock as resmeta.Fill writes it.
func copyResMetadataMap(ctx context.Context, dst, src map[string]string) {
	if mu := resmeta.ShareLock(ctx); mu != nil {
		mu.Lock()
		defer mu.Unlock()
	}
	for k, v := range src {
		dst[k] = v
	}
}
