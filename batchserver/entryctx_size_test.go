package batchserver

import (
	"testing"
	"unsafe"
)

// TestEntryCtxSizeClass: every entry allocates one entryCtx, so its size
// class is bytes per entry for the collector to pace on. At 192 bytes it
// fits the 192-byte class; one more word puts it in the 208-byte one (as
// the old layout, 200 bytes with two lone bools, did).
func TestEntryCtxSizeClass(t *testing.T) {
	if n := unsafe.Sizeof(entryCtx{}); n > 192 {
		t.Fatalf("entryCtx is %d bytes, over the 192-byte size class: pack its small fields together, or move one out", n)
	}
}
