package lock

import (
	"context"
	"errors"
)

// The life of a remote holder's request on this node, in one place. Its
// state lives in the holder's proxy (owner): the fields below, the keys
// the proxy holds (owner.held) and the proxy's rows and waiters in the
// lock table. Every transition runs under the proxy's mutex o.mu, and the
// table changes a transition makes (a take, a release, an upgrade or its
// undo) are made under o.mu too (owner before shard is the lock order,
// as releaseAll has it), so no goroutine ever finds the books and the
// table apart. The only step outside o.mu is a wait: in the table's
// queue (take) or for the holder's earlier requests here to end.
//
//	arrive ─┬─ refused             proxy closed, seq withdrawn (≤ aborted),
//	        │                      or its caller's deadline passed
//	        ├─ taken               nothing earlier here, keys free: its
//	        │                      releases and its take in one go
//	        └─ pending ─┬─ taken   (start) what failed before it is
//	                    │          undone, its releases applied, keys free
//	                    └─ waiting (a context of its own; answered
//	                         │      codeQueued when it must queue)
//	                         └─ settled: out of pending, its verdict in
//	                                answers when it was answered late
//	abort(seq, from)   withdraws requests ≤ seq: the pending ones are
//	                   cancelled, later arrivals refused, and what the
//	                   failed ones did is undone
//	release            gives keys back (unless a later request asked
//	                   for them again)
//	drop               closes the proxy: every pending request cancelled,
//	                   everything given back
//
// A holder makes one request at a time, so a request that arrives
// supersedes the holder's earlier ones still here: they are cancelled
// and it waits for them to end before it starts.

// remoteReqs is the state of a remote holder's requests on this node
// (owner's, guarded by owner.mu).
type remoteReqs struct {
	aborted uint64                // requests with seq <= aborted are refused
	maxSeq  uint64                // the highest request seq that arrived
	pending map[uint64]pendingReq // requests in progress by seq (nil: none so far)
	// answers keeps the verdicts of requests answered late (queued), by
	// seq, until the holder's next request arrives: Status reads them.
	answers map[uint64]verdict
}

// pendingReq is a request of a remote holder in progress on this node.
type pendingReq struct {
	cancel context.CancelFunc
	// done is closed when the request ends. It is made by the first
	// request of the same holder that must wait for this one (rare), and
	// closed by the request as it leaves pending.
	done chan struct{}
}

// noCancel is the cancel of a request that has no context of its own.
func noCancel() {}

func closeDone(done chan struct{}) {
	if done != nil {
		close(done)
	}
}

// admission is what arrive decided.
type admission int

const (
	admitRefused admission = iota // answered with the error arrive returned
	admitTaken                    // granted: answered OK
	admitPending                  // in pending: start it, or wait
)

// arrive admits request a (ctxErr: its caller's context). A request that
// is refused or taken at once is over when it returns; a pending one
// returns the done channels of the holder's earlier requests here, which
// it must wait for before it starts.
func (o *owner) arrive(t *table, a *AcquireArgs, ctxErr error) (admission, []chan struct{}, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if a.Seq > o.maxSeq {
		o.maxSeq = a.Seq
	}
	if o.closed.Load() || a.Seq <= o.aborted {
		return admitRefused, nil, ErrAborted
	}
	if ctxErr != nil {
		// Its caller gave up already (this node was frozen, say): a grant
		// now would be held by nobody.
		return admitRefused, nil, ctxErr
	}
	o.supersedeLocked(a.Seq)
	if len(o.pending) == 0 && a.LastOK+1 >= a.Seq {
		// The usual request: none of the holder's earlier ones is still
		// here or failed. Its releases and its take are done in one go,
		// and it needs no entry in pending.
		o.releaseCarried(t, a)
		a.Released, a.ReleasedAll = nil, false
		if o.takeNowLocked(t, a.Keys, a.Mode, a.Seq) {
			return admitTaken, nil, nil
		}
	}
	// A holder makes one request at a time: the earlier ones are over for
	// it, so any still here are withdrawn, and waited for.
	var earlier []chan struct{}
	for seq, p := range o.pending {
		if seq < a.Seq {
			p.cancel()
			earlier = append(earlier, o.doneOf(seq))
		}
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
	return admitPending, earlier, nil
}

// supersedeLocked is the arrival of request seq for what the holder's
// earlier requests left: their late verdicts are no longer asked for,
// and they are withdrawn (later copies refused). o.mu is held.
func (o *owner) supersedeLocked(seq uint64) {
	for s := range o.answers {
		if s < seq {
			delete(o.answers, s)
		}
	}
	if seq-1 > o.aborted {
		o.aborted = seq - 1
	}
}

// start is pending request a's first step once the holder's earlier
// requests here ended: what the requests between a.LastOK and a failed
// is undone (even if their Abort is still on its way), a's releases are
// applied, and a's keys are taken if they are all free. It reports
// whether they were (else a waits for them, take).
func (o *owner) start(t *table, a *AcquireArgs) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if a.LastOK+1 < a.Seq {
		lastOK, seq := a.LastOK, a.Seq
		o.undoLocked(t, func(s uint64) bool { return s > lastOK && s < seq })
	}
	o.releaseCarried(t, a)
	a.Released, a.ReleasedAll = nil, false
	// Withdrawn meanwhile or not, its settle decides.
	return o.takeNowLocked(t, a.Keys, a.Mode, a.Seq)
}

// waitWith gives pending request seq the cancel of its own context, and
// cancels it at once when it was withdrawn before it had one. It reports
// whether the request may still wait.
func (o *owner) waitWith(seq uint64, cancel context.CancelFunc) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	p := o.pending[seq]
	p.cancel = cancel
	o.pending[seq] = p
	if seq <= o.aborted || o.closed.Load() {
		cancel()
		return false
	}
	return true
}

// settle ends pending request a with err, its take's verdict, and returns
// the channel to close once it ended (nil: nobody waits for it) and the
// verdict its holder gets. ctx is the request's caller's. late is set
// when it is answered after a wait (Answer), not by Acquire's reply. A
// grant nobody takes (withdrawn, or made after its caller's deadline) is
// given back in the same critical section that takes the request out of
// pending: Status finds it in pending or in answers, and an Abort either
// finds it pending or finds its grant. token is the grant's fencing
// token, taken after the take granted; settle returns it, or 0 for a
// request that ends without a grant.
func (o *owner) settle(t *table, a *AcquireArgs, ctx context.Context, err error, late bool, token uint64) (chan struct{}, error, uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	seq := a.Seq
	ctxErr := ctx.Err()
	switch {
	case seq <= o.aborted:
		// Withdrawn while it waited, or just after its grant.
		o.undoLocked(t, func(s uint64) bool { return s == seq })
		err = ErrAborted
	case err == nil && ctxErr != nil:
		// Granted after its caller's deadline: nobody takes the grant.
		o.undoLocked(t, func(s uint64) bool { return s == seq })
		err = ctxErr
	case errors.Is(err, context.Canceled) && ctxErr == nil:
		err = ErrAborted
	}
	if err != nil {
		token = 0
	}
	done := o.pending[seq].done
	delete(o.pending, seq)
	if late && !o.closed.Load() && seq >= o.maxSeq {
		if o.answers == nil {
			o.answers = make(map[uint64]verdict)
		}
		o.answers[seq] = verdict{codeOf(err), token}
	}
	return done, err, token
}

// doneOf returns the channel closed when request seq, in pending, ends.
// o.mu is held.
func (o *owner) doneOf(seq uint64) chan struct{} {
	p := o.pending[seq]
	if p.done == nil {
		p.done = make(chan struct{})
		o.pending[seq] = p
	}
	return p.done
}

// abort withdraws the holder's requests up to seq (AbortArgs): the
// pending ones are cancelled, later arrivals refused, and what request
// seq did (from set: the requests from to seq) is undone, in one critical
// section.
func (o *owner) abort(t *table, seq, from uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.aborted = max(o.aborted, seq)
	for s, p := range o.pending {
		if s <= seq {
			p.cancel()
		}
	}
	if from == 0 || from > seq {
		from = seq
	}
	o.undoLocked(t, func(s uint64) bool { return s >= from && s <= seq })
}

// releaseKeys gives back keys (all that o holds when all is set) that no
// request after seq asked for again (ReleaseArgs).
func (o *owner) releaseKeys(t *table, keys []string, all bool, seq uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if all {
		o.releaseAllLocked(t, seq)
		return
	}
	for _, k := range keys {
		o.releaseLocked(t, k, seq)
	}
}

// status is where request seq stands: codeQueued while pending, its
// verdict once answered late, codeUnknown otherwise.
func (o *owner) status(seq uint64) verdict {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.pending[seq]; ok {
		return verdict{code: codeQueued}
	}
	if v, ok := o.answers[seq]; ok {
		return v
	}
	return verdict{code: codeUnknown}
}

// lastSeq is the seq up to which a forgotten proxy's late requests are
// refused.
func (o *owner) lastSeq() uint64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return max(o.aborted, o.maxSeq)
}

// drop closes o: its queued requests end with ErrClosed and everything it
// holds is released, in one critical section. It reports whether this
// call closed it.
func (o *owner) drop(t *table) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed.Load() {
		return false
	}
	o.closed.Store(true)
	for _, p := range o.pending {
		p.cancel()
	}
	close(o.done)
	for k := range o.held.all() {
		t.release(o, k)
	}
	o.held.clear()
	return true
}
