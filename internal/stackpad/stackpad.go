package stackpad

// Size is the stack a padded goroutine keeps in use.
const Size = 8 << 10

// Pad is a stack-resident block of Size bytes.
type Pad [Size]byte

// Touch keeps pad live; it does not let pad escape to the heap.
//
//go:noinline
func Touch(pad *Pad) { pad[0]++ }
