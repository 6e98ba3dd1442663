package batchserver

import (
	"sync"
	"sync/atomic"
	"time"
)

// janitorEvery is how often the janitor looks after the plugin's idle
// resources.
const janitorEvery = trimEvery

// janitor is the plugin's own clock for what it keeps while idle: once
// every janitorEvery, while the plugin has connections or parked
// goroutines, it trims the parked goroutines (workers.trimDue) and lets
// each connection that has written nothing since its last look go of its
// reply buffers (conn.shedIfQuiet). So the bounds the docs state on parked
// goroutines and buffers hold without any help from clients: a lane that
// stays connected and silent, sending neither frames nor heartbeats, is
// trimmed as any other, and a client's heartbeats, however many, move no
// clock.
//
// It runs on a timer armed only while there is something to look after
// (a connection's state is made, a goroutine parks), so an idle server
// with no connection and nothing parked runs nothing. Plugin.Close stops
// it and waits for a look under way.
type janitor struct {
	p *Plugin
	// armed is set while a look is pending or running: arming again is
	// then a load, as it is on every park.
	armed atomic.Bool

	mu     sync.Mutex // guards t and closed
	t      *time.Timer
	closed bool

	// lookMu is held by the look under way: a look that runs longer than
	// janitorEvery (a loaded machine) while a park armed the next one must
	// not overlap that one.
	lookMu sync.Mutex
	conns  []*conn // the look's snapshot of the connections, reused
}

// arm schedules the next look unless one is pending or running. It may be
// called with connMu or workers.mu held: a look takes neither while it
// holds j.mu.
func (j *janitor) arm() {
	if j.armed.Load() || !j.armed.CompareAndSwap(false, true) {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if !j.closed {
		j.t = time.AfterFunc(janitorEvery, j.look)
	}
}

// look is one round of the janitor's, on the timer's goroutine.
func (j *janitor) look() {
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		return
	}
	// Counted under mu: a Close that stops the janitor after this waits
	// for the look to end.
	j.p.tasks.add()
	j.mu.Unlock()
	defer j.p.tasks.done()
	j.lookMu.Lock()
	defer j.lookMu.Unlock()
	// Disarmed before looking: whatever arms it from here on (a new
	// connection, a park) schedules the next look itself.
	j.armed.Store(false)
	j.p.workers.trimDue(time.Now())
	j.conns = j.p.allConns(j.conns[:0])
	for i, c := range j.conns {
		c.shedIfQuiet()
		j.conns[i] = nil
	}
	if len(j.conns) > 0 || j.p.workers.idleCount() > 0 {
		j.arm()
	}
	if cap(j.conns) > 1024 && len(j.conns) < cap(j.conns)/4 {
		j.conns = nil
	}
}

// stop ends the janitor's looks for good.
func (j *janitor) stop() {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.closed = true
	if j.t != nil {
		j.t.Stop()
	}
}
