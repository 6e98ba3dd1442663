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
)
