package batchserver

import (
	"sync"

	"github.com/rpcxbatch/rpcxbatch/internal/stackpad"
)

// maxIdleWorkers bounds the goroutines kept parked for reuse.
const maxIdleWorkers = 4096

// workers runs call and cast entries on reused goroutines. Each entry still
// runs alone on a goroutine of its own while it runs, as rpcx runs each
// request, so a slow handler delays no other entry; but when it is done
// that goroutine, and the stack it grew, takes the next entry instead of a
// new goroutine being created and its stack grown again (stack growth was
// a fifth of the server's CPU with a goroutine per entry).
//
// Parked goroutines are released when the plugin's last connection closes
// and by Plugin.Close, so an idle server holds none.
type workers struct {
	mu     sync.Mutex
	idle   []chan func()
	closed bool
}

// run starts fn on an idle goroutine, or on a new one.
func (w *workers) run(fn func()) {
	w.mu.Lock()
	if n := len(w.idle); n > 0 {
		ch := w.idle[n-1]
		w.idle = w.idle[:n-1]
		w.mu.Unlock()
		ch <- fn
		return
	}
	w.mu.Unlock()
	go w.loop(fn)
}

func (w *workers) loop(fn func()) {
	// A parked worker would have its stack shrunk at every collection and
	// grown back by the next entry (a quarter of the server's CPU in the
	// cast benchmark): see stackpad.
	var pad stackpad.Pad
	stackpad.Touch(&pad)
	ch := make(chan func(), 1)
	for fn != nil {
		fn()
		if !w.park(ch) {
			break
		}
		fn = <-ch // nil: released
	}
	stackpad.Touch(&pad)
}

func (w *workers) park(ch chan func()) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || len(w.idle) >= maxIdleWorkers {
		return false
	}
	w.idle = append(w.idle, ch)
	return true
}

// release ends every parked goroutine; with closed set, later entries still
// run but their goroutines end afterwards instead of parking.
func (w *workers) release(closed bool) {
	w.mu.Lock()
	idle := w.idle
	w.idle = nil
	w.closed = w.closed || closed
	w.mu.Unlock()
	for _, ch := range idle {
		ch <- nil
	}
}
