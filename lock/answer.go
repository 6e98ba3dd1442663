package lock

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// A request that must wait on another node does not hold a handler there:
// the node answers Acquire with codeQueued at once, and sends the verdict
// to the holder's node when it has one (Answer). The holder's node asks
// for it (Status) every NodeTimeout/2 while it waits, which also finds a
// lost Answer, a node that restarted (it does not know the request) and a
// node that stopped answering (lost after NodeTimeout).

// AnswerArgs carries the verdict of a request that waited on node Node.
type AnswerArgs struct {
	Owner OwnerID
	Seq   uint64
	Node  string
	Code  int
	// Token is the grant's fencing token (see Holder.Token).
	Token uint64
}

// verdict is a request's verdict as an Answer or Status brings it.
type verdict struct {
	code  int
	token uint64
}

// StatusArgs asks a node where request Seq of holder Owner stands.
type StatusArgs struct {
	Owner OwnerID
	Seq   uint64
}

// answerKey names a request waiting on a node.
type answerKey struct {
	owner OwnerID
	seq   uint64
	node  string
}

// goOwned runs f on a goroutine the node owns, unless the node stopped.
func (n *Node) goOwned(f func()) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.stopped {
		return false
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		f()
	}()
	return true
}

// answer sends the verdict of a request that waited to its holder's node.
// One try: a lost Answer is found by the holder's Status.
func (n *Node) answer(a *AcquireArgs, err error, token uint64) {
	if n.cfg.Transport == nil || a.Origin == "" {
		return
	}
	args := &AnswerArgs{Owner: a.Owner, Seq: a.Seq, Node: n.cfg.Addr, Code: codeOf(err), Token: token}
	ctx, cancel := context.WithTimeout(n.ctx, n.cfg.NodeTimeout)
	defer cancel()
	_ = n.cfg.Transport.Cast(ctx, a.Origin, ServicePath, "Answer", args)
}

// Answer delivers the verdict of a request that waited on another node.
func (s *Service) Answer(ctx context.Context, a *AnswerArgs, _ *Ack) error {
	n := s.n
	k := answerKey{a.Owner, a.Seq, a.Node}
	sh := n.answerShard(k)
	sh.mu.Lock()
	// Under the mutex: see expectAnswer.
	if ch := sh.m[k]; ch != nil {
		select {
		case ch <- verdict{a.Code, a.Token}:
		default:
		}
	} else if len(sh.early) < earlyLimit {
		// Ahead of the Acquire reply that says the request waits: kept
		// for the request's expectAnswer (or swept, if nobody asks).
		if sh.early == nil {
			sh.early = make(map[answerKey]earlyAnswer)
		}
		sh.early[k] = earlyAnswer{v: verdict{a.Code, a.Token}, at: time.Now()}
	}
	sh.mu.Unlock()
	return nil
}

// Status answers where a request stands on this node: codeQueued while it
// waits, its verdict once it has one, codeUnknown when this node does not
// know it (it restarted, or dropped the holder).
func (s *Service) Status(ctx context.Context, a *StatusArgs, r *AcquireReply) error {
	n := s.n
	n.mu.RLock()
	o := n.proxies[a.Owner]
	n.mu.RUnlock()
	r.Code = codeUnknown
	if o != nil {
		v := o.status(a.Seq)
		r.Code, r.Token = v.code, v.token
	}
	return nil
}

// answerShards is how many parts the table of expected answers is split
// into, by holder.
const answerShards = 64

// earlyLimit bounds the Answers one shard keeps for requests not
// registered yet; more are dropped (the request's Status finds them).
const earlyLimit = 1024

// answerShard is one part of the table of expected answers.
type answerShard struct {
	mu sync.Mutex // guards m and early
	m  map[answerKey]chan verdict
	// early are Answers that came before their request was registered:
	// ahead of the Acquire reply that said it waits, or for a request
	// that is over (swept after NodeTimeout).
	early map[answerKey]earlyAnswer
	_     [40]byte // a cache line each: the shards are locked from all cores
}

type earlyAnswer struct {
	v  verdict
	at time.Time
}

func (n *Node) answerShard(k answerKey) *answerShard {
	return &n.answers[(k.owner.Node^k.owner.Seq)%answerShards]
}

// expectAnswer registers request k, which the node it asked said waits,
// so that its Answer is kept on ch (emptied first), or on a new channel
// when ch is nil; forgetAnswer forgets it. An Answer that came already is
// taken at once (ok). Only a request that waits is registered: most are
// granted in their reply. Answers are sent under the shard's mutex, so
// none reaches ch once k is forgotten: ch can serve the next request.
func (n *Node) expectAnswer(k answerKey, ch chan verdict) (_ chan verdict, v verdict, ok bool) {
	sh := n.answerShard(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if e, found := sh.early[k]; found {
		delete(sh.early, k)
		return nil, e.v, true
	}
	if ch == nil {
		ch = make(chan verdict, 1)
	}
	select {
	case <-ch:
	default:
	}
	sh.m[k] = ch
	return ch, verdict{}, false
}

// forgetAnswer forgets request k (see expectAnswer).
func (n *Node) forgetAnswer(k answerKey) {
	sh := n.answerShard(k)
	sh.mu.Lock()
	delete(sh.m, k)
	sh.mu.Unlock()
}

// sweepEarlyAnswers forgets the early Answers older than NodeTimeout:
// their requests are over.
func (n *Node) sweepEarlyAnswers(now time.Time) {
	for i := range n.answers {
		sh := &n.answers[i]
		sh.mu.Lock()
		for k, e := range sh.early {
			if now.Sub(e.at) > n.cfg.NodeTimeout {
				delete(sh.early, k)
			}
		}
		sh.mu.Unlock()
	}
}

// awaitAnswer waits for the verdict of a request queued on node nd.
func (n *Node) awaitAnswer(ctx context.Context, id OwnerID, seq uint64, nd string, ch chan verdict) (AcquireReply, error) {
	every := n.cfg.NodeTimeout / 2
	t := time.NewTicker(every)
	defer t.Stop()
	lastOK := time.Now()
	for {
		select {
		case v := <-ch:
			return AcquireReply{Code: v.code, Token: v.token}, nil
		case <-ctx.Done():
			return AcquireReply{}, ctx.Err()
		case <-t.C:
		}
		sctx, cancel := context.WithTimeout(ctx, every)
		var st AcquireReply
		err := n.cfg.Transport.Call(sctx, nd, ServicePath, "Status", &StatusArgs{Owner: id, Seq: seq}, &st)
		cancel()
		switch {
		case err == nil && st.Code == codeUnknown:
			return AcquireReply{}, fmt.Errorf("%w: %s no longer knows the request (it restarted or dropped the holder)", ErrNodeLost, nd)
		case err == nil && st.Code == codeQueued:
			lastOK = time.Now()
		case err == nil:
			return st, nil
		case ctx.Err() != nil:
			return AcquireReply{}, ctx.Err()
		case time.Since(lastOK) > n.cfg.NodeTimeout:
			return AcquireReply{}, fmt.Errorf("%w: %s: no answer for %v: %w", ErrNodeLost, nd, n.cfg.NodeTimeout, err)
		}
	}
}
