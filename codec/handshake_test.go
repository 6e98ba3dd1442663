package codec

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func sampleHandshake() Handshake {
	return Handshake{Version: Version, PoolSize: 4, BatchCap: 256, MaxFrameBytes: 4 << 20, Incarnation: 0x1234567890abcdef, Window: 8192}
}

func TestHandshakeRoundTrip(t *testing.T) {
	h := sampleHandshake()
	got, err := DecodeHandshake(AppendHandshake(nil, &h))
	require.NoError(t, err)
	assert.Equal(t, h, got)
}

func TestHandshakeRoundTripIntegers(t *testing.T) {
	for _, v := range uintValues {
		t.Run(fmt.Sprint(v), func(t *testing.T) {
			h := sampleHandshake()
			h.Incarnation = v
			if v > 0 && v <= math.MaxInt {
				h.PoolSize, h.BatchCap, h.MaxFrameBytes, h.Window = int(v), int(v), int(v), int(v)
			}
			got, err := DecodeHandshake(AppendHandshake(nil, &h))
			require.NoError(t, err)
			assert.Equal(t, h, got)
		})
	}
}

func TestHandshakeAppendsToPrefix(t *testing.T) {
	h := sampleHandshake()
	b := AppendHandshake([]byte("xyz"), &h)
	require.Equal(t, "xyz", string(b[:3]))
	got, err := DecodeHandshake(b[3:])
	require.NoError(t, err)
	assert.Equal(t, h, got)
}

func TestHandshakeErrors(t *testing.T) {
	mod := func(f func(h *Handshake)) []byte {
		h := sampleHandshake()
		f(&h)
		return AppendHandshake(nil, &h)
	}
	valid := mod(func(*Handshake) {})
	cases := []struct {
		name  string
		frame []byte
		want  error
	}{
		{"zero pool size", mod(func(h *Handshake) { h.PoolSize = 0 }), ErrMalformed},
		{"zero batch cap", mod(func(h *Handshake) { h.BatchCap = 0 }), ErrMalformed},
		{"zero max frame bytes", mod(func(h *Handshake) { h.MaxFrameBytes = 0 }), ErrMalformed},
		// A negative int is written as a huge uint64, beyond any int.
		{"negative pool size", mod(func(h *Handshake) { h.PoolSize = -1 }), ErrMalformed},
		{"version 0", mod(func(h *Handshake) { h.Version = 0 }), ErrVersion},
		{"version 2", mod(func(h *Handshake) { h.Version = 2 }), ErrVersion},
		{"version max", mod(func(h *Handshake) { h.Version = math.MaxUint64 }), ErrVersion},
		{"trailing byte", append(append([]byte(nil), valid...), 0), ErrMalformed},
		{"zero window", mod(func(h *Handshake) { h.Window = 0 }), ErrMalformed},
		// The sample's window, 8192, is the last three bytes (uint16).
		{"five fields", append([]byte{0x95}, valid[1:len(valid)-3]...), ErrMalformed},
		{"seven fields", append(append([]byte{0x97}, valid[1:]...), 1), ErrMalformed},
		{"not an array", []byte{0x05}, ErrMalformed},
		{"string field", []byte{0x96, 0x01, 0xa1, 'x', 0x01, 0x01, 0x01, 0x01}, ErrMalformed},
		{"empty", nil, ErrMalformed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := DecodeHandshake(c.frame)
			require.ErrorIs(t, err, c.want)
		})
	}
}

func TestCreditRoundTrip(t *testing.T) {
	for _, n := range []uint64{0, 1, 127, 128, 1 << 20, math.MaxUint64} {
		inc, got, err := DecodeCredit(AppendCredit(nil, 0xfeed, n))
		require.NoError(t, err)
		assert.Equal(t, uint64(0xfeed), inc)
		assert.Equal(t, n, got)
	}
	valid := AppendCredit(nil, 7, 300)
	for i := 0; i < len(valid); i++ {
		_, _, err := DecodeCredit(valid[:i])
		require.ErrorIs(t, err, ErrMalformed, "prefix %d", i)
	}
	_, _, err := DecodeCredit(append(valid, 0))
	require.ErrorIs(t, err, ErrMalformed)
	bad := append([]byte{0x93, 0x02}, valid[2:]...)
	_, _, err = DecodeCredit(bad)
	require.ErrorIs(t, err, ErrVersion)
}
