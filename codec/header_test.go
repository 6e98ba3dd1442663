package codec

import (
	"testing"

	"github.com/smallnest/rpcx/protocol"
	"github.com/stretchr/testify/assert"
)

// OnewayHeader is the header rpcx itself builds for a oneway request with
// no serializer.
func TestOnewayHeaderIsRPCXs(t *testing.T) {
	m := protocol.NewMessage()
	m.SetMessageType(protocol.Request)
	m.SetOneway(true)
	m.SetSerializeType(protocol.SerializeNone)
	m.SetSeq(1234567)
	h := OnewayHeader(1234567)
	assert.Equal(t, *m.Header, h)
	assert.True(t, h.CheckMagicNumber())
	assert.True(t, h.IsOneway())
	assert.False(t, h.IsHeartbeat())
	assert.Equal(t, protocol.Request, h.MessageType())
	assert.Equal(t, uint64(1234567), h.Seq())
}
