package batchclient

import (
	"context"
	"net"
	"sync"

	"github.com/smallnest/rpcx/share"
)

// resMetaKey is rpcx's response-metadata key as an interface value, made
// once (see reqMetaKey).
var resMetaKey any = share.ResMetaDataKey

// tagsLockKey is the key under which rpcx's share.NewContext stores the
// share.Context's lock, as an interface value made once.
var tagsLockKey any = share.ContextTagsLock

// copyResMetadata does with a completed call's response metadata what rpcx
// v1.9.4's Client.Call does: when ctx holds a map at share.ResMetaDataKey
// and the reply carried metadata, every key is copied into the map and
// share.ServerAddress is set to the server's address as the connection
// sees it (conn.RemoteAddr). The map is written under the share.Context's
// lock when ctx is one, as rpcx does, and also when ctx is derived from
// one (a timeout added, say), where rpcx writes it unlocked: a caller that
// guards the map with that lock is then not raced. A reply without
// metadata leaves the map alone. Off the common path, as copyMetadata.
//
//go:noinline
func copyResMetadata(ctx context.Context, res map[string]string, conn net.Conn) {
	if len(res) == 0 || conn == nil {
		return
	}
	m, ok := ctx.Value(resMetaKey).(map[string]string)
	if !ok || m == nil {
		return
	}
	// Looked up before locking: share.Context's Value takes the lock.
	if mu, ok := ctx.Value(tagsLockKey).(*sync.Mutex); ok {
		mu.Lock()
		defer mu.Unlock()
	}
	for k, v := range res {
		m[k] = v
	}
	m[share.ServerAddress] = conn.RemoteAddr().String()
}
