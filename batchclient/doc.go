// Package batchclient is the client half of rpcxbatch: calls, casts and
// sends from any number of goroutines are queued per server and written
// as batch frames over a small pool of TCP connections ("lanes"), and the
// server's reply frames are handed back call by call. A server without the
// batch plugin is reached over plain rpcx instead, with the same API.
//
// # Switching over
//
// A service that uses rpcx's XClient changes one line: client.NewXClient
// becomes NewXClient, with the same arguments (batch options may follow).
// Call sites, selectors, fail modes, client plugins and discovery stay
// rpcx's. The server adds batchserver.New (one line). See
// ExampleNewXClient.
//
// # The direct Client
//
// New returns a Client that addresses servers by host:port: Call waits for
// the reply, Go returns rpcx's *client.Call, Cast runs a method without a
// reply, Send delivers bytes to a send handler (in order per WithKey
// key); Info, Start, Stop and Close manage the connections. See
// ExampleClient_Call and ExampleClient_Send.
//
// # Options
//
// The defaults suit most uses. Those people change: WithLaneRange and
// WithLanes (lanes per server: by default they follow the load, from one
// up to the pool the server announces), WithQueueLimits and WithOverflow
// (how much a lane queues, and what a caller meets when it is full),
// WithHeartbeat (how soon a silent peer is given up), WithDialTimeout,
// WithTLS and WithAuth. FromRPCX maps an rpcx client.Option onto them, as
// NewXClient does.
//
// # Internals
//
// Layers, each calling only the one below it:
//
//   - client.go: the Client API (Call, Go, Cast, Send, Info, Start, Stop,
//     Close) over a table of peers; route picks a lane or a plain client.
//   - peer.go, lanepool.go, plaindial.go, redial.go, drain.go: one peer
//     per address, a state machine (connecting, batch, plain, down,
//     stopped, forgotten) run by one goroutine that connects the pool of
//     lanes, grows and shrinks it with the load (lanepool.go),
//     falls back to plain rpcx, reprobes and forgets. A peer holds no
//     pointer to the Client: peerenv.go hands it a peerEnv value (the
//     options it reads, its instruments, the round-robin counter it
//     shares, its lane.Config and dial.Dialer from laneconfig.go, and the
//     Client's hooks as function values: forget, pushLost, stopCause,
//     the drain marks, the plain client's constructor).
//   - internal/dial: one lane connection: dial, TLS, and the lane
//     handshake.
//   - internal/lane: one lane per connection: the queue and its
//     admission bounds, the writer that takes the queue into frames, the
//     reader that matches replies to the pending table, the heartbeat that
//     judges the peer alive. A lane holds no pointer to the Client.
//   - xclient.go, xclient_drain.go, bidirectional.go, push.go,
//     resmeta.go, rpcxoption.go: the drop-in rpcx XClient (discovery
//     rewrite, server push, response metadata, rpcx's options).
//   - options.go, errors.go, metrics.go: configuration, error values
//     (those a lane makes are package lane's, exported here under the
//     same names), go-metrics instruments.
//
// # Goroutines
//
//	goroutine          started by          stopped by              waited for by
//	peer.run, one per  newPeer: first use  close(peer.stop) (Stop,  peer.shutdown
//	address            of an address, or   Close); ends itself once (<-done), from
//	                   Start               down and unused          Stop and Close
//	lane writer and    lane.New, from      Lane.Close from peer.run Lane.Close (its wg),
//	reader, two per    peer.connect or     (Stop, Close, a lost     from peer.run and
//	lane (see package  lanePool.grow after lane), CloseRetired, or  drainPool, or
//	internal/lane)     a handshake         the lane's own failure   CloseRetired
//	dial stop watcher  dial.Dialer.Dial,   the dial returning, or   nobody: it ends
//	                   one per dial        peer.stop                with the dial
//	plain dial         usePlain or         its connect returning;   the slot's Close,
//	(plainconn.Slot)   stoppedPlain, when  Stop and Close close the from Stop, Start
//	                   no connect runs     slot, which cancels it   and Close
//	plainGo            Go, for a call on   its rpcx call ending or  the caller, on
//	                   the plain path      its context              call.Done
//	peer shutdown      Close, one per peer peer.shutdown returning  Close (WaitGroup)
//	discovery forward  the first           stopForwarding           stopForwarding
//	                   WatchService of a   (XClient.Close)          (<-done)
//	                   drop-in XClient
//
// Timers and context.AfterFunc callbacks run on goroutines of their own: a
// Go call's context watch (stopped when the call completes), a dial's
// interrupt, and retirePlain, ReprobePlain after a plain peer found the
// plugin, which closes the old plain client once no call uses it. rpcx's
// own plain clients (the plain fallback and stopped addresses, both held
// in internal/plainconn slots) run rpcx's goroutines; Stop
// and Close close those clients.
//
// # Locks
//
// Client.mu guards the address tables (peers, stopped); pushTable.mu the
// push channels (the lanes' readers take it shared); drainSet.mu the set
// of draining addresses. A peer's plain client is an internal/plainconn
// slot, which guards it with a lock of its own. Each is commented where
// it is declared with what it guards. A lane's own locks are package
// lane's; the Client never takes them.
package batchclient
