package codec

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestUnrunRoundTrip(t *testing.T) {
	for _, ids := range [][]uint64{{}, {7}, {1, 2, math.MaxUint64}} {
		inc, got, err := DecodeUnrun(AppendUnrun(nil, 0xfeed, ids))
		require.NoError(t, err)
		assert.Equal(t, uint64(0xfeed), inc)
		assert.Equal(t, ids, got)
	}
	valid := AppendUnrun(nil, 0xfeedface, []uint64{3, 300, 70000})
	for i := 0; i < len(valid); i++ {
		_, _, err := DecodeUnrun(valid[:i])
		require.ErrorIs(t, err, ErrMalformed, "prefix %d", i)
	}
	_, _, err := DecodeUnrun(append(valid, 0))
	require.ErrorIs(t, err, ErrMalformed)
	bad := append([]byte{0x93, 0x02}, valid[2:]...)
	_, _, err = DecodeUnrun(bad)
	require.ErrorIs(t, err, ErrVersion)
	// A count the rest cannot hold allocates nothing.
	_, _, err = DecodeUnrun([]byte{0x93, byte(Version), 0x01, 0xdd, 0x7f, 0xff, 0xff, 0xff})
	require.ErrorIs(t, err, ErrMalformed)
}
