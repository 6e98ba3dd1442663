// Package lane is one connection of a batch client to a batch server: a
// queue that callers put entries on, one writer goroutine that takes the
// queue into batch frames (the socket's owner under load; a caller of
// Call that finds the lane quiet writes its own frame instead, see
// combine.go: one owner of the socket at a time), one reader
// goroutine that matches the server's reply frames to the calls waiting
// in the pending table, and the windows and heartbeats that keep both
// sides bounded and alive. A lane gets everything it reads from its
// client as a Config value (options, metrics, hooks) and never calls back
// into the client except through those hooks.
//
// Files, one job each:
//
//   - lane.go: the Lane type, New, failure (fail, Close) and what the
//     client reads of a lane (Conn, Handshake, Dead, Err, Draining).
//   - submit.go: Submit, one entry from admission to the queue.
//   - queue.go: admission (admit, enqueue, waitRoom), the entry window
//     (take, release) and the queue's byte bound.
//   - entry.go, encode.go: the pooled entries, the hand-over of a Call's
//     arguments to the writer (Deferred), the codec at the edges.
//   - writer.go, heartbeat.go, liveness.go: frames, heartbeats, and the
//     judgement that the peer froze.
//   - combine.go: flat combining, a quiet lane's caller writing its own
//     frame (on by default; SetCombining for tests), and the socket's ownership
//     (the writer or one caller).
//   - reader.go, pending.go: replies, credits, pushes; the pending table.
//   - bytewindow.go, drain.go: the server's byte window; its drain notice.
//
// # Goroutines
//
//	goroutine         started by        stopped by                     waited for by
//	writeLoop, one    New               fail closes dead (Close, a     Close (wg)
//	per lane                            write error, a frozen peer)
//	readLoop, one     New               fail closes the connection     Close (wg)
//	per lane                            (its read then errors)
//
// A caller of Go whose context has a Done channel gets a context.AfterFunc
// watch (Watch); it is stopped when the call completes (Finish) and never
// outlives the call. OnPush runs on the reader and may wait there for
// room (rpcx's BidirectionalBlock) until the lane dies.
//
// # Locks
//
// Lane.qmu guards the queue, the writer's entry window and the socket's
// ownership (see the Lane type for the exact list); the pending table is in shards, each with a
// mutex of its own for its pending calls and their watches. They are never
// held together: a caller takes qmu, lets go, then registers its call; the
// reader claims calls under the shards' locks alone, one shard at a time. No
// lock is held across a write or a read, nor across a hook but OnDrain,
// which runs under qmu so that no entry fails for the drain before the
// client knows of it (the client's drain set takes only its own lock).
package lane
