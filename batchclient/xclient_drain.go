package batchclient

import (
	"context"
	"strings"

	"github.com/smallnest/rpcx/client"
)

// maxRedraws bounds how often skipDraining asks the selector again.
const maxRedraws = 8

// skipDraining is the rpcx client plugin (its WrapSelect hook) that keeps
// a drop-in XClient's selection off servers that have begun a graceful
// shutdown, until the client has connected to them again: as rpcx's
// registries take such a server out of the list (state=inactive), but at
// once. Without it a caller of Failover could draw the draining server at
// every one of its tries (each refused at once with ErrDraining) and fail,
// where plain rpcx's callers wait on the old connection until the server
// closes it and then try once more. A selector that keeps choosing the
// same server (ConsistentHash) still gets it after maxRedraws, and the
// call fails over as from any server that is down.
type skipDraining struct{ bc *Client }

// WrapSelect asks the selector again while it chooses a draining server.
func (s skipDraining) WrapSelect(next client.SelectFunc) client.SelectFunc {
	return func(ctx context.Context, servicePath, serviceMethod string, args any) string {
		k := next(ctx, servicePath, serviceMethod, args)
		for i := 0; i < maxRedraws && s.draining(k); i++ {
			k = next(ctx, servicePath, serviceMethod, args)
		}
		return k
	}
}

// draining reports whether the server of selector key k ("network@addr")
// is shutting down.
func (s skipDraining) draining(k string) bool {
	if s.bc.drains.n.Load() == 0 {
		return false
	}
	_, addr, _ := strings.Cut(k, "@")
	return s.bc.drains.has(addr)
}

// SetPlugins sets the XClient's plugins, adding the one that keeps the
// selection off servers that are shutting down (to plugins itself).
func (x *xClient) SetPlugins(plugins client.PluginContainer) {
	x.userPlugins = plugins
	if plugins == nil {
		x.XClient.SetPlugins(nil)
		return
	}
	plugins.Add(skipDraining{x.bc})
	// The user's plugins see the discovery's keys (selectkeys.go).
	x.XClient.SetPlugins(keyedPlugins{PluginContainer: plugins, userSelector: &x.userSelector, d: x.disc})
}
