// Package dial opens the connections of a batch client's lanes: it dials
// the server (with TLS when configured), and runs the lane handshake, an
// ordinary rpcx request that asks the server for its batch parameters
// (frame and batch caps, windows, pool size, incarnation) and that a
// plain rpcx server answers with "can't find service"
// (ErrNoBatchService). A Dialer gets the client's options as values.
//
// # Goroutines
//
//	goroutine         started by        stopped by                  waited for by
//	stop watcher,     Dialer.Dial       Dial returning, or stop     nobody: it ends
//	one per Dial                        closing (it cancels the     with Dial
//	                                    dial's context)
//
// The handshake's interruption is a context.AfterFunc that sets a past
// deadline on the connection; Dial stops it before it returns.
package dial
