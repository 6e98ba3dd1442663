package batchclient

import (
	"context"
	"strings"
	"sync/atomic"

	"github.com/smallnest/rpcx/client"
)

// The servers' keys a user's selector sees. The drop-in points rpcx's
// XClient at its lanes by renaming each tcp server's key into a network of
// its own ("rpcxbatch<N>@host:port", see batchDiscovery), for which rpcx
// asks this package's builder for the connection. A Selector set with
// SetSelector, and the WrapSelect plugins, see the keys as the discovery
// gave them ("tcp@host:port"), as on plain rpcx: their servers map is
// renamed back, and the key they choose is renamed again on its way to
// rpcx, so that a server with the batch plugin chosen by its tcp key is
// still served over the lanes.

// keyNames maps the renamed keys of one server list to the discovery's
// and back; batchDiscovery.rewrite replaces it whole.
type keyNames struct {
	toUser  map[string]string // renamed key → discovery's key
	toBatch map[string]string // discovery's key (and "tcp@" form) → renamed
}

// userKey is the discovery's key for k, a key of rpcx's servers map.
func (d *batchDiscovery) userKey(k string) string {
	if n := d.names.Load(); n != nil {
		if u, ok := n.toUser[k]; ok {
			return u
		}
	}
	return k
}

// batchKey is rpcx's key for k, a key the discovery gave: the renamed
// one for a server the drop-in serves over lanes.
func (d *batchDiscovery) batchKey(k string) string {
	if n := d.names.Load(); n != nil {
		if b, ok := n.toBatch[k]; ok {
			return b
		}
	}
	return k
}

// recordNames keeps the names of one rewrite.
func (d *batchDiscovery) recordNames(in, out []*client.KVPair) {
	n := &keyNames{toUser: make(map[string]string, len(in)), toBatch: make(map[string]string, 2*len(in))}
	for i, p := range in {
		if out[i].Key == p.Key {
			continue
		}
		n.toUser[out[i].Key] = p.Key
		n.toBatch[p.Key] = out[i].Key
		if !strings.Contains(p.Key, "@") {
			n.toBatch["tcp@"+p.Key] = out[i].Key
		}
	}
	d.names.Store(n)
}

// userKeys is servers with the discovery's keys.
func (d *batchDiscovery) userKeys(servers map[string]string) map[string]string {
	out := make(map[string]string, len(servers))
	for k, v := range servers {
		out[d.userKey(k)] = v
	}
	return out
}

// userKeySelector is a user's Selector over the discovery's keys.
type userKeySelector struct {
	client.Selector
	d *batchDiscovery
}

// UpdateServer gives the selector the servers under the discovery's keys.
func (s userKeySelector) UpdateServer(servers map[string]string) {
	s.Selector.UpdateServer(s.d.userKeys(servers))
}

// SetSelector sets the user's selector; it sees the discovery's keys, and
// the key it returns is served as rpcx would serve it (over the lanes
// when the server has the batch plugin).
func (x *xClient) SetSelector(s client.Selector) {
	x.userSelector.Store(true)
	x.XClient.SetSelector(userKeySelector{Selector: s, d: x.disc})
}

// keyedPlugins is the container rpcx's XClient is given: the user's, with
// DoWrapSelect making the WrapSelect plugins see the discovery's keys.
type keyedPlugins struct {
	client.PluginContainer
	userSelector *atomic.Bool
	d            *batchDiscovery
}

func (k keyedPlugins) DoWrapSelect(fn client.SelectFunc) client.SelectFunc {
	if !k.userSelector.Load() && !hasSelectPlugins(k.PluginContainer) {
		// rpcx's own selector over rpcx's keys, and no plugin to see them.
		return k.PluginContainer.DoWrapSelect(fn)
	}
	d := k.d
	toUser := func(ctx context.Context, servicePath, serviceMethod string, args any) string {
		return d.userKey(fn(ctx, servicePath, serviceMethod, args))
	}
	wrapped := k.PluginContainer.DoWrapSelect(toUser)
	return func(ctx context.Context, servicePath, serviceMethod string, args any) string {
		return d.batchKey(wrapped(ctx, servicePath, serviceMethod, args))
	}
}

// hasSelectPlugins reports whether pc has a WrapSelect plugin of the
// user's (skipDraining, the drop-in's own, takes either key).
func hasSelectPlugins(pc client.PluginContainer) bool {
	for _, p := range pc.All() {
		if _, ok := p.(client.SelectNodePlugin); ok {
			if _, own := p.(skipDraining); !own {
				return true
			}
		}
	}
	return false
}

// GetPlugins returns the XClient's plugin container, as given to
// SetPlugins (or rpcx's own).
func (x *xClient) GetPlugins() client.PluginContainer { return x.userPlugins }

// Inform is rpcx's Inform, each receipt's Address given as the discovery
// gave the server's key, as on plain rpcx.
func (x *xClient) Inform(ctx context.Context, serviceMethod string, args, reply any) ([]client.Receipt, error) {
	receipts, err := x.XClient.Inform(ctx, serviceMethod, args, reply)
	for i := range receipts {
		receipts[i].Address = x.disc.userKey(receipts[i].Address)
	}
	return receipts, err
}
