package rpcxlayout

import (
	"reflect"
	"sync"

	"github.com/smallnest/rpcx/client"
)

// XClient is the part of an rpcx v1.9.4 XClient (client.NewXClient's
// *xClient) that the drop-in's own call path reads: the selector, and the
// mutex rpcx holds while it selects and while it changes the selector
// (SetSelector, and every server list from the discovery). Select must be
// called with Mu held, as rpcx calls it: its selectors (round robin, say)
// keep state of their own without a lock.
type XClient struct {
	Mu       *sync.RWMutex
	selector *client.Selector
}

// Selector returns the XClient's selector; Mu must be held. It is nil for
// SelectByUser until SetSelector sets one.
func (x XClient) Selector() client.Selector { return *x.selector }

// ReadXClient returns xc's selector and mutex; false when xc is not
// rpcx's *xClient, or its mu or selector field is not as in rpcx v1.9.4.
func ReadXClient(xc client.XClient) (XClient, bool) {
	v := reflect.ValueOf(xc)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct || v.Elem().Type() != xClientType() {
		return XClient{}, false
	}
	sv := v.Elem()
	mu, ok1 := field(sv, "mu")
	sel, ok2 := field(sv, "selector")
	if !ok1 || !ok2 || mu.Type() != reflect.TypeFor[sync.RWMutex]() || sel.Type() != reflect.TypeFor[client.Selector]() {
		return XClient{}, false
	}
	return XClient{Mu: mu.Addr().Interface().(*sync.RWMutex), selector: sel.Addr().Interface().(*client.Selector)}, true
}

// xClientType is the struct type behind client.NewXClient's XClient,
// found once, on first use, from an XClient made and closed for it (it
// dials nothing and starts nothing that outlives Close).
var xClientType = sync.OnceValue(func() reflect.Type {
	d, err := client.NewPeer2PeerDiscovery("tcp@127.0.0.1:1", "")
	if err != nil {
		return nil
	}
	xc := client.NewXClient("rpcxlayout", client.Failfast, client.RandomSelect, d, client.DefaultOption)
	defer xc.Close()
	return reflect.TypeOf(xc).Elem()
})
