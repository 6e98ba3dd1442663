package batchclient

import (
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/smallnest/rpcx/client"

	"github.com/rpcxbatch/rpcxbatch/codec"
	"github.com/rpcxbatch/rpcxbatch/internal/follow"
)

// The discovery of a drop-in XClient: the user's, with tcp servers renamed
// into the XClient's network so that rpcx builds their clients with the
// batch builder.

// batchDiscovery wraps the user's discovery: tcp servers are renamed into
// this XClient's network so rpcx builds them with the batch builder, unless
// their registry metadata says rpcxbatch=0.
type batchDiscovery struct {
	inner   client.ServiceDiscovery
	network string

	// names maps the keys of the last rewrite (selectkeys.go).
	names atomic.Pointer[keyNames]
	// lanesOnly says every server of the last rewrite is served over
	// lanes, and there was at least one (the native call path's
	// condition).
	lanesOnly atomic.Bool
	// group is the XClient's Option.Group; choosable is the last
	// rewrite's keys as rpcx's random selector holds them: filtered by
	// state and group as rpcx filters its server list (the native path
	// chooses among them without rpcx's lock, see selectKey).
	group     string
	choosable atomic.Pointer[[]choice]

	// mu guards watchers, the channels forward sends to, and the
	// forwarding goroutine's innerCh, stop and done, which
	// WatchService sets on first use and stopForwarding clears.
	mu       sync.Mutex
	watchers []chan []*client.KVPair
	innerCh  chan []*client.KVPair
	stop     chan struct{}
	done     chan struct{}
}

func newBatchDiscovery(inner client.ServiceDiscovery, network, group string) *batchDiscovery {
	return &batchDiscovery{inner: inner, network: network, group: group}
}

func (d *batchDiscovery) rewrite(pairs []*client.KVPair) []*client.KVPair {
	out := make([]*client.KVPair, 0, len(pairs))
	lanesOnly := len(pairs) > 0
	for _, p := range pairs {
		network, hostport, found := strings.Cut(p.Key, "@")
		if !found {
			network, hostport = "tcp", p.Key
		}
		if network != "tcp" || advertisedPlain(p.Value) {
			out = append(out, p)
			lanesOnly = false
			continue
		}
		out = append(out, &client.KVPair{Key: d.network + "@" + hostport, Value: p.Value})
	}
	d.recordNames(pairs, out)
	d.lanesOnly.Store(lanesOnly)
	d.choosable.Store(choosableKeys(out, d.group))
	return out
}

// choice is a server the native path's random choice may pick
// (selectRandom): its key and, once a call through it found one, the
// RPCClient over lanes that the builder caches for it, so that the calls
// after it look nothing up while that client stays open (chosenClient).
type choice struct {
	key string
	rc  atomic.Pointer[rpcClient]
}

// choosableKeys is the keys of pairs rpcx's XClient keeps in its server
// list, as choices: each once, less those filterByStateAndGroup drops
// (state=inactive, or not in group when group is set).
func choosableKeys(pairs []*client.KVPair, group string) *[]choice {
	var keys []string
	seen := make(map[string]bool, len(pairs))
	for _, p := range pairs {
		if seen[p.Key] {
			continue
		}
		seen[p.Key] = true
		if v, err := url.ParseQuery(p.Value); err == nil {
			if v.Get("state") == "inactive" || group != "" && !slices.Contains(v["group"], group) {
				continue
			}
		}
		keys = append(keys, p.Key)
	}
	choices := make([]choice, len(keys))
	for i, k := range keys {
		choices[i].key = k
	}
	return &choices
}

func advertisedPlain(meta string) bool {
	v, err := url.ParseQuery(meta)
	return err == nil && v.Get(codec.MetaBatch) == "0"
}

func (d *batchDiscovery) GetServices() []*client.KVPair { return d.rewrite(d.inner.GetServices()) }

// WatchService returns a channel of rewritten server lists; the first call
// starts the goroutine that follows the inner discovery, which
// stopForwarding ends.
func (d *batchDiscovery) WatchService() chan []*client.KVPair {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stop == nil {
		in := d.inner.WatchService()
		if in == nil {
			return nil // a static discovery: nothing to follow
		}
		d.innerCh, d.stop, d.done = in, make(chan struct{}), make(chan struct{})
		go d.forward(in, d.stop, d.done)
	}
	ch := make(chan []*client.KVPair, 10)
	d.watchers = append(d.watchers, ch)
	return ch
}

func (d *batchDiscovery) forward(in chan []*client.KVPair, stop, done chan struct{}) {
	defer close(done)
	follow.Follow(in, d.inner.GetServices, func(pairs []*client.KVPair) {
		pairs = d.rewrite(pairs)
		d.mu.Lock()
		defer d.mu.Unlock()
		for _, w := range d.watchers {
			select {
			case w <- pairs:
			default:
				// A watcher 10 lists behind gets the current list with the
				// next one anyway.
			}
		}
	}, stop)
}

// RemoveWatcher stops sending to ch; rpcx closes ch itself afterwards.
func (d *batchDiscovery) RemoveWatcher(ch chan []*client.KVPair) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if i := slices.Index(d.watchers, ch); i >= 0 {
		d.watchers = slices.Delete(d.watchers, i, i+1)
	}
}

func (d *batchDiscovery) stopForwarding() {
	d.mu.Lock()
	stop, done, in := d.stop, d.done, d.innerCh
	d.stop, d.innerCh = nil, nil
	d.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
		d.inner.RemoveWatcher(in)
	}
}

// Clone clones the inner discovery for another service path.
func (d *batchDiscovery) Clone(servicePath string) (client.ServiceDiscovery, error) {
	in, err := d.inner.Clone(servicePath)
	if err != nil {
		return nil, err
	}
	return newBatchDiscovery(in, d.network, d.group), nil
}

func (d *batchDiscovery) SetFilter(f client.ServiceDiscoveryFilter) { d.inner.SetFilter(f) }

// Close closes the inner discovery, as rpcx's discoveries close theirs.
func (d *batchDiscovery) Close() {
	d.stopForwarding()
	d.inner.Close()
}
