package lock

import (
	"context"
	"fmt"
	"sync"
)

// Holder takes and holds locks: the Go stand-in for an Erlang process that
// holds elock locks. One request runs at a time; a Holder may be shared
// by goroutines, which then take turns. Everything it holds, on every node,
// is released when it is closed or when the context it was made with ends.
type Holder struct {
	n    *Node
	o    *owner
	stop func() bool
	// closing makes Close run once; a second caller waits for the first.
	closing sync.Once
	// life ends when the holder is closed.
	life context.Context
	end  context.CancelFunc
	// reqMu guards reqCancel, the cancel of the context of the holder's
	// requests to other nodes: Close calls it (it cannot take mu while a
	// request runs).
	reqMu     sync.Mutex
	reqCancel context.CancelFunc

	mu  sync.Mutex // one request at a time; guards what follows
	seq uint64     // the last request's number
	// remote holds, per other node, the keys this holder holds there;
	// remoteBuf is its storage for the usual one other node.
	remote    []*remoteHolds
	remoteBuf [1]*remoteHolds
	// ans receives the Answer of a request that waits on another node,
	// when the holder asks one node at a time (answer.go).
	ans chan verdict
	// localToken is the fencing token of its last request granted on
	// its own node, 0 until Token asks for it (token.go).
	localToken uint64
	// rq is the context of its requests to other nodes (reqctx.go).
	rq reqCtx
	// spare is the arguments and reply of its last request to another
	// node that got its reply: the transport is done with them, and the
	// next request reuses them (prepare).
	spare *acquireCall
	// askedBuf holds the other nodes its request in progress asked.
	askedBuf [2]string

	// viewMu guards, besides mu, what the deadlock walk reads while a
	// request runs (stalehold.go): remote's list and each entry's keys
	// (written under both mutexes, read under either), and ended.
	viewMu sync.Mutex
	// ended is the last request to other nodes that ended: a hold there
	// that a later request asked for is its request in progress's.
	ended uint64

	// loss tells the holder that its lease on another node ran out
	// (lost.go).
	loss holderLoss
}

// ID returns the holder's cluster-wide id.
func (h *Holder) ID() OwnerID { return h.o.id }

// Lock takes keys in mode on this node. Keys are taken in the order given;
// if one cannot be taken (ctx ends, ErrDeadlock, ErrProbeLimit) the request
// gives back what it took and the holder keeps what it held before. A key
// the holder already holds is kept; asking Exclusive for a key held Shared
// upgrades it when the holder is its only holder and nobody waits, and
// fails with ErrUpgrade otherwise. A request whose ctx ends while it waits
// is withdrawn from the queue. It also fails with ErrBadRequest (no keys,
// an empty key, an unknown mode), ErrClosed (the holder or its node is
// closed) and ErrLockLost (the holder was lost).
func (h *Holder) Lock(ctx context.Context, mode Mode, keys ...string) error {
	if err := checkRequest(mode, keys); err != nil {
		return err
	}
	if err := h.lostErr(); err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seq++
	return h.lockLocal(ctx, mode, keys, h.seq)
}

func (h *Holder) lockLocal(ctx context.Context, mode Mode, keys []string, seq uint64) error {
	holds := h.holdsRemote()
	wctx := ctx
	if holds {
		// Only a holder with locks on other nodes can be lost, and then it
		// must not be granted more: its request context, which losing it
		// cancels (lost.go), ends the wait here too.
		rctx, ok := h.requestCtx(ctx)
		if !ok {
			return ErrClosed
		}
		if err := h.lostErr(); err != nil {
			// Lost before the request context was there to cancel.
			return err
		}
		wctx = rctx
	}
	err := h.o.takeLocal(wctx, h.n, keys, mode, seq, holds)
	if err != nil {
		if holds {
			h.endRequestCtx()
			err = h.verdict(ctx, err)
		}
		return fmt.Errorf("lock %d keys %s on %s: %w", len(keys), mode, h.n.name(), err)
	}
	// Its token is taken when asked for (token.go).
	h.localToken = 0
	return nil
}

// Release gives back keys on every node the holder holds them on.
func (h *Holder) Release(keys ...string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	quiet := true
	for _, k := range keys {
		if !h.o.release(h.n.table, k, 0) {
			quiet = false
		}
	}
	// Held here by nobody else's wait: the release to the other nodes may
	// wait for the holder's next request there (Config.ReleaseLinger). A
	// key somebody waits for here is likely waited for there too: a
	// release late there could make a request that holds the key here
	// wait there, behind a hold that is no more.
	h.releaseRemote(keys, quiet)
}

// ReleaseAll gives back everything the holder holds, on every node.
func (h *Holder) ReleaseAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.o.releaseAll(h.n.table)
	h.releaseRemote(nil, false)
}

// Close releases everything the holder holds on every node and ends its
// queued requests with ErrClosed. Later requests fail with ErrClosed.
func (h *Holder) Close() error {
	h.closing.Do(func() {
		h.stop()
		h.end()
		h.closedCtx()
		h.reqMu.Lock()
		if h.reqCancel != nil {
			h.reqCancel()
		}
		h.reqMu.Unlock()
		// Ending the owner first makes a request that waits return, so
		// that the request mutex below is free soon.
		h.o.drop(h.n.table)
		h.mu.Lock()
		h.o.releaseAll(h.n.table)
		h.dropRemote()
		h.mu.Unlock()
		h.n.mu.Lock()
		delete(h.n.holders, h.o.id)
		h.n.mu.Unlock()
	})
	return nil
}

// withdrawOnClose makes Close call cancel, the cancel of the holder's
// request context (reqctx.go), until that context ends (cancel nil); it
// reports false, having set nothing, when the holder is closed already.
func (h *Holder) withdrawOnClose(cancel context.CancelFunc) bool {
	h.reqMu.Lock()
	defer h.reqMu.Unlock()
	// Close ends life before it takes reqMu: either it finds cancel here
	// or this finds life ended.
	if cancel != nil && h.life.Err() != nil {
		return false
	}
	h.reqCancel = cancel
	return true
}

func checkRequest(mode Mode, keys []string) error {
	if mode != Shared && mode != Exclusive {
		return fmt.Errorf("%w: mode %d", ErrBadRequest, mode)
	}
	if len(keys) == 0 {
		return fmt.Errorf("%w: no keys", ErrBadRequest)
	}
	for _, k := range keys {
		if k == "" {
			return fmt.Errorf("%w: empty key", ErrBadRequest)
		}
	}
	return nil
}
