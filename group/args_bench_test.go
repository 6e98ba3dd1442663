package group

import (
	"testing"

	"github.com/smallnest/rpcx/protocol"

	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// BenchmarkCopyArgs is what a group operation pays to own its arguments
// (see Group): one encode and one decode of the call's arguments, here
// Arith's two ints and ecall's 220-byte "data" payload. The argsCopy
// itself lives in the operation's spec, allocated anyway, so it is
// reused here.
func BenchmarkCopyArgs(b *testing.B) {
	for name, args := range map[string]any{"args": &testsvc.Args{A: 6, B: 7}, "data": testsvc.NewData(5)} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			var a argsCopy
			for i := 0; i < b.N; i++ {
				if err := a.take(protocol.MsgPack, args); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
