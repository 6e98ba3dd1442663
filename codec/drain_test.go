package codec

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDrainRoundTrip(t *testing.T) {
	for _, inc := range []uint64{0, 1, 0xfeed, math.MaxUint64} {
		got, err := DecodeDrain(AppendDrain(nil, inc))
		require.NoError(t, err)
		assert.Equal(t, inc, got)
	}
	valid := AppendDrain(nil, 0xfeedface)
	for i := 0; i < len(valid); i++ {
		_, err := DecodeDrain(valid[:i])
		require.ErrorIs(t, err, ErrMalformed, "prefix %d", i)
	}
	_, err := DecodeDrain(append(valid, 0))
	require.ErrorIs(t, err, ErrMalformed)
	bad := append([]byte{0x92, 0x02}, valid[2:]...)
	_, err = DecodeDrain(bad)
	require.ErrorIs(t, err, ErrVersion)
}
