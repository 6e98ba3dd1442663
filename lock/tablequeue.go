package lock

import "context"

// manager is the queue of a contended key, in ticket order. It exists only
// while somebody waits; whichever goroutine releases the key or withdraws
// from it makes the grants, under the shard mutex.
type manager struct {
	queue []*waiter
}

// waiter is one queued request for one key.
type waiter struct {
	o      *owner
	key    string
	mode   Mode
	ticket uint64
	// id names the request on this node for good: a deadlock verdict
	// names it (Hop.Wait), and a row's tickets start again at 1 once its
	// key is free, so owner, key and ticket may name a later request.
	id uint64
	// seq is the owner's request it belongs to: a walk that comes from
	// a remote holder's node expands only its request in progress
	// (ProbeArgs.Since).
	seq  uint64
	done chan error // buffered; receives the verdict exactly once
	// settled is set, under the shard mutex, when the verdict was sent.
	settled bool
}

// wait waits for w's verdict. When ctx or the owner ends first, the request
// is withdrawn; if it was granted in the meantime the grant is given back.
func (t *table) wait(ctx context.Context, w *waiter) error {
	var err error
	select {
	case err = <-w.done:
	case <-ctx.Done():
		err = t.settle(w, ctx.Err())
	case <-w.o.done:
		err = t.settle(w, ErrClosed)
	}
	t.unindex(w)
	return err
}

// settle ends w with err unless it already has a verdict, and returns the
// verdict w ends with. A granted waiter being settled by its own goroutine
// (ctx ended at the same moment) gives the grant back.
func (t *table) settle(w *waiter, err error) error {
	s, h := t.shard(w.key)
	s.mu.Lock()
	if !w.settled {
		t.dequeueLocked(s, h, w)
		w.settled = true
		s.mu.Unlock()
		return err
	}
	s.mu.Unlock()
	v := <-w.done
	if v == nil {
		t.release(w.o, w.key)
		return err
	}
	return v
}

// fail ends w with err (a deadlock verdict) if it still waits. It reports
// whether it did.
func (t *table) fail(w *waiter, err error) bool {
	s, h := t.shard(w.key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if w.settled {
		return false
	}
	t.dequeueLocked(s, h, w)
	w.settled = true
	w.done <- err
	return true
}

func (t *table) unindex(w *waiter) {
	t.wmu.Lock()
	ws := t.waits[w.o.id]
	for i, x := range ws {
		if x == w {
			ws[i] = ws[len(ws)-1]
			ws[len(ws)-1] = nil
			ws = ws[:len(ws)-1]
			break
		}
	}
	if len(ws) == 0 {
		delete(t.waits, w.o.id)
	} else {
		t.waits[w.o.id] = ws
	}
	t.wmu.Unlock()
}

// dequeueLocked takes w out of its row's queue and grants whoever that
// unblocks (a writer that withdraws can let the readers behind it in).
func (t *table) dequeueLocked(s *shard, h uint64, w *waiter) {
	r := s.rows.get(h, w.key)
	if r == nil || r.mgr == nil {
		return
	}
	q := r.mgr.queue
	for i, x := range q {
		if x == w {
			copy(q[i:], q[i+1:])
			q[len(q)-1] = nil
			r.mgr.queue = q[:len(q)-1]
			break
		}
	}
	t.grantLocked(s, r)
}

// grantLocked grants the head of r's queue as far as modes allow, in
// ticket order, and deletes the row when nobody holds or wants it.
func (t *table) grantLocked(s *shard, r *row) {
	if r.mgr != nil {
		q := r.mgr.queue
		n := 0
		for n < len(q) {
			w := q[n]
			if len(r.owners) == 0 {
				r.mode = w.mode
			} else if r.mode != Shared || w.mode != Shared {
				break
			}
			r.owners = append(r.owners, w.o)
			w.settled = true
			w.done <- nil
			q[n] = nil
			n++
		}
		if n == len(q) {
			r.mgr = nil
		} else {
			r.mgr.queue = q[n:]
		}
	}
	if len(r.owners) == 0 && r.mgr == nil {
		s.rows.del(r)
		r.owners = r.owners[:0]
		r.key = ""
		rowPool.Put(r)
	}
}
