package batchserver

// pushLocked queues t. A ring, not a slice appended at its end and taken
// from its front: that grew by every entry that passed through it until
// it emptied, and under a storm of casts it never did.
func (w *workers) pushLocked(t task) {
	if w.n == len(w.queue) {
		q := make([]task, max(minQueueCap, 2*len(w.queue)))
		k := copy(q, w.queue[w.head:])
		copy(q[k:], w.queue[:w.head])
		w.queue, w.head = q, 0
		w.mostQueue = max(w.mostQueue, len(q))
	}
	w.queue[(w.head+w.n)&(len(w.queue)-1)] = t
	w.n++
	w.queuePeak = max(w.queuePeak, w.n)
	w.queued.Add(1)
}

// popLocked takes the first queued entry; the queue must not be empty.
func (w *workers) popLocked() task {
	t := w.queue[w.head]
	w.queue[w.head] = task{}
	w.head = (w.head + 1) & (len(w.queue) - 1)
	w.n--
	w.queued.Add(-1)
	return t
}
