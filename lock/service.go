package lock

import (
	"context"
	"errors"
)

// Service is the rpcx service a node registers under ServicePath. Its
// methods are called by other nodes, never by applications.
type Service struct {
	n *Node
}

// proxyFor returns the proxy of a's holder, making it on first use.
func (n *Node) proxyFor(id OwnerID, age int64, origin string, inc uint64) (*owner, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil, ErrClosed
	}
	o := n.proxies[id]
	if o == nil {
		o = newOwner(id, age, origin)
		o.originInc = inc
		o.pending = make(map[uint64]pendingReq)
		n.proxies[id] = o
	} else if o.origin == "" && origin != "" {
		// Made by a message that does not name the holder's node (an
		// Abort that overtook the holder's first request).
		o.mu.Lock()
		o.origin, o.originInc, o.age = origin, inc, age
		o.mu.Unlock()
	}
	return o, nil
}

// forgetIfDone deletes a dropped proxy once the last request its holder
// sent has arrived, so that a late request cannot make it anew.
func (n *Node) forgetIfDone(o *owner) {
	o.mu.Lock()
	done := o.closed && o.maxSeq >= o.aborted
	o.mu.Unlock()
	if done {
		n.mu.Lock()
		if n.proxies[o.id] == o {
			delete(n.proxies, o.id)
		}
		n.mu.Unlock()
	}
}

// Acquire takes keys for a holder of another node and answers when they
// are all held or the request failed (then it holds none of them).
func (s *Service) Acquire(ctx context.Context, a *AcquireArgs, r *AcquireReply) error {
	n := s.n
	if err := checkRequest(a.Mode, a.Keys); err != nil {
		r.set(err)
		return nil
	}
	if err := ctx.Err(); err != nil {
		// Its caller gave up already (this node was frozen, say): a grant
		// now would be held by nobody.
		r.set(err)
		return nil
	}
	o, err := n.proxyFor(a.Owner, a.Age, a.Origin, a.OriginInc)
	if err != nil {
		r.set(err)
		return nil
	}
	n.notePeer(a.Origin)
	o.mu.Lock()
	if a.Seq > o.maxSeq {
		o.maxSeq = a.Seq
	}
	if o.closed || a.Seq <= o.aborted {
		o.mu.Unlock()
		n.forgetIfDone(o)
		r.set(ErrAborted)
		return nil
	}
	// A holder makes one request at a time: the earlier ones are over for
	// it, so any still here are withdrawn, and what failed ones took is
	// given back, before this one starts.
	var earlier []chan struct{}
	for seq, p := range o.pending {
		if seq < a.Seq {
			p.cancel()
			earlier = append(earlier, p.done)
		}
	}
	if a.Seq-1 > o.aborted {
		o.aborted = a.Seq - 1
	}
	// Registered under the same lock as the checks above, so that a later
	// request always finds this one and waits for it.
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	defer close(done)
	o.pending[a.Seq] = pendingReq{cancel: cancel, done: done}
	o.mu.Unlock()
	for _, d := range earlier {
		<-d
	}
	o.releaseFailed(n.table, a.LastOK, a.Seq)
	for _, k := range a.Released {
		o.release(n.table, k, a.Seq-1)
	}

	err = o.take(rctx, n, a.Keys, a.Mode, a.Seq, a.Holds)

	o.mu.Lock()
	delete(o.pending, a.Seq)
	aborted := a.Seq <= o.aborted
	o.mu.Unlock()
	cancel()
	if err == nil && ctx.Err() != nil {
		// Granted after its caller's deadline: nobody takes the grant.
		o.releaseGrant(n.table, a.Seq)
		err = ctx.Err()
	}
	if aborted {
		// Withdrawn while it waited, or just after its grant.
		o.releaseGrant(n.table, a.Seq)
		err = ErrAborted
	} else if errors.Is(err, context.Canceled) && ctx.Err() == nil {
		err = ErrAborted
	}
	r.set(err)
	return nil
}

// Release gives back keys of a holder of another node.
func (s *Service) Release(ctx context.Context, a *ReleaseArgs, _ *Ack) error {
	n := s.n
	n.mu.Lock()
	o := n.proxies[a.Owner]
	n.mu.Unlock()
	if o == nil {
		return nil
	}
	if a.All {
		o.mu.Lock()
		keys := make([]string, 0, len(o.held))
		for k := range o.held {
			keys = append(keys, k)
		}
		o.mu.Unlock()
		a.Keys = keys
	}
	for _, k := range a.Keys {
		o.release(n.table, k, a.Seq)
	}
	return nil
}

// Abort withdraws a holder's requests up to a.Seq (see AbortArgs).
func (s *Service) Abort(ctx context.Context, a *AbortArgs, _ *Ack) error {
	n := s.n
	o, err := n.proxyFor(a.Owner, 0, "", 0)
	if err != nil {
		return nil
	}
	o.mu.Lock()
	if a.Seq > o.aborted {
		o.aborted = a.Seq
	}
	for seq, p := range o.pending {
		if seq <= a.Seq {
			p.cancel()
		}
	}
	o.mu.Unlock()
	o.releaseGrant(n.table, a.Seq)
	return nil
}

// Drop ends a holder of another node here: everything it holds is
// released and its late requests are refused.
func (s *Service) Drop(ctx context.Context, a *DropArgs, _ *Ack) error {
	n := s.n
	o, err := n.proxyFor(a.Owner, 0, "", 0)
	if err != nil {
		return nil
	}
	o.mu.Lock()
	if a.LastSeq > o.aborted {
		o.aborted = a.LastSeq
	}
	o.mu.Unlock()
	o.drop(n.table)
	n.forgetIfDone(o)
	return nil
}
