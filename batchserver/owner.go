package batchserver

import "sync"

// tasks owns the plugin's goroutines that start on demand and end when
// their work is done: each connection's reply writer and send queue, the
// pool's feeder and pinger, and the drain's watchers. Plugin.Close waits
// for them. (Entries run on workers of their own, as rpcx's requests do:
// those are not waited for.) Unlike a sync.WaitGroup it may start
// a goroutine while Close waits (a connection still served).
type tasks struct {
	mu   sync.Mutex // guards n and idle
	n    int
	idle *sync.Cond
}

// spawn runs f on a goroutine of its own, owned by t.
func (t *tasks) spawn(f func()) {
	t.mu.Lock()
	t.n++
	t.mu.Unlock()
	go func() {
		defer t.done()
		f()
	}()
}

// claim marks a goroutine of tasks that runs while its queue holds work
// as running, with the lock that guards running held, and reports whether
// the caller must start it: none ran.
func claim(running *bool) bool {
	was := *running
	*running = true
	return !was
}

// add counts a goroutine that runs on its own (the janitor's timer) as
// one of t's until it calls done.
func (t *tasks) add() {
	t.mu.Lock()
	t.n++
	t.mu.Unlock()
}

func (t *tasks) done() {
	t.mu.Lock()
	t.n--
	if t.n == 0 && t.idle != nil {
		t.idle.Broadcast()
	}
	t.mu.Unlock()
}

// wait returns when no goroutine of t runs. A reply writer ends within
// WriteTimeout (at once on a closed connection); a send queue ends once
// the sends queued on its connection have run.
func (t *tasks) wait() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.idle == nil {
		t.idle = sync.NewCond(&t.mu)
	}
	for t.n > 0 {
		t.idle.Wait()
	}
}
