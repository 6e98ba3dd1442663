package codec

import (
	"math"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCreditBytesRoundTrip(t *testing.T) {
	for _, b := range []uint64{0, 1, 127, 128, 1 << 20, math.MaxUint64} {
		inc, n, got, err := DecodeCreditBytes(AppendCreditBytes(nil, 0xfeed, 3, b))
		require.NoError(t, err)
		assert.Equal(t, [3]uint64{0xfeed, 3, b}, [3]uint64{inc, n, got})
	}
	// The old form reads as a credit of no bytes.
	inc, n, b, err := DecodeCreditBytes(AppendCredit(nil, 9, 300))
	require.NoError(t, err)
	assert.Equal(t, [3]uint64{9, 300, 0}, [3]uint64{inc, n, b})

	valid := AppendCreditBytes(nil, 7, 300, 1<<20)
	for i := 0; i < len(valid); i++ {
		_, _, _, err := DecodeCreditBytes(valid[:i])
		require.ErrorIs(t, err, ErrMalformed, "prefix %d", i)
	}
	_, _, _, err = DecodeCreditBytes(append(valid, 0))
	require.ErrorIs(t, err, ErrMalformed)
	_, _, _, err = DecodeCreditBytes(append([]byte{0x95}, valid[1:]...))
	require.ErrorIs(t, err, ErrMalformed, "five fields")
	_, _, _, err = DecodeCreditBytes(append([]byte{0x94, 0x02}, valid[2:]...))
	require.ErrorIs(t, err, ErrVersion)
	// A client that knows only the old form refuses the new one: the
	// server sends it only to lanes that announced MetaByteCredits.
	_, _, err = DecodeCredit(valid)
	require.ErrorIs(t, err, ErrMalformed)
}

func TestWindowBytesOf(t *testing.T) {
	assert.Equal(t, 0, WindowBytesOf(nil), "an old server grants none")
	for v, want := range map[string]int{"": 0, "x": 0, "-5": 0, "0": 0, "1": 1, strconv.Itoa(8 << 20): 8 << 20} {
		assert.Equal(t, want, WindowBytesOf(map[string]string{MetaWindowBytes: v}), "%q", v)
	}
}
