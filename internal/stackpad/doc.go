// Package stackpad keeps long-lived goroutines' stacks from being shrunk.
//
// The garbage collector shrinks the stack of a goroutine that uses less
// than a quarter of it, and a goroutine parked between two pieces of work
// uses almost nothing: each collection halves its stack, and the next piece
// of work grows it back, copying it. A Pad declared in the loop's frame, and
// touched before and after the loop, keeps Size bytes of the stack in use
// for the goroutine's life, so the stack its work needs stays. A SmallPad
// keeps half as much, for goroutines kept by the thousand (the server's
// workers), where the pad's memory counts.
//
// It starts no goroutines.
package stackpad
