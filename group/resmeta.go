package group

import (
	"context"
	"sync"

	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/share"

	"github.com/rpcxbatch/rpcxbatch/internal/resmeta"
)

// Response metadata. rpcx's caller puts a map at share.ResMetaDataKey in
// its context and the client fills it when the call returns (rpcx's
// Client.Call: every key of the reply's metadata, and share.ServerAddress,
// under the share.Context's lock when the context is one). rpcx's
// XClient.Broadcast and Fork hand that one map to every server's call at
// once, each under a lock of its own (or none), and Fork's losers go on
// writing it after Fork returned: a data race. A group operation gives
// each node call a map of its own and merges it into the caller's on the
// caller's goroutine, under the caller's share.Context lock (found also
// through a context derived from it), as the
// policy takes that node's answer (a reply or a rejection), in that
// order, so the node whose answer decided the operation is merged last.
// Answers that come after the operation returned are not merged: the
// operation is done with the caller's map when it returns.

// rpcx's metadata keys as interface values, made once: ResMetaDataKey and
// ReqMetaDataKey are variables, and converting one to the interface that
// Value and WithValue take allocates each time.
var (
	reqMetaKey any = share.ReqMetaDataKey
	resMetaKey any = share.ResMetaDataKey
)

// resSink is the caller's response-metadata map, if any, and the lock
// that guards it.
type resSink struct {
	m  map[string]string
	mu *sync.Mutex // the lock of the caller's share.Context, if any
}

// takeRes records the caller's response-metadata map; it must run on the
// caller's context as given, before the operation derives its own.
func (s *spec) takeRes(ctx context.Context) {
	m, ok := ctx.Value(resMetaKey).(map[string]string)
	if !ok || m == nil {
		return
	}
	s.res.m, s.res.mu = m, resmeta.ShareLock(ctx)
}

// resContext returns ctx with a response-metadata map of the node call's
// own, and the map: for every node when the caller asked for metadata,
// and always for the local node, whose handler expects one as an rpcx
// server gives every handler. Otherwise it returns ctx and nil.
func (s *spec) resContext(ctx context.Context, node string) (context.Context, map[string]string) {
	if s.res.m == nil && !s.g.isLocal(node) {
		return ctx, nil
	}
	md := make(map[string]string)
	return context.WithValue(ctx, resMetaKey, md), md
}

// mergeRes merges one node's response metadata into the caller's map, as
// rpcx's Client.Call does (a reply without metadata leaves the map alone):
// every key, and share.ServerAddress, which is the transport's word for
// the server's address when it gave one, and node otherwise.
func (s *spec) mergeRes(node string, md map[string]string) {
	if s.res.m == nil || len(md) == 0 {
		return
	}
	if s.res.mu != nil {
		s.res.mu.Lock()
		defer s.res.mu.Unlock()
	}
	for k, v := range md {
		s.res.m[k] = v
	}
	if _, ok := md[share.ServerAddress]; !ok {
		s.res.m[share.ServerAddress] = node
	}
}

// localResMeta completes the local node's response metadata as an rpcx
// server would: a rejection's error text under protocol.ServiceError.
func localResMeta(md map[string]string, err error) map[string]string {
	if err != nil && md != nil {
		md[protocol.ServiceError] = err.Error()
	}
	return md
}
