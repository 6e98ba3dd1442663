package lane_test

import (
	"testing"

	"github.com/smallnest/rpcx/protocol"
	"github.com/stretchr/testify/assert"

	"github.com/rpcxbatch/rpcxbatch/batchclient/internal/lane"
	"github.com/rpcxbatch/rpcxbatch/codec"
)

// A burst of callers with 1 MiB byte payloads, after small entries (the
// guess admission goes by is the size of the entry last queued), is
// admitted only as far as the queue's bytes hold their payloads: a
// payload passed as it is has a size known before it is encoded. On the
// guess alone every caller was admitted (here up to the limit of 200),
// encoded its 1 MiB, and all but one let go of it: the client held up to
// 140 MiB beside a 2 MiB queue (batchserver's
// TestSlowHandlersHoldAtMostTheByteWindow/cast, under load).
func TestBurstOfLargeByteEntriesAdmittedWithinQueueBytes(t *testing.T) {
	const (
		queueBytes = 2 << 20
		small      = 60
		limit      = 200
	)
	payload := make([]byte, 1<<20)
	for _, tc := range []struct {
		name string
		st   protocol.SerializeType
		kind codec.Kind
		args any
		want int
	}{
		{"cast []byte", protocol.SerializeNone, codec.KindCast, payload, 1},
		{"cast *[]byte", protocol.SerializeNone, codec.KindCast, &payload, 1},
		{"call []byte", protocol.SerializeNone, codec.KindCall, payload, 1},
		{"send", protocol.MsgPack, codec.KindSend, payload, 1},
		{"half-queue payloads", protocol.SerializeNone, codec.KindCast, make([]byte, queueBytes/2-1024), 2},
	} {
		got := lane.AdmittedToEncode(queueBytes, small, tc.st, tc.kind, tc.args, limit)
		assert.Equal(t, tc.want, got, "%s: callers admitted to encode at once", tc.name)
	}
	// Beyond the queue: one entry larger than QueueBytes fits an empty
	// queue, as before.
	assert.Equal(t, 1, lane.AdmittedToEncode(queueBytes, small, protocol.SerializeNone, codec.KindCast, make([]byte, 3<<20), limit))
}
