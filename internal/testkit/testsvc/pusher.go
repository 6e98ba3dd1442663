package testsvc

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strconv"

	"github.com/smallnest/rpcx/server"
)

// PushArgs asks Pusher.Push for N messages tagged Tag, each with a payload
// of at least Size bytes.
type PushArgs struct {
	N    int
	Tag  string
	Size int
}

// PushReply is Pusher.Push's answer: how many messages it pushed, and the
// tag it was given.
type PushReply struct {
	N   int
	Tag string
}

// PushPath and PushMethod address the messages Pusher pushes.
const (
	PushPath   = "Pusher"
	PushMethod = "Note"
)

// Pusher is a test service that pushes messages to its caller with rpcx's
// Server.SendMessage before it answers (rpcx's bidirectional mode).
type Pusher struct {
	S *server.Server
}

// Push sends args.N messages to the connection the call came in on, then
// answers. Message i has metadata {"i": i, "tag": args.Tag} and the payload
// PushPayload(args.Tag, i, args.Size).
func (p *Pusher) Push(ctx context.Context, args *PushArgs, reply *PushReply) error {
	conn, _ := ctx.Value(server.RemoteConnContextKey).(net.Conn)
	if conn == nil {
		return errors.New("testsvc: no connection in the context")
	}
	for i := 0; i < args.N; i++ {
		meta := map[string]string{"i": strconv.Itoa(i), "tag": args.Tag}
		if err := p.S.SendMessage(conn, PushPath, PushMethod, meta, PushPayload(args.Tag, i, args.Size)); err != nil {
			return err
		}
	}
	reply.N, reply.Tag = args.N, args.Tag
	return nil
}

// PushPayload is the payload of message i of a Push call: the tag, the
// index, and a filler of bytes that depend on both, to size bytes.
func PushPayload(tag string, i, size int) []byte {
	b := []byte(tag + "/" + strconv.Itoa(i) + "/")
	if len(b) < size {
		fill := byte('a' + (len(tag)+i)%26)
		b = append(b, bytes.Repeat([]byte{fill}, size-len(b))...)
	}
	return b
}
