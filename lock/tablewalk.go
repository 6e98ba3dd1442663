package lock

// blockersOf returns whom queued request w waits for: nobody once it
// has its verdict (granted, failed or withdrawn; it leaves the index of
// waits only when its goroutine wakes, so a walk can still find it). A
// Shared request waits for the nearest Exclusive request queued ahead of
// it when there is one (which waits for the holders in turn), else for
// the holders: it is granted together with the Shared requests around
// it, so it does not wait for them, and a long run of readers costs a
// walk one step each. An Exclusive request waits for the
// holders and for the request just ahead of it, or for the whole run of
// Shared requests just ahead (they are granted together).
func (t *table) blockersOf(w *waiter) []*owner {
	s, h := t.shard(w.key)
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.rows.get(h, w.key)
	if r == nil || w.settled {
		// A granted request's holders include its own: read as its
		// blockers, they made a walk from it a cycle of one.
		return nil
	}
	ticket, mode := w.ticket, w.mode
	var ahead []*waiter
	if r.mgr != nil {
		q := r.mgr.queue
		n := 0
		for n < len(q) && q[n].ticket < ticket {
			n++
		}
		ahead = q[:n]
	}
	if mode == Shared {
		for i := len(ahead) - 1; i >= 0; i-- {
			if ahead[i].mode == Exclusive {
				return []*owner{ahead[i].o}
			}
		}
		return append([]*owner(nil), r.owners...)
	}
	out := append([]*owner(nil), r.owners...)
	for i := len(ahead) - 1; i >= 0; i-- {
		if ahead[i].mode == Exclusive {
			if i == len(ahead)-1 {
				out = append(out, ahead[i].o)
			}
			break
		}
		out = append(out, ahead[i].o)
	}
	return out
}

// waiting reports whether o's queued request wait (waiter.id) still
// waits here: queued, with no verdict yet.
func (t *table) waiting(id OwnerID, wait uint64) bool {
	var w *waiter
	t.wmu.Lock()
	for _, x := range t.waits[id] {
		if x.id == wait {
			w = x
		}
	}
	t.wmu.Unlock()
	if w == nil {
		return false
	}
	s, _ := t.shard(w.key)
	s.mu.Lock()
	defer s.mu.Unlock()
	return !w.settled
}

// waitsOf returns o's queued requests on this node.
func (t *table) waitsOf(id OwnerID) []*waiter {
	t.wmu.Lock()
	defer t.wmu.Unlock()
	return append([]*waiter(nil), t.waits[id]...)
}
