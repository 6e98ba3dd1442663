package codec

import "testing"

// benchEntries is a typical frame: 100 calls of a ~225-byte payload.
func benchEntries() []Entry {
	entries := make([]Entry, 100)
	for i := range entries {
		entries[i] = Entry{
			Kind:          KindCall,
			ID:            uint64(1000 + i),
			ServicePath:   "Arith",
			ServiceMethod: "Mul",
			SerializeType: 3,
			Payload:       pattern(225),
			TimeoutMicros: 5_000_000,
		}
	}
	return entries
}

// withServerTimeout marks entries as the drop-in XClient's are: rpcx's
// "__ServerTimeout" written from each one's timeout.
func withServerTimeout(entries []Entry) []Entry {
	for i := range entries {
		entries[i].ServerTimeout = true
	}
	return entries
}

func BenchmarkAppendBatch(b *testing.B) {
	b.Run("plain", func(b *testing.B) { benchAppendBatch(b, benchEntries()) })
	b.Run("server-timeout", func(b *testing.B) { benchAppendBatch(b, withServerTimeout(benchEntries())) })
}

func benchAppendBatch(b *testing.B, entries []Entry) {
	buf := encodeBatch(1, entries)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		buf = AppendBatchHeader(buf[:0], uint64(i), len(entries))
		for j := range entries {
			buf = AppendEntry(buf, &entries[j])
		}
	}
}

func BenchmarkDecodeBatch(b *testing.B) {
	b.Run("plain", func(b *testing.B) { benchDecodeBatch(b, benchEntries()) })
	b.Run("server-timeout", func(b *testing.B) { benchDecodeBatch(b, withServerTimeout(benchEntries())) })
}

func benchDecodeBatch(b *testing.B, entries []Entry) {
	frame := encodeBatch(1, entries)
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := DecodeBatch(frame, 0); err != nil {
			b.Fatal(err)
		}
	}
}
