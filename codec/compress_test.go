package codec

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"strings"
	"testing"

	"github.com/smallnest/rpcx/protocol"
	"github.com/stretchr/testify/require"
)

// text returns about n bytes of compressible text, varied by seed.
func text(seed, n int) []byte {
	var sb strings.Builder
	for i := 0; sb.Len() < n; i++ {
		fmt.Fprintf(&sb, "record %d of call %d: status=ok, region=eu-west, retries=0\n", i%100, seed)
	}
	return []byte(sb.String()[:n])
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

// compressedMessage builds a finished message with payload and compresses
// it with ct.
func compressedMessage(prefix, payload []byte, ct protocol.CompressType) []byte {
	var h protocol.Header
	h[0] = protocol.MagicNumber()
	h.SetMessageType(protocol.Request)
	h.SetOneway(true)
	b, m := StartMessage(prefix, &h, ServicePath, MethodBatch, map[string]string{"k": "v"})
	b = append(b, payload...)
	FinishMessage(b, m)
	return CompressMessage(b, m, ct)
}

func TestCompressMessageRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name       string
		payload    []byte
		ct         protocol.CompressType
		compressed bool
	}{
		{"compressible above the threshold", text(1, 64<<10), protocol.Gzip, true},
		{"at the threshold", text(2, CompressThreshold), protocol.Gzip, false},
		{"one byte above", text(3, CompressThreshold+1), protocol.Gzip, true},
		{"incompressible", randomBytes(64 << 10), protocol.Gzip, false},
		{"none", text(4, 64<<10), protocol.None, false},
		{"unknown type", text(5, 64<<10), protocol.CompressType(7), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A message before it in the buffer stays as it is.
			first := compressedMessage(nil, text(0, 4096), protocol.Gzip)
			firstCopy := bytes.Clone(first)
			b := compressedMessage(first, tc.payload, tc.ct)
			require.Equal(t, firstCopy, b[:len(firstCopy)])
			r := bytes.NewReader(b)
			_, _, err := ReadMessage(r, 1<<20, nil)
			require.NoError(t, err)
			msg, _, err := ReadMessage(r, 1<<20, nil)
			require.NoError(t, err)
			require.Equal(t, tc.payload, msg.Payload)
			require.Equal(t, "v", msg.Metadata["k"])
			require.Equal(t, 0, r.Len())
			wire := len(b) - len(firstCopy)
			if tc.compressed {
				require.Equal(t, tc.ct, msg.Header.CompressType())
				require.Less(t, wire, len(tc.payload))
			} else {
				require.Equal(t, protocol.None, msg.Header.CompressType())
				require.Greater(t, wire, len(tc.payload))
			}
			// rpcx's own decoder reads it too (rpcx's server decodes a
			// batch frame with it).
			rm := protocol.NewMessage()
			require.NoError(t, rm.Decode(bytes.NewReader(b[len(firstCopy):])))
			require.Equal(t, tc.payload, rm.Payload)
		})
	}
}

// A compressed message that unpacks beyond the cap is refused without
// unpacking it all: 64 MiB of zeros weigh about 64 KiB gzipped.
func TestCompressedMessageBoundedByCap(t *testing.T) {
	b := compressedMessage(nil, make([]byte, 64<<20), protocol.Gzip)
	require.Less(t, len(b), 1<<20)
	_, _, err := ReadMessage(bytes.NewReader(b), 1<<20, nil)
	require.ErrorIs(t, err, ErrFrameTooLarge)
}
