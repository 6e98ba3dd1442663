package plugin

import (
	"net/url"
	"strconv"

	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/codec"
)

// RegisterPlugin is the part of an rpcx register plugin the wrapper drives:
// rpcx's server.RegisterPlugin.
type RegisterPlugin interface {
	Register(name string, rcvr any, metadata string) error
	Unregister(name string) error
}

// functionRegisterer is rpcx's server.RegisterFunctionPlugin.
type functionRegisterer interface {
	RegisterFunction(serviceName, fname string, fn any, metadata string) error
}

// Advertiser is a register plugin that adds rpcxbatch's metadata to every
// service before handing it to the wrapped plugin. Add the Advertiser to the
// server's plugins instead of the wrapped plugin, and start and stop the
// wrapped plugin as usual:
//
//	r := &etcd.EtcdV3RegisterPlugin{...}
//	r.Start()
//	s.Plugins.Add(plugin.Advertise(r, batchPlugin))
//
// rpcxbatch's drop-in XClient reads the metadata: a server with rpcxbatch=1
// gets lanes, one with rpcxbatch=0 gets plain rpcx without a handshake.
type Advertiser struct {
	inner RegisterPlugin
	extra url.Values
}

// Advertise wraps inner. p is the server's batch plugin; nil, or a plugin
// created with batchserver.WithPoolSize(batchserver.Disabled), advertises
// the server as plain.
func Advertise(inner RegisterPlugin, p *batchserver.Plugin) *Advertiser {
	v := url.Values{}
	if p == nil || p.Options().PoolSize == batchserver.Disabled {
		v.Set(codec.MetaBatch, "0")
	} else {
		v.Set(codec.MetaBatch, "1")
		v.Set(codec.MetaPoolSize, strconv.Itoa(p.Options().PoolSize))
	}
	return &Advertiser{inner: inner, extra: v}
}

// Metadata returns metadata with the batch keys added (replacing any
// already there), in rpcx's URL-query metadata format.
func (a *Advertiser) Metadata(metadata string) string {
	v, err := url.ParseQuery(metadata)
	if err != nil {
		// Not a query string: append ours so both survive.
		if metadata == "" {
			return a.extra.Encode()
		}
		return metadata + "&" + a.extra.Encode()
	}
	for k, vals := range a.extra {
		v[k] = vals
	}
	return v.Encode()
}

// Register publishes the service through the wrapped plugin with the batch
// metadata added.
func (a *Advertiser) Register(name string, rcvr any, metadata string) error {
	return a.inner.Register(name, rcvr, a.Metadata(metadata))
}

// Unregister removes the service through the wrapped plugin.
func (a *Advertiser) Unregister(name string) error { return a.inner.Unregister(name) }

// RegisterFunction publishes a function service, when the wrapped plugin
// publishes those.
func (a *Advertiser) RegisterFunction(serviceName, fname string, fn any, metadata string) error {
	if f, ok := a.inner.(functionRegisterer); ok {
		return f.RegisterFunction(serviceName, fname, fn, a.Metadata(metadata))
	}
	return nil
}

// Unwrap returns the wrapped plugin.
func (a *Advertiser) Unwrap() RegisterPlugin { return a.inner }
