package batchserver

import "time"

// CallsDirectly reports whether the plugin calls service.method without
// reflect (see invoke.Method.Direct).
func CallsDirectly(p *Plugin, service, methodName string) bool {
	m, _ := p.services.lookup(service, methodName)
	return m != nil && m.Direct()
}

// IdleWorkers is the number of goroutines the plugin keeps parked.
func IdleWorkers(p *Plugin) int { return p.workers.idleCount() }

// TrimWorkers ends the parked goroutines idle for the timeout as of now.
func TrimWorkers(p *Plugin, now time.Time) { p.workers.trim(now) }

// IdleWorkerTimeout is how long a parked goroutine is kept unused.
const IdleWorkerTimeout = idleWorkerTimeout

// MaxIdleWorkers bounds the goroutines the plugin keeps parked.
const MaxIdleWorkers = maxIdleWorkers

// CountsItself reports whether the plugin counts itself in rpcx's
// requests being handled (graceful shutdown's per-frame path).
func CountsItself(p *Plugin) bool {
	p.holdMu.Lock()
	defer p.holdMu.Unlock()
	return p.holding
}

// HeldBytes is the bytes of batch frames the plugin's connections hold
// (the byte window's count).
func HeldBytes(p *Plugin) int64 {
	p.connMu.Lock()
	defer p.connMu.Unlock()
	var n int64
	for _, c := range p.conns {
		n += c.bytes.held.Load()
	}
	return n
}

// KeptReplyBytes is the capacity the plugin's connections keep for their
// replies: frame buffers and recycled payload buffers.
func KeptReplyBytes(p *Plugin) int {
	n := 0
	for _, c := range p.allConns(nil) {
		c.replyMu.Lock()
		n += cap(c.buf) + cap(c.replies)
		c.replyMu.Unlock()
		c.replyBufs.mu.Lock()
		for _, b := range c.replyBufs.free {
			n += cap(b)
		}
		c.replyBufs.mu.Unlock()
	}
	return n
}

// AssumeWorkerNeed sets the parked goroutines the next trims keep (the
// need, halved at each trim unless a busier moment raises it).
func AssumeWorkerNeed(p *Plugin, n int) {
	p.workers.mu.Lock()
	defer p.workers.mu.Unlock()
	p.workers.need = n
}

// MostWorkers is the most goroutines the plugin's workers had at once,
// parked or busy, since the plugin was created.
func MostWorkers(p *Plugin) int {
	p.workers.mu.Lock()
	defer p.workers.mu.Unlock()
	return p.workers.most
}

// MostQueueCapacity is the largest capacity the workers' queue of entries
// waiting for a goroutine had since the plugin was created.
func MostQueueCapacity(p *Plugin) int {
	p.workers.mu.Lock()
	defer p.workers.mu.Unlock()
	return p.workers.mostQueue
}

// KeptSendRoom is the room the plugin's connections keep in their send
// queues, in entries.
func KeptSendRoom(p *Plugin) int {
	n := 0
	for _, c := range p.allConns(nil) {
		c.sends.mu.Lock()
		n += cap(c.sends.items) + cap(c.sends.spare)
		c.sends.mu.Unlock()
	}
	return n
}
