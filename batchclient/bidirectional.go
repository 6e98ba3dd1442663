package batchclient

import (
	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/protocol"
)

// NewBidirectionalXClient is the drop-in for rpcx's
// client.NewBidirectionalXClient: NewXClient's XClient, whose servers'
// pushes (Server.SendMessage from a handler, on the connection of the call
// it runs) arrive on serverMessageChan with the same *protocol.Message
// fields as over plain rpcx, whether the server has the batch plugin (the
// push travels on the lane the call came on) or not (rpcx's own client
// delivers it). A full channel drops the message with rpcx's warning
// (counted in errors.push_dropped), or, with option.BidirectionalBlock,
// holds up that lane's reader until there is room; a lost lane pool sends
// one message of status Error, as rpcx does for a lost connection.
//
// The XClient owns its Client, so its lanes, and the pushes on them, are
// its alone. XClients sharing a Client (NewXClientWith) share its lanes:
// there, register a channel on the Client (Client.RegisterServerMessageChan)
// and it receives the pushes of every call to that address, whichever
// XClient made it.
func NewBidirectionalXClient(servicePath string, failMode client.FailMode, selectMode client.SelectMode, discovery client.ServiceDiscovery, option client.Option, serverMessageChan chan<- *protocol.Message, opts ...Option) client.XClient {
	return newOwnedXClient(servicePath, failMode, selectMode, discovery, option, serverMessageChan, opts)
}
