package batchclient

import "github.com/smallnest/rpcx/protocol"

// SerializeType returns the codec the client encodes arguments and
// decodes replies with (WithSerializeType; msgpack by default). A
// group.Group copies a call's arguments with it.
func (c *Client) SerializeType() protocol.SerializeType { return c.opts.SerializeType }
