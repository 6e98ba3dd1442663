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

// proxyFor returns the proxy of a's holder for its request seq, making
// it on first use. A holder with a tombstone here is refused (ErrAborted)
// for the requests the tombstone covers.
func (n *Node) proxyFor(id OwnerID, age int64, origin string, inc uint64, seq uint64) (*owner, error) {
	// A holder's later requests find its proxy: a read.
	n.mu.RLock()
	o, closed := n.proxies[id], n.closed
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
	}
	return o, nil
}

// forget deletes dropped proxy o and leaves a tombstone, so that its late
// requests are refused without a proxy.
func (n *Node) forget(o *owner) {
	o.mu.Lock()
	seq := max(o.aborted, o.maxSeq)
	o.mu.Unlock()
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
// handler (with server.WithPool, a worker of the pool) of this node.
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
	o.mu.Lock()
	if a.Seq > o.maxSeq {
		o.maxSeq = a.Seq
	}
	if o.closed.Load() || a.Seq <= o.aborted {
		o.mu.Unlock()
		r.set(ErrAborted)
		return nil
	}
	if err := ctx.Err(); err != nil {
		// Its caller gave up already (this node was frozen, say): a grant
		// now would be held by nobody.
		o.mu.Unlock()
		r.set(err)
		return nil
	}
	if len(o.pending) == 0 && a.LastOK+1 >= a.Seq {
		// The usual request: none of the holder's earlier ones is still
		// here or failed. Its releases and its take are done under o.mu
		// in one go, so no Abort, Status or later request can come in
		// between, and it needs no entry in pending.
		if s.acquireNow(o, a, r) {
			return nil
		}
	}
	// A holder makes one request at a time: the earlier ones are over for
	// it, so any still here are withdrawn, and what failed ones took is
	// given back, before this one starts.
	var earlier []chan struct{}
	if len(o.pending) > 0 {
		for seq, p := range o.pending {
			if seq < a.Seq {
				p.cancel()
				earlier = append(earlier, o.doneOf(seq))
			}
		}
	}
	if len(o.answers) > 0 {
		for seq := range o.answers {
			if seq < a.Seq {
				delete(o.answers, seq)
			}
		}
	}
	if a.Seq-1 > o.aborted {
		o.aborted = a.Seq - 1
	}
	// Registered under the same lock as the checks above, so that a later
	// request always finds this one and waits for it. Its cancel is set
	// once it has a context of its own (a request that must wait).
	if o.pending == nil {
		// Made here, by the first request that goes the long way: most
		// proxies never need it.
		o.pending = make(map[uint64]pendingReq)
	}
	o.pending[a.Seq] = pendingReq{cancel: noCancel}
	o.mu.Unlock()
	if len(earlier) == 0 {
		o.releaseFailed(n.table, a.LastOK, a.Seq)
		o.mu.Lock()
		o.releaseCarried(n.table, a)
		o.mu.Unlock()
		// Most requests need no wait: taken on this goroutine, at once,
		// without a context of their own.
		if o.takeNow(n.table, a.Keys, a.Mode, a.Seq) {
			done, err := s.settleAcquire(o, a, ctx, nil, false)
			r.set(err)
			closeDone(done)
			return nil
		}
	}
	s.acquireWaiting(ctx, o, a, r, earlier)
	return nil
}

// acquireNow applies a's releases and takes its keys if they are free,
// o.mu held, and then answers r and unlocks o.mu. It reports false when a
// key is not free: the releases are applied, o.mu is still held, and the
// request goes the long way (pending is empty, so it waits for nothing
// but its keys).
func (s *Service) acquireNow(o *owner, a *AcquireArgs, r *AcquireReply) bool {
	t := s.n.table
	for seq := range o.answers {
		if seq < a.Seq {
			delete(o.answers, seq)
		}
	}
	if a.Seq-1 > o.aborted {
		o.aborted = a.Seq - 1
	}
	o.releaseCarried(t, a)
	a.Released, a.ReleasedAll = nil, false
	if !o.takeNowLocked(t, a.Keys, a.Mode, a.Seq) {
		return false
	}
	o.mu.Unlock()
	r.set(nil)
	return true
}

// noCancel is the cancel of a request that has no context of its own.
func noCancel() {}

func closeDone(done chan struct{}) {
	if done != nil {
		close(done)
	}
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
	o.mu.Lock()
	p := o.pending[a.Seq]
	p.cancel = cancel
	o.pending[a.Seq] = p
	if a.Seq <= o.aborted {
		// Withdrawn (Abort, or a later request) before it had a context.
		cancel()
	}
	o.mu.Unlock()
	stopNode := context.AfterFunc(n.ctx, cancel)
	finish := func(err error, late bool) {
		stopNode()
		done, err := s.settleAcquire(o, a, cctx, err, late)
		cancel()
		cancelDeadline()
		closeDone(done)
		if late {
			n.answer(a, err)
		} else {
			r.set(err)
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
		o.releaseFailed(n.table, a.LastOK, a.Seq)
		o.mu.Lock()
		o.releaseCarried(n.table, a)
		o.mu.Unlock()
		if o.takeNow(n.table, a.Keys, a.Mode, a.Seq) {
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

// settleAcquire ends request a of proxy o with the verdict of its take. It
// returns the channel to close once the request ended (nil: nobody waits
// for it) and the verdict its holder gets. late is set when it is answered after
// a wait (Answer), not by Acquire's reply.
func (s *Service) settleAcquire(o *owner, a *AcquireArgs, ctx context.Context, err error, late bool) (chan struct{}, error) {
	n := s.n
	o.mu.Lock()
	aborted := a.Seq <= o.aborted
	o.mu.Unlock()
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
	// Out of pending and into answers in one step: Status always finds
	// the request in one of them.
	o.mu.Lock()
	done := o.pending[a.Seq].done
	delete(o.pending, a.Seq)
	if late && !o.closed.Load() && a.Seq >= o.maxSeq {
		if o.answers == nil {
			o.answers = make(map[uint64]int)
		}
		o.answers[a.Seq] = codeOf(err)
	}
	o.mu.Unlock()
	return done, err
}

// Release gives back keys of a holder of another node.
func (s *Service) Release(ctx context.Context, a *ReleaseArgs, _ *Ack) error {
	n := s.n
	n.mu.RLock()
	o := n.proxies[a.Owner]
	n.mu.RUnlock()
	if o == nil {
		return nil
	}
	if a.All {
		o.mu.Lock()
		keys := make([]string, 0, o.held.len())
		for k := range o.held.all() {
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

// Abort withdraws a holder's requests up to a.Seq (see AbortArgs). For a
// holder unknown here (the Abort overtook its request) it leaves a
// tombstone, so that the request is refused when it arrives.
func (s *Service) Abort(ctx context.Context, a *AbortArgs, _ *Ack) error {
	n := s.n
	o := n.proxyOrBury(a.Owner, a.Seq, false)
	if o == nil {
		return nil
	}
	o.mu.Lock()
	o.aborted = max(o.aborted, a.Seq)
	for seq, p := range o.pending {
		if seq <= a.Seq {
			p.cancel()
		}
	}
	o.mu.Unlock()
	if a.From != 0 && a.From <= a.Seq {
		o.undo(n.table, func(s uint64) bool { return s >= a.From && s <= a.Seq })
	} else {
		o.releaseGrant(n.table, a.Seq)
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
	o.mu.Lock()
	o.aborted = max(o.aborted, a.LastSeq)
	o.mu.Unlock()
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
