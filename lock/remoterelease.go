package lock

import (
	"time"
)

// Releases, aborts and drops of what a holder holds on other nodes: they
// leave through the node's outbox (outbox.go), merged per holder and node
// (relbox.go).

// releaseRemote gives back keys (all when keys is nil) on the other nodes,
// after the node's ReleaseLinger when linger is set. h.mu is held.
func (h *Holder) releaseRemote(keys []string, linger bool) {
	for _, rh := range h.remote {
		nd := rh.node
		if keys == nil {
			if rh.keys.len() == 0 {
				continue
			}
			for k := range rh.keys.all() {
				rh.released = append(rh.released, k)
			}
			h.viewMu.Lock()
			rh.keys.clear()
			h.viewMu.Unlock()
			h.sendRelease(nd, rh, nil, true, h.seq, linger)
			continue
		}
		from := len(rh.released)
		h.viewMu.Lock()
		for _, k := range keys {
			if rh.keys.has(k) {
				rh.keys.del(k)
				rh.released = append(rh.released, k)
			}
		}
		h.viewMu.Unlock()
		mine := rh.released[from:]
		if len(mine) == 0 {
			continue
		}
		h.sendRelease(nd, rh, mine, false, h.seq, linger)
	}
}

// sendRelease puts keys (all: every key held there) released at seq in
// rh's box for nd, and queues the box unless it waits in the queue
// already; with linger, the box goes after the node's ReleaseLinger
// unless the holder's next request there carries it first. h.mu is held.
func (h *Holder) sendRelease(nd string, rh *remoteHolds, keys []string, all bool, seq uint64, linger bool) {
	rh.makeBox(h.o.id)
	var until time.Time
	if d := h.n.cfg.ReleaseLinger; linger && d > 0 {
		until = time.Now().Add(d)
	}
	queue, wake := rh.box.add(keys, all, seq, until)
	switch {
	case queue:
		h.n.sendMsg(nd, &rh.box.entry, !until.IsZero())
	case wake:
		h.n.wakeFor(nd)
	}
}

// resend sends again, at once, the releases that request seq to nd
// carried: it failed, and may have been refused before it applied them.
// h.mu is held.
func (h *Holder) resend(nd string, seq uint64) {
	rh := h.remoteOf(nd)
	if rh == nil || len(rh.released) == 0 {
		return
	}
	// Seq before the failed request: a key that request took again is
	// given back by the Abort, not by this.
	h.sendRelease(nd, rh, rh.released, false, seq-1, false)
}

// abortRemote withdraws the failed request seq on nd, in the holder's
// box for nd: one Abort there for the requests that failed since the last
// one that succeeded. h.mu is held.
func (h *Holder) abortRemote(nd string, seq uint64) {
	rh := h.remoteOf(nd)
	rh.makeBox(h.o.id)
	queue, wake, apart := rh.box.addAbort(rh.ok, seq)
	if apart != nil {
		h.n.sendMsg(nd, apart, false)
	}
	switch {
	case queue:
		h.n.sendMsg(nd, &rh.box.entry, false)
	case wake:
		h.n.wakeFor(nd)
	}
}

// dropRemote ends the holder on every other node it ever asked. h.mu is
// held.
func (h *Holder) dropRemote() {
	for _, rh := range h.remote {
		nd := rh.node
		// The Drop releases everything there and withdraws every
		// request.
		if rh.box != nil {
			rh.box.dropped()
		}
		h.n.send(nd, "Drop", &DropArgs{Owner: h.o.id, LastSeq: rh.sent})
	}
	h.viewMu.Lock()
	h.remote = nil
	h.viewMu.Unlock()
}
