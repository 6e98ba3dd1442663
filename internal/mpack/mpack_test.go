package mpack

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// libBytes is what the library's encoder writes for one value.
func libBytes(t *testing.T, write func(*msgpack.Encoder) error) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := write(msgpack.NewEncoder(&buf)); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// Every writer writes what the library writes, at every form's
// boundaries.
func TestMatchesLibrary(t *testing.T) {
	for _, n := range []uint64{0, 127, 128, 255, 256, math.MaxUint16, math.MaxUint16 + 1, math.MaxUint32, math.MaxUint32 + 1, math.MaxUint64} {
		want := libBytes(t, func(e *msgpack.Encoder) error { return e.EncodeUint(n) })
		if got := AppendUint([]byte{1}, n)[1:]; !bytes.Equal(got, want) {
			t.Errorf("AppendUint(%d) = %x, library %x", n, got, want)
		}
	}
	for _, n := range []int64{0, 1, 127, 128, -1, -32, -33, math.MinInt8, math.MinInt8 - 1, math.MinInt16, math.MinInt16 - 1, math.MinInt32, math.MinInt32 - 1, math.MinInt64, math.MaxInt64} {
		want := libBytes(t, func(e *msgpack.Encoder) error { return e.EncodeInt(n) })
		if got := AppendInt(nil, n); !bytes.Equal(got, want) {
			t.Errorf("AppendInt(%d) = %x, library %x", n, got, want)
		}
	}
	for _, n := range []int{0, 31, 32, 255, 256, math.MaxUint16, math.MaxUint16 + 1} {
		s := strings.Repeat("x", n)
		want := libBytes(t, func(e *msgpack.Encoder) error { return e.EncodeString(s) })
		if got := AppendStr(nil, s); !bytes.Equal(got, want) {
			t.Errorf("AppendStr(len %d) differs from the library (first bytes %x, %x)", n, got[:min(len(got), 5)], want[:min(len(want), 5)])
		}
		p := []byte(s)
		want = libBytes(t, func(e *msgpack.Encoder) error { return e.EncodeBytes(p) })
		if got := AppendBin(nil, p); !bytes.Equal(got, want) {
			t.Errorf("AppendBin(len %d) differs from the library (first bytes %x, %x)", n, got[:min(len(got), 5)], want[:min(len(want), 5)])
		}
	}
	for _, n := range []int{0, 15, 16, math.MaxUint16, math.MaxUint16 + 1} {
		want := libBytes(t, func(e *msgpack.Encoder) error { return e.EncodeArrayLen(n) })
		if got := AppendArrayLen(nil, n); !bytes.Equal(got, want) {
			t.Errorf("AppendArrayLen(%d) = %x, library %x", n, got, want)
		}
		want = libBytes(t, func(e *msgpack.Encoder) error { return e.EncodeMapLen(n) })
		if got := AppendMapLen(nil, n); !bytes.Equal(got, want) {
			t.Errorf("AppendMapLen(%d) = %x, library %x", n, got, want)
		}
	}
}
