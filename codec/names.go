package codec

// The reserved rpcx service path and methods that carry rpcxbatch traffic.
// A server without the batch plugin answers the handshake with rpcx's own
// "can't find service" error, which is how a client learns to fall back.
const (
	// ServicePath is the reserved rpcx service path of the batch service.
	ServicePath = "__rpcxbatch"
	// MethodHandshake asks a server for its batch parameters (request/response).
	MethodHandshake = "Handshake"
	// MethodBatch carries a batch frame from a client lane (oneway).
	MethodBatch = "Batch"
	// MethodReply carries a reply frame from a server connection (server-pushed, oneway).
	MethodReply = "Reply"
	// MethodCredit hands window back for finished casts and sends (server-pushed, oneway).
	MethodCredit = "Credit"
	// MethodFence, as the method of a call entry on ServicePath, asks the
	// server to answer (an empty reply) once it has run every send entry
	// the lane wrote before it; its calls and casts before it have all
	// started by then. A lane sends one when its keys move to another lane
	// (batchclient's lane sizing). A server before this method answers it
	// with an error, and the lane then judges by its credits.
	MethodFence = "Fence"
)

// Registry metadata keys. A server advertised through rpcxbatch's register
// plugin wrapper carries MetaBatch=1 and its pool size in the service
// metadata, so a client knows it is a batch peer before it connects; a
// server advertised with MetaBatch=0 is used over plain rpcx without a probe.
const (
	// MetaBatch is "1" for a batch peer, "0" for a server known to be plain.
	MetaBatch = "rpcxbatch"
	// MetaPoolSize is the pool size the server asks clients to open.
	MetaPoolSize = "rpcxbatch_pool"
	// MetaMaxFrame, in a handshake request's metadata, is the largest frame
	// the client reads; the server keeps its reply frames within it.
	MetaMaxFrame = "rpcxbatch_max_frame"
)
