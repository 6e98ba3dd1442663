package batchclient

import (
	"context"

	"github.com/smallnest/rpcx/client"

	"github.com/rpcxbatch/rpcxbatch/internal/plainconn"
)

// An entry too large for a frame (its encoding above the smaller of both
// sides' MaxFrameBytes, lane.ErrTooLarge) is not refused: rpcx v1.9.4 sets
// no limit on a message by default, and moves it. A call or cast that
// large goes as a plain rpcx request on the peer's plain connection (the
// one SendRaw uses), exactly as rpcx would send it: rpcx's server reads it
// under rpcx's own limit (protocol.MaxMessageLength, as the user set it),
// runs its hooks, compresses and answers it as any plain request. The
// server's bound on frames stays what it is. Sends, which have no rpcx
// form, still fail with ErrTooLarge.

// callOversize makes a call (reply non-nil) or a cast (reply nil) that
// was too large for a frame as a plain rpcx request to addr.
func (c *Client) callOversize(ctx context.Context, addr, servicePath, serviceMethod string, args, reply any, st bool) error {
	pr, err := c.plainClient(ctx, addr)
	if err != nil {
		return err
	}
	return c.callPlain(ctx, pr, st, servicePath, serviceMethod, args, reply)
}

// goOversize starts call, too large for a frame, as a plain rpcx request
// to addr, and completes it as Go completes a call on the plain path.
func (c *Client) goOversize(ctx context.Context, addr string, call *client.Call, st bool) {
	pr, err := c.plainClient(ctx, addr)
	if err == nil {
		if st {
			ctx = withServerTimeout(ctx)
		}
		var args any
		if args, err = plainconn.PreEncode(c.opts.RPCX.SerializeType, call.Args); err == nil {
			plainGo(ctx, pr, call, args)
			return
		}
		pr.done()
	}
	call.Error = err
	plainconn.Deliver(call) // never blocks the caller, as rpcx's Call.done
}
