package follow

import (
	"time"

	"github.com/smallnest/rpcx/client"
)

// Settle is how long after the last announcement Follow reads the
// discovery's current list once more.
const Settle = 200 * time.Millisecond

// Follow calls apply with each list the discovery announces on in, and
// once more with its current list (current) when announcements have
// paused for Settle. Discoveries differ in ways a view must survive:
// rpcx-etcd sends every announcement from a goroutine of its own, so two
// quick lists can arrive out of order, and MultipleServersDiscovery
// announces a list before it stores it. Follow returns when in is closed
// or stop is.
func Follow(in <-chan []*client.KVPair, current func() []*client.KVPair, apply func([]*client.KVPair), stop <-chan struct{}) {
	settle := time.NewTimer(Settle)
	settle.Stop()
	defer settle.Stop()
	for {
		select {
		case pairs, ok := <-in:
			if !ok {
				return
			}
			apply(pairs)
			settle.Reset(Settle)
		case <-settle.C:
			apply(current())
		case <-stop:
			return
		}
	}
}
