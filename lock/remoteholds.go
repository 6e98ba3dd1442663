package lock

import "slices"

// remoteHolds is what a holder holds on one other node.
type remoteHolds struct {
	node string // the node's address
	keys keySet
	sent uint64 // the last request sent there
	// ok is the last request there that succeeded: every request sent
	// there after it failed (AcquireArgs.LastOK).
	ok uint64
	// released lists the keys released there since the last request.
	released []string
	// box holds the releases not sent yet (nil: none made so far): the
	// next request there carries released and empties it.
	box *relBox

	// Storage for the above, made with remoteHolds in one allocation
	// rather than five (a holder's first request to a node): released's
	// and a box's first key, and the box itself (box points at it once
	// made). A holder's first call's arguments come with them (call).
	released0 [1]string
	boxMem    relBox
	call      acquireCall

	// lease is this node's lease on node (lease.go), and epoch the
	// lease's epoch when the request in progress there was granted.
	lease *lease
	epoch uint64
	// token is the fencing token of the holder's last request granted
	// there (Holder.Token).
	token uint64
}

// newRemoteHolds returns what a holder holds on node nd, nothing yet.
func newRemoteHolds(nd string) *remoteHolds {
	rh := &remoteHolds{node: nd}
	rh.released = rh.released0[:0]
	return rh
}

// makeBox returns rh's box, made on first use for holder owner.
func (rh *remoteHolds) makeBox(owner OwnerID) *relBox {
	if rh.box == nil {
		rh.box = &rh.boxMem
		rh.box.init(owner)
	}
	return rh.box
}

// remoteOf returns what h holds on node nd (nil: it never asked nd). A
// holder asks a few nodes: a list, searched, costs less than a map. h.mu
// is held.
func (h *Holder) remoteOf(nd string) *remoteHolds {
	for _, rh := range h.remote {
		if rh.node == nd {
			return rh
		}
	}
	return nil
}

// carried empties the box: a request carrying released is about to go.
// If it fails before it applied them, LockOn puts them back (resend).
func (rh *remoteHolds) carried() {
	if rh.box != nil {
		rh.box.carried()
	}
}

// setWaitingOn records the other nodes o's request seq, in progress,
// waits on. They are copied (into a buffer of o's own for up to two), so
// that the caller's list does not escape.
func (o *owner) setWaitingOn(nodes []string, seq uint64) {
	o.mu.Lock()
	clear(o.waitingOn)
	if len(nodes) <= len(o.waitBuf) {
		o.waitingOn = append(o.waitBuf[:0], nodes...)
	} else {
		o.waitingOn = slices.Clone(nodes)
	}
	o.waitSeq = seq
	o.mu.Unlock()
}

// whereWaits returns the other nodes o's request in progress waits on (a
// copy, since the list is the caller's own while its request runs) and
// that request's seq.
func (o *owner) whereWaits() ([]string, uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.waitingOn), o.waitSeq
}

// holdsAnywhere reports whether h holds anything on any node. h.mu is held.
func (h *Holder) holdsAnywhere() bool {
	return h.o.holdsAny() || h.holdsRemote()
}

// holdsRemote reports whether h holds anything on another node. h.mu is
// held.
func (h *Holder) holdsRemote() bool {
	for _, rh := range h.remote {
		if rh.keys.len() > 0 {
			return true
		}
	}
	return false
}
