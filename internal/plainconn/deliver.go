package plainconn

import (
	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/log"
)

// Deliver completes call on its Done channel without ever blocking, as
// rpcx's Call.done does: a channel with no room drops the completion, with
// rpcx's debug line. A Go that fails before it sends (no connection) uses
// it, so a caller's full shared channel never blocks the caller.
func Deliver(call *client.Call) bool {
	select {
	case call.Done <- call:
		return true
	default:
		log.Debug("rpc: discarding Call reply due to insufficient Done chan capacity")
		return false
	}
}
