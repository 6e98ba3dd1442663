package lane

import (
	"bytes"
	"io"
	"testing"
)

// The reader's buffer grows and shrinks between messages without losing a
// byte: a message read through the small buffer that left the next ones
// buffered, then a quiet spell at once (a heartbeat's answer in the same
// read), must still hand over every byte that followed.
func TestReadBufKeepsEveryByte(t *testing.T) {
	var stream bytes.Buffer
	for i := range 3 * busyReadBuf {
		stream.WriteByte(byte(i * 7))
	}
	want := append([]byte(nil), stream.Bytes()...)
	rb := newReadBuf(&stream)
	var got []byte
	chunk := make([]byte, 100)
	for step := 0; ; step++ {
		n, err := io.ReadFull(rb.br, chunk)
		got = append(got, chunk[:n]...)
		if err != nil {
			break
		}
		rb.read(n) // bytes are left in the buffer: it grows
		if step%3 == 0 {
			rb.quiet() // and at once a quiet spell
		}
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("read %d bytes, %d sent; first difference at %d", len(got), len(want), firstDiff(got, want))
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
