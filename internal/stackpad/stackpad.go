package stackpad

// Size is the stack a padded goroutine keeps in use.
const Size = 8 << 10

// Pad is a stack-resident block of Size bytes.
type Pad [Size]byte

// Touch keeps pad live; it does not let pad escape to the heap.
//
//go:noinline
func Touch(pad *Pad) { pad[0]++ }

// SmallSize is the stack a goroutine padded with a SmallPad keeps in use:
// for goroutines kept by the thousand (the server's workers), where each
// byte of pad is paid that many times over.
const SmallSize = 4 << 10

// SmallPad is a stack-resident block of SmallSize bytes.
type SmallPad [SmallSize]byte

// TouchSmall keeps pad live; it does not let pad escape to the heap.
//
//go:noinline
func TouchSmall(pad *SmallPad) { pad[0]++ }
