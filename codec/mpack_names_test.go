package codec

import "github.com/rpcxbatch/rpcxbatch/internal/mpack"

// The tests name the frame writer's functions as they were named when the
// codec had its own; they are internal/mpack's now (appendInt, the frames'
// own integer form, is still the codec's).
func appendUint(b []byte, v uint64) []byte  { return mpack.AppendUint(b, v) }
func appendStr(b []byte, s string) []byte   { return mpack.AppendStr(b, s) }
func appendBin(b []byte, p []byte) []byte   { return mpack.AppendBin(b, p) }
func appendArrayLen(b []byte, n int) []byte { return mpack.AppendArrayLen(b, n) }
func appendMapLen(b []byte, n int) []byte   { return mpack.AppendMapLen(b, n) }
