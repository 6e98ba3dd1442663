// Package batchserver is the server half of rpcxbatch: an rpcx server plugin
// that accepts batch frames from rpcxbatch client lanes, runs every entry as
// rpcx would run a single request, and writes the replies back in batches.
//
// Add it in one line, before or after registering services:
//
//	s := server.NewServer()
//	s.RegisterName("Arith", new(Arith), "")
//	p, err := batchserver.New(s)
//
// The plugin learns services through rpcx's Register, RegisterFunction and
// Unregister plugin hooks, so services are registered exactly as with plain
// rpcx. Services registered before New was called are found too: on a miss
// the plugin reads rpcx's own service table (see services.go), so the order
// of New and Register does not matter, and RegisterWithMethods exposes on the
// batch path exactly the methods it exposes on the plain path.
//
// Plain rpcx clients keep working against the same server, on the same port.
//
// # Goroutines
//
// rpcx's own goroutines (one reader per connection, one per frame it
// hands the plugin) call into the plugin; the plugin starts these:
//
//	goroutine          started by           stopped by               waited for by
//	worker             workers.run, for an  parks when the queue is  nobody, as rpcx
//	(workers.loop)     entry no worker is   empty; ends when the     does not wait for
//	                   free to take up,     idle list is full, idle  its handlers
//	                   when no idle worker  10 s, the last conn
//	                   is parked            closes, Close
//	reply writer       conn.kickLocked,     ends when nothing is     Plugin.Close
//	(writeReplies)     when none runs; an   queued or conn breaks    (tasks.wait)
//	                   entry's goroutine
//	                   runs it in place
//	send queue         conn.queueSend, when ends when its queue is   Plugin.Close
//	(runSends)         none runs            empty                    (tasks.wait)
//	pool feeder (feed) poolFeeder.submit,   ends when its queue is   Plugin.Close
//	                   the user pool full   empty                    (tasks.wait)
//	refused entry      submitOne, when the  its entry ending         Plugin.Close
//	(poolTask)         stopped pool panics                           (tasks.wait)
//	pool pinger (run)  keepLanesHeard, with ends when the plugin has Plugin.Close
//	                   a user pool          no connection            (tasks.wait)
//	drain watcher      keepCounted, during  every connection idle or Plugin.Close
//	(watchIdle)        a graceful shutdown  gone                     (tasks.wait)
//	pool hold-off      holdOffPool, a frame its connection idle      Plugin.Close
//	                   on a user pool while                          (tasks.wait)
//	                   draining
//
// Timers: the janitor's (janitor.go), armed while the plugin has
// connections or parked goroutines, which trims the parked goroutines and
// sheds quiet connections' reply buffers once a second (Plugin.Close stops
// it and waits for a look under way); a connection's frame-gap timer
// (stopped when the missing frame arrives or the connection closes); an
// entry's deadline timer, armed only when its handler asks for Done
// (stopped when the entry ends). With WithIdleMemoryRelease, the release
// timer (internal/idlemem's Watch), armed by a frame and ending once it
// has released the memory; Plugin.Close stops it.
package batchserver
