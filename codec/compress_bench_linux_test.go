package codec

import (
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/smallnest/rpcx/protocol"
)

// BenchmarkCompressFrame compares compressing each entry's payload above
// rpcx's threshold (as rpcx compresses each request) with compressing the
// whole frame once, for the same entries. The two alternate within each
// iteration, on one locked thread whose own CPU time is measured, so a
// busy machine (other processes, frequency changes) weighs on both alike:
// entry-cpu-ns/op and frame-cpu-ns/op are their CPU, entry-B/op and
// frame-B/op their bytes on the wire.
// Run: go test -run '^$' -bench CompressFrame -benchtime 20x ./codec/
func BenchmarkCompressFrame(b *testing.B) {
	cases := []struct {
		name    string
		n, size int
		random  bool
	}{
		{"50x100KiB-text", 50, 100 << 10, false},
		{"1000x200B-text", 1000, 200, false},
		{"16x32KiB-random", 16, 32 << 10, true},
	}
	for _, c := range cases {
		entries := make([]Entry, c.n)
		for i := range entries {
			p := text(i, c.size)
			if c.random {
				p = randomBytes(c.size)
			}
			entries[i] = Entry{Kind: KindCall, ID: uint64(i + 1), ServicePath: "Blob", ServiceMethod: "Echo", SerializeType: 3, Payload: p}
		}
		var h protocol.Header
		h[0] = protocol.MagicNumber()
		b.Run(c.name, func(b *testing.B) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			var perEntry, perFrame time.Duration
			var entryBuf, one, frameBuf []byte
			for b.Loop() {
				t0 := threadCPU()
				entryBuf = AppendBatchHeader(entryBuf[:0], 1, len(entries))
				for i := range entries {
					e := entries[i]
					if len(e.Payload) > CompressThreshold {
						// The payload compressed alone, as rpcx does.
						var m MessageMark
						one, m = StartMessage(one[:0], &h, "", "", nil)
						one = append(one, e.Payload...)
						FinishMessage(one, m)
						one = CompressMessage(one, m, protocol.Gzip)
						e.Payload = one[m.payloadLen+4:]
					}
					entryBuf = AppendEntry(entryBuf, &e)
				}
				t1 := threadCPU()
				var m MessageMark
				frameBuf, m = StartMessage(frameBuf[:0], &h, ServicePath, MethodBatch, nil)
				frameBuf = AppendBatchHeader(frameBuf, 1, len(entries))
				for i := range entries {
					frameBuf = AppendEntry(frameBuf, &entries[i])
				}
				FinishMessage(frameBuf, m)
				frameBuf = CompressMessage(frameBuf, m, protocol.Gzip)
				t2 := threadCPU()
				perEntry += t1 - t0
				perFrame += t2 - t1
			}
			b.ReportMetric(float64(perEntry)/float64(b.N), "entry-cpu-ns/op")
			b.ReportMetric(float64(perFrame)/float64(b.N), "frame-cpu-ns/op")
			b.ReportMetric(float64(len(entryBuf)), "entry-B/op")
			b.ReportMetric(float64(len(frameBuf)), "frame-B/op")
		})
	}
}

// threadCPU is the CPU time the calling thread has used.
func threadCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_THREAD, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
