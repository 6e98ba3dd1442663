package batchserver

// Server push on the batch path (rpcx's bidirectional mode): a handler of
// a batched call or cast finds under server.RemoteConnContextKey the very
// net.Conn rpcx accepted for its lane, and Server.SendMessage on it writes
// one rpcx message with one Write, which the lane's reader hands to the
// channel its XClient registered. A connection belongs to one client
// process and one server incarnation: a push reaches only the client
// whose call it answers, and a closed connection refuses it.
//
// Replies, pushes and rpcx's responses each write a whole message with one
// Write, which Go serialises per connection (internal/poll's and
// crypto/tls's write locks): messages never interleave. One cut short by
// the plugin's write deadline is followed by the connection's close,
// before the deadline is cleared, so the client sees the connection end,
// not a corrupt message (rpcx's own WithWriteTimeout is rpcx's case).
