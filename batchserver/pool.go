package batchserver

import (
	"sync"
	"sync/atomic"

	"github.com/smallnest/rpcx/server"

	"github.com/rpcxbatch/rpcxbatch/internal/fastcodec"

	"github.com/rpcxbatch/rpcxbatch/internal/rpcxlayout"
)

// WithHandlerPool runs batched calls and casts on pool, one task per
// entry, as rpcx runs each plain request on the pool given to
// server.WithPool or server.WithCustomPool. Without it the plugin uses the
// rpcx server's own pool when it has one (see serverPool); give it to
// choose another, or when the server's pool cannot be read.
func WithHandlerPool(pool server.WorkerPool) Option {
	return func(o *Options) { o.Pool = pool }
}

// serverPool returns the pool an rpcx server was given with
// server.WithPool or server.WithCustomPool, or nil. rpcx keeps it in an
// unexported field (Server.pool) with no accessor: see rpcxlayout.Pool. Where
// it cannot be read, batched entries run unbounded; give the pool to
// WithHandlerPool then.
func serverPool(s *server.Server) server.WorkerPool {
	pool, _ := rpcxlayout.Pool(s)
	return pool
}

// capacityReporter is what pond's pool (rpcx's server.WithPool) tells about
// its bound: at most MaxWorkers tasks run and MaxCapacity wait.
type capacityReporter interface {
	MaxWorkers() int
	MaxCapacity() int
}

// trySubmitter is a pool that can refuse a task instead of blocking (pond's).
type trySubmitter interface {
	TrySubmit(task func()) bool
}

// usePool sets the pool batched entries run on, and lowers the window to
// what the pool holds, when it says: a lane then never has more entries
// unfinished here than the pool can run and queue, and the rest wait in
// the client's bounded queue under its overflow policy, as plain requests
// wait in rpcx's connection while its pool is full.
func (p *Plugin) usePool() {
	if p.opts.Pool == nil {
		p.opts.Pool = serverPool(p.s)
	}
	if p.opts.Pool == nil {
		return
	}
	if cr, ok := p.opts.Pool.(capacityReporter); ok {
		if n := cr.MaxWorkers() + cr.MaxCapacity(); n > 0 && n < p.opts.Window {
			p.opts.Window = n
		}
	}
	p.feeder.pool = p.opts.Pool
	p.feeder.try, _ = p.opts.Pool.(trySubmitter)
	p.feeder.tasks = &p.tasks
}

// start runs a call or cast entry: on the user's pool when there is one,
// else on the plugin's own goroutines.
func (p *Plugin) start(t task) {
	if p.feeder.pool != nil {
		p.feeder.submit(t)
		return
	}
	p.workers.run(t)
}

// poolFeeder hands entries to the user's pool in the order they arrive.
//
// Submit may block while the pool is full, and the frame being delivered
// runs on a task of that same pool (rpcx submits every request to it,
// batch frames too): a frame blocked in Submit holds a worker, and with
// every worker so held the pool would never free one. So the delivering
// goroutine never blocks here: an entry the pool does not take at once
// (TrySubmit) is queued, and a goroutine of the feeder's own, which holds
// no worker, submits the queue in order, blocking as long as the pool is
// full. The queue is bounded by the lanes' windows: each queued entry is
// unfinished for its lane.
type poolFeeder struct {
	pool  server.WorkerPool
	try   trySubmitter // nil when the pool cannot refuse
	tasks *tasks       // owns the feeding goroutine

	mu      sync.Mutex // guards queue and feeding
	queue   []task
	feeding bool // the feeding goroutine runs; it exits when queue is empty
}

// codecs are the fastcodec.Codecs of entries run on a pool's workers.
var codecs = sync.Pool{New: func() any { return new(fastcodec.Codec) }}

func poolTask(t task) func() {
	return func() {
		fc := codecs.Get().(*fastcodec.Codec)
		t.run(fc)
		codecs.Put(fc)
	}
}

func (f *poolFeeder) submit(t task) {
	f.mu.Lock()
	if !f.feeding && len(f.queue) == 0 && f.try != nil {
		// Nothing ahead of it: straight to the pool if it has room.
		f.mu.Unlock()
		if f.try.TrySubmit(poolTask(t)) {
			return
		}
		f.mu.Lock()
	}
	f.queue = append(f.queue, t)
	start := claim(&f.feeding)
	f.mu.Unlock()
	if start {
		f.tasks.spawn(f.feed)
	}
}

// feed submits the queue in order, then exits.
func (f *poolFeeder) feed() {
	for {
		f.mu.Lock()
		if len(f.queue) == 0 {
			f.feeding = false
			f.queue = nil
			f.mu.Unlock()
			return
		}
		t := f.queue[0]
		f.queue[0] = task{}
		f.queue = f.queue[1:]
		f.mu.Unlock()
		f.submitOne(t)
	}
}

// submitOne submits t, blocking while the pool is full. A pool already
// stopped (rpcx's Shutdown stops it) panics in Submit, as pond does: the
// entry then runs on a goroutine the plugin owns (Plugin.Close waits for
// it), so that its call still gets an answer. A pool may also panic
// after it ran the task, or handed it on: the entry runs once, on
// whichever takes it first. Run twice, its second run would read the
// frame's entries after the frame gave them back (entryslab.go).
func (f *poolFeeder) submitOne(t task) {
	var taken atomic.Bool
	run := poolTask(t)
	once := func() {
		if taken.CompareAndSwap(false, true) {
			run()
		}
	}
	defer func() {
		if r := recover(); r != nil {
			f.tasks.spawn(once)
		}
	}()
	f.pool.Submit(once)
}

// holdOffPool keeps rpcx's Shutdown waiting until c has finished its
// entries and written their replies, or is gone, as holdWhileDraining
// does, but without holding the pool worker the frame's handler runs on:
// rpcx runs frames on the user's pool too, and a frame handler waiting
// there for its connection's entries, which wait for a worker of the same
// pool, would hold Shutdown until its context ends. rpcx's count is taken
// here, before the handler returns, and given back by a goroutine of its
// own.
func (p *Plugin) holdOffPool(c *conn) {
	atomic.AddInt32(p.rs.handlerMsgNum, 1)
	p.tasks.spawn(func() {
		defer atomic.AddInt32(p.rs.handlerMsgNum, -1)
		p.waitIdle(c)
	})
}
