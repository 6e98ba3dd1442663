package batchserver

// Server push on the batch path (rpcx's bidirectional mode).
//
// A handler running a batched call or cast finds under
// server.RemoteConnContextKey the connection its frame came in on: the
// lane of the client that made the call, the very net.Conn rpcx accepted
// (so it compares equal to what PostConnAccept plugins and
// Server.ActiveClientConn saw). Server.SendMessage on it writes one rpcx
// message with one Write, which the client's lane reader hands to the
// channel its XClient registered (batchclient.NewBidirectionalXClient). A
// connection belongs to one client process and one server incarnation: a
// push can only reach the client whose call it answers, and a connection
// closed by a restart or a lost lane refuses it (Go's closed net.Conn
// never writes to a reused descriptor).
//
// Such a push shares the connection with this plugin's reply writer
// (conn.writeFrame) and with rpcx's own responses. Each of them writes a
// whole message with a single Write, and Go serialises Writes on one
// connection: internal/poll's FD.Write holds the descriptor's write lock
// for the whole call, looping until every byte is written or an error
// occurs; crypto/tls's Conn.Write holds its output lock likewise. So one
// message's bytes are never interleaved with another's.
//
// A Write can still end early on an error, and then a message is cut
// short. The plugin bounds its own writes with a write deadline, which
// applies to every Write on the descriptor, a push waiting for its turn
// included: a client that stops reading for WriteTimeout may leave half a
// push on the wire. The reply writer then closes the connection before it
// clears its deadline, so no later message is written after the cut one
// (with the deadline passed, every Write fails without writing) and the
// client sees the connection end, not a corrupt message.
//
// rpcx's own server option WithWriteTimeout sets deadlines of its own on
// the same connection for its responses and heartbeats, and rpcx does not
// close a connection after a failed write; a push cut short by one of
// those is rpcx's case, the same on a plain connection.
