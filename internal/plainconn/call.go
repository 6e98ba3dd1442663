package plainconn

import (
	"context"

	"github.com/smallnest/rpcx/client"

	"github.com/rpcxbatch/rpcxbatch/internal/resmeta"
)

// ResMeta says whether Call fills the caller's response-metadata map.
type ResMeta bool

const (
	// FillResMeta fills the map at share.ResMetaDataKey in the call's
	// context as rpcx's Client.Call does (resmeta.Fill).
	FillResMeta ResMeta = true
	// NoResMeta leaves that map alone, for a caller whose contexts may
	// share one map among calls running at once.
	NoResMeta ResMeta = false
)

// Call runs servicePath.serviceMethod over pc and waits for its reply or
// for ctx to end, when it returns ctx's error. It waits on rpcx's Go
// rather than using its Call: in rpcx v1.9.4, Call races with its own
// send when the context ends mid-call (call reads the sequence number
// send is still writing). The reply is decoded into a copy (ReplyCopy),
// so that a reply arriving after ctx ended is not written into reply once
// Call has returned; such a call completes when its reply comes or its
// connection closes. rpcx encodes args on a goroutine of its own, possibly
// after Call returned on ctx's end: a caller that may change them then
// hands Call what PreEncode returns.
func Call(ctx context.Context, pc *client.Client, servicePath, serviceMethod string, args, reply any, meta ResMeta) error {
	dst, commit := ReplyCopy(ctx, reply)
	call := pc.Go(ctx, servicePath, serviceMethod, args, dst, make(chan *client.Call, 1))
	select {
	case <-call.Done:
		if err := ctx.Err(); err != nil {
			// Both ready: the caller's context wins, so that a call whose
			// context had already ended fails with it, as rpcx's caller
			// sees it (its select meets the ended context at once, long
			// before a reply), even when this goroutine was not run
			// until the reply was in.
			return err
		}
		commit()
		if meta {
			resmeta.Fill(ctx, call.ResMetadata, pc.Conn)
		}
		return call.Error
	case <-ctx.Done():
		return ctx.Err()
	}
}
