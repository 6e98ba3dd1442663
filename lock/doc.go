// Package lock is a distributed lock manager that rides the rpcxbatch
// transport: the Go counterpart of the Erlang library elock.
//
// A Node is attached to an rpcx server (its lock service goes through the
// batch plugin like any other service) and to a Transport, normally a
// *batchclient.Client, for reaching the other nodes. A Holder, the stand-in
// for an Erlang process, is an object with a context: it takes Shared or
// Exclusive locks on string keys, on its own node or on a list of nodes, in
// one call for one or many keys, and everything it holds is released on
// every node when it is closed or its context ends.
//
// Locally a lock is a row in a sharded table. Taking a free key is one
// acquisition of the key's shard mutex (a single compare-and-swap when the
// shard is not contended) around a map insert: there is no central locker
// goroutine. Each row carries elock's ticket counter; ticket 1 means the
// key was free and the caller holds it at once. A contended key gets a
// manager, its queue in ticket order, for as long as it is contended.
// Grants follow ticket order; a Shared request joins the current shared
// holders at once only while nobody waits, so a stream of readers cannot
// starve a writer.
//
// A request on several nodes asks them in one order that every node uses
// (sorted by address): the first node alone, then the rest at once. It
// keeps what the granted nodes gave while the rest answer, and releases
// everything if any node fails: all or nothing. Waiting on the first node
// while holding nothing for the request means two requests for the same
// keys cannot each be granted on one node and wait on the other.
//
// A release of keys held on other nodes is immediate here and travels
// to the other nodes in the background (outbox.go). When nobody waited
// for the keys here, it lingers for Config.ReleaseLinger first: the
// holder's next request to that node carries its releases
// (AcquireArgs.Released, or just ReleasedAll when it holds nothing there
// any more) and the message is then not sent, so a holder that locks and
// releases in a loop costs the other node one message per lock.
//
// Nothing is dropped while the other node answers, however fast holders
// release there: a holder's releases to one node wait merged, one entry
// in that node's outbox per holder (relbox.go), and go as one Release
// when the sender has room; a request or the holder's Drop there
// supersedes them. The withdrawals of its failed requests there wait in
// the same entry, as one Abort for every request since its last success
// there. So what waits is bounded by what the holders held there and by
// the holders, not by how fast they release or fail. A message is given up (Stats.Undelivered) only when its node has
// not acknowledged it after giveUpAfter (30 s) of retries, and the other
// node drops the locks of a node it cannot reach for NodeTimeout by
// itself, or when this node closes (it tries once).
//
// A holder's locks on another node rest on a lease (lease.go): valid
// for NodeTimeout - LeaseMargin from the sending of the last call that
// node answered, while that node drops them no sooner than NodeTimeout
// after it last heard from this one (heard.go). When the lease runs out
// the holder is told (Holder.Lost, Holder.Context, ErrLockLost) before
// the other node can grant its locks to someone else. Every grant
// carries a fencing token that grows for its key on its node, across
// restarts too (token.go).
//
// # Goroutines
//
//	goroutine           started by            stopped by               waited for by
//	peer watch          NewNode, with a       Node.Close (its context) Node.Close (wg)
//	(watchPeers)        Transport
//	liveness ping, one  watchPeers, each      the ping ending (at most watchPeers
//	per origin node and round                 NodeTimeout/4), Close
//	per node with a
//	running lease
//	peer sender, one    castTo or send, the   Node.Close (its context) Node.Close (wg;
//	per peer: probes,   first message to      or 4 × NodeTimeout idle  it waits up to
//	verdicts and the    that peer                                      NodeTimeout for the
//	one-way messages                                                   one-way messages
//	(Release, Abort,                                                   first)
//	Drop, outbox.go)
//	one call in flight  the peer sender, only its completion           Node.Close (wg)
//	(at most 64 per     over a Transport      (within NodeTimeout)
//	peer)               without Go
//	remote request, one Service.Acquire       its verdict (grant,      Node.Close (wg)
//	per Acquire of      (goOwned)             ctx, Abort, Drop, Close)
//	another node's                            then one Answer cast
//	holder
//	request, one per    LockOn, when it asks  its node answering; the  LockOn, which
//	node asked          two or more nodes at  call withdraws (cancel)  collects every
//	                    once (3+ nodes; one   on failure or Close      answer
//	                    node is asked in the
//	                    caller's goroutine)
//
// A remote request that must wait is answered "queued" at once, so it
// holds no rpcx handler (nor a worker of server.WithPool's pool); the
// holder's node waits for its Answer, polling Status every NodeTimeout/2.
//
// Timers: a peer sender's idle, sweep and retry timers (the retry timer
// also wakes it when the first lingering release is due) and the deadline
// of its calls' shared context (stopped with the sender); a queued
// request's deadlock probe (stopped when the wait ends),
// the Status ticker of a remote wait (stopped when it ends)
// and a Holder's context.AfterFunc that closes it when its context ends
// (stopped by Holder.Close), and one timer per lease on another node,
// that tells its holders when it runs out (stopped by Node.Close).
package lock
