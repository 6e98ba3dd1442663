// Package dial opens the connections of a batch client's lanes: it dials
// the server (with TLS when configured), and runs the lane handshake, an
// ordinary rpcx request that asks the server for its batch parameters
// (frame and batch caps, windows, pool size, incarnation) and that a
// plain rpcx server answers with "can't find service"
// (ErrNoBatchService). A Dialer gets the client's options as values.
//
// A Dial's stop watcher and handshake interruption end with the Dial
// (docs/architecture.md).
package dial
