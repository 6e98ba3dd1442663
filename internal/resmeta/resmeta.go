package resmeta

import (
	"context"
	"net"
	"sync"

	"github.com/smallnest/rpcx/share"
)

// rpcx's keys as interface values, made once: share.ResMetaDataKey is a
// variable, and converting it to the interface that Value takes allocates
// each time.
var (
	resMetaKey  any = share.ResMetaDataKey
	tagsLockKey any = share.ContextTagsLock
)

// Fill does with a completed call's response metadata res what rpcx
// v1.9.4's Client.Call does: when ctx holds a map at share.ResMetaDataKey
// and the reply carried metadata, every key is copied into the map and
// share.ServerAddress is set to the server's address as the connection
// sees it (conn.RemoteAddr). The map is written under the share.Context's
// lock when ctx is one, as rpcx does, and also when ctx is derived from
// one (a timeout added, say), where rpcx writes it unlocked: a caller that
// guards the map with that lock is then not raced. A reply without
// metadata, or no connection, leaves the map alone. It is kept out of line
// so that its callers on the common path stay small.
//
//go:noinline
func Fill(ctx context.Context, res map[string]string, conn net.Conn) {
	if len(res) == 0 || conn == nil {
		return
	}
	m, ok := ctx.Value(resMetaKey).(map[string]string)
	if !ok || m == nil {
		return
	}
	// Looked up before locking: share.Context's Value takes the lock.
	if mu := ShareLock(ctx); mu != nil {
		mu.Lock()
		defer mu.Unlock()
	}
	for k, v := range res {
		m[k] = v
	}
	m[share.ServerAddress] = conn.RemoteAddr().String()
}

// ShareLock returns the lock of the rpcx share.Context ctx is or derives
// from (share.NewContext stores it under share.ContextTagsLock), or nil.
// rpcx's Client.Call locks only a ctx that is the share.Context itself and
// writes the map unlocked through a derived one, racing a caller that
// guards the map with the lock. It must not be called with the lock held:
// share.Context's Value takes it.
func ShareLock(ctx context.Context) *sync.Mutex {
	mu, _ := ctx.Value(tagsLockKey).(*sync.Mutex)
	return mu
}
