package lock

import (
	"context"
)

// Service is the rpcx service a node registers under ServicePath. Its
// methods are called by other nodes, never by applications.
type Service struct {
	n *Node
}

// proxyFor returns the proxy of a's holder for its request seq, making
// it on first use. A holder with a tombstone here is refused (ErrAborted)
// for the requests the tombstone covers.
func (n *Node) proxyFor(id OwnerID, age int64, origin string, inc uint64, seq uint64) (*owner, error) {
	// A holder's later requests find its proxy: a read.
	n.mu.RLock()
	o, closed := n.proxies[id], n.closed
	if o != nil && !closed && o.live != nil {
		// Under the read lock: see heard.go.
		o.live.touch(mono(), n.heardSlack())
	}
	n.mu.RUnlock()
	if o != nil && !closed {
		return o, nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil, ErrClosed
	}
	o = n.proxies[id]
	if o == nil {
		refused, aborted := n.refusedLocked(id, seq)
		if refused {
			return nil, ErrAborted
		}
		delete(n.tombs, id)
		o = newOwner(id, age, origin)
		o.originInc = inc
		o.aborted = aborted
		n.addProxyLocked(o)
		if origin != "" {
			// A request can arrive after its holder's tombstone expired
			// (2 × NodeTimeout in flight): the next Ping asks.
			if n.unchecked == nil {
				n.unchecked = make(map[string][]OwnerID)
			}
			n.unchecked[origin] = append(n.unchecked[origin], id)
		}
	}
	if o.live != nil {
		o.live.touch(mono(), n.heardSlack())
	}
	return o, nil
}

// forget deletes dropped proxy o and leaves a tombstone, so that its late
// requests are refused without a proxy.
func (n *Node) forget(o *owner) {
	seq := o.lastSeq()
	n.mu.Lock()
	n.removeProxyLocked(o)
	n.buryLocked(o.id, seq, true)
	n.mu.Unlock()
}

// Acquire takes keys for a holder of another node. It answers at once
// when the request is decided without a wait (all held, or failed and
// then holding none of them); a request that must wait is answered
// codeQueued, and its verdict goes to the holder's node later (Answer,
// and Status for a verdict that was lost), so that a wait never holds a
// handler (with server.WithPool, a worker of the pool) of this node. The
// request's states and transitions are in remotereq.go.
func (s *Service) Acquire(ctx context.Context, a *AcquireArgs, r *AcquireReply) error {
	n := s.n
	if err := checkRequest(a.Mode, a.Keys); err != nil {
		r.set(err)
		return nil
	}
	o, err := n.proxyFor(a.Owner, a.Age, a.Origin, a.OriginInc, a.Seq)
	if err != nil {
		r.set(err)
		return nil
	}
	adm, earlier, err := o.arrive(n.table, a, ctx.Err())
	switch adm {
	case admitRefused:
		r.set(err)
		return nil
	case admitTaken:
		r.set(nil)
		r.Token = n.nextToken()
		return nil
	}
	if len(earlier) == 0 && o.start(n.table, a) {
		// Most requests need no wait: taken on this goroutine, at once,
		// without a context of their own.
		done, err, token := o.settle(n.table, a, ctx, nil, false, n.nextToken())
		r.set(err)
		r.Token = token
		closeDone(done)
		return nil
	}
	s.acquireWaiting(ctx, o, a, r, earlier)
	return nil
}

// acquireWaiting is Acquire for a request that waits: for the holder's
// earlier requests here to end, or for its keys. Its verdict is Acquire's
// reply when it comes while the handler runs, else an Answer.
func (s *Service) acquireWaiting(ctx context.Context, o *owner, a *AcquireArgs, r *AcquireReply, earlier []chan struct{}) {
	n := s.n
	// The request may outlive the call, whose arguments the server
	// reuses once Acquire returns (AcquireArgs.Reset).
	a = a.detached()
	// The request outlives this handler when it must wait: its context
	// keeps the caller's deadline but not the handler's end.
	cctx := context.WithoutCancel(ctx)
	var cancelDeadline context.CancelFunc = func() {}
	if d, ok := ctx.Deadline(); ok {
		cctx, cancelDeadline = context.WithDeadline(cctx, d)
	}
	rctx, cancel := context.WithCancel(cctx)
	o.waitWith(a.Seq, cancel)
	stopNode := context.AfterFunc(n.ctx, cancel)
	finish := func(err error, late bool) {
		stopNode()
		var token uint64
		if err == nil {
			token = n.nextToken()
		}
		done, err, token := o.settle(n.table, a, cctx, err, late, token)
		cancel()
		cancelDeadline()
		closeDone(done)
		if late {
			n.answer(a, err, token)
		} else {
			r.set(err)
			r.Token = token
		}
	}
	if len(earlier) > 0 {
		for _, d := range earlier {
			select {
			case <-d:
			case <-rctx.Done():
				finish(rctx.Err(), false)
				return
			}
		}
		if o.start(n.table, a) {
			finish(nil, false)
			return
		}
	}
	queued := make(chan struct{})
	result := make(chan error, 1)
	if !n.goOwned(func() {
		err := o.take(rctx, n, a.Keys, a.Mode, a.Seq, a.Holds, func() { close(queued) })
		select {
		case <-queued:
			finish(err, true)
		default:
			result <- err
		}
	}) {
		finish(ErrClosed, false)
		return
	}
	select {
	case err := <-result:
		finish(err, false)
	case <-queued:
		r.Code = codeQueued
	}
}

// Release gives back keys of a holder of another node.
func (s *Service) Release(ctx context.Context, a *ReleaseArgs, _ *Ack) error {
	n := s.n
	n.mu.RLock()
	o := n.proxies[a.Owner]
	n.mu.RUnlock()
	if o != nil {
		o.releaseKeys(n.table, a.Keys, a.All, a.Seq)
	}
	return nil
}

// Abort withdraws a holder's requests up to a.Seq (see AbortArgs). For a
// holder unknown here (the Abort overtook its request) it leaves a
// tombstone, so that the request is refused when it arrives.
func (s *Service) Abort(ctx context.Context, a *AbortArgs, _ *Ack) error {
	n := s.n
	if o := n.proxyOrBury(a.Owner, a.Seq, false); o != nil {
		o.abort(n.table, a.Seq, a.From)
	}
	return nil
}

// Drop ends a holder of another node here: everything it holds is
// released, its proxy is forgotten and its late requests are refused.
func (s *Service) Drop(ctx context.Context, a *DropArgs, _ *Ack) error {
	n := s.n
	o := n.proxyOrBury(a.Owner, a.LastSeq, true)
	if o == nil {
		return nil
	}
	// Its requests up to LastSeq are withdrawn (later copies refused),
	// then everything goes.
	o.abort(n.table, a.LastSeq, 0)
	o.drop(n.table)
	n.forget(o)
	return nil
}

// proxyOrBury returns the proxy of holder id, or, for a holder unknown
// here (its Abort or Drop overtook its request), nil after leaving a
// tombstone up to seq, so that its late requests are refused.
func (n *Node) proxyOrBury(id OwnerID, seq uint64, dropped bool) *owner {
	n.mu.Lock()
	defer n.mu.Unlock()
	o := n.proxies[id]
	if o == nil && !n.closed {
		n.buryLocked(id, seq, dropped)
	}
	return o
}
