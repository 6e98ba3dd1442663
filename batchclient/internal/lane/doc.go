// Package lane is one connection of a batch client to a batch server: a
// queue that callers put entries on, one writer goroutine that takes the
// queue into batch frames (a caller of Call that finds the lane quiet
// writes its own frame instead: one owner of the socket at a time), one
// reader goroutine that matches the server's reply frames to the calls
// waiting in the pending table, and the windows and heartbeats that keep
// both sides bounded and alive. A lane gets everything it reads from its
// client as a Config value (options, metrics, hooks) and never calls back
// into the client except through those hooks.
//
// docs/architecture.md lists its files, its goroutines and its locks.
package lane
