package reliability_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smallnest/rpcx/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchserver"
)

// Ledger echoes payloads and counts how often it saw each call id, so
// duplicates (a call run twice) show up on the server side.
type Ledger struct {
	mu   sync.Mutex
	seen []uint8
	dups atomic.Int64
}

// Echo records the id in the first 8 bytes and returns the payload.
func (l *Ledger) Echo(_ context.Context, in *[]byte, out *[]byte) error {
	if len(*in) < 12 {
		return fmt.Errorf("payload of %d bytes has no id and checksum", len(*in))
	}
	id := binary.BigEndian.Uint64(*in)
	l.mu.Lock()
	if id < uint64(len(l.seen)) {
		if l.seen[id] > 0 {
			l.dups.Add(1)
		}
		l.seen[id]++
	}
	l.mu.Unlock()
	*out = *in
	return nil
}

// payload builds call id's payload: the id, random bytes, and a CRC32 of
// the rest at the end. Sizes are log-uniform from 12 bytes to 64 KiB, so
// both the many small and the few large are well represented.
func payload(id uint64, rng *rand.Rand, fill *rand.ChaCha8) []byte {
	n := min(int(math.Exp(rng.Float64()*math.Log(64<<10-12)))+12, 64<<10)
	b := make([]byte, n)
	binary.BigEndian.PutUint64(b, id)
	fill.Read(b[8 : n-4])
	binary.BigEndian.PutUint32(b[n-4:], crc32.ChecksumIEEE(b[:n-4]))
	return b
}

// Every call gets back exactly its own payload, intact, exactly once: no
// mismatch, no duplicate, no loss. 100,000 calls in CI; 1,000,000 with
// RPCXBATCH_SOAK=1.
func TestIntegrity(t *testing.T) {
	calls := 100_000
	if soak() {
		calls = 1_000_000
	}
	ledger := &Ledger{seen: make([]uint8, calls)}
	addr, p := serve(t, server.NewServer(), func(s *server.Server, _ *batchserver.Plugin) {
		require.NoError(t, s.RegisterName("Ledger", ledger, ""))
	})
	c := newClient(t)
	connect(t, c, addr)

	const workers = 200
	var next atomic.Uint64
	var mismatches, failures atomic.Int64
	var firstErr atomic.Value
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 42))
			fill := rand.NewChaCha8([32]byte{byte(w), byte(w >> 8)})
			var out []byte
			for {
				id := next.Add(1) - 1
				if id >= uint64(calls) || ctx.Err() != nil {
					return
				}
				in := payload(id, rng, fill)
				out = out[:0]
				if err := c.Call(ctx, addr, "Ledger", "Echo", &in, &out); err != nil {
					failures.Add(1)
					firstErr.CompareAndSwap(nil, err)
					continue
				}
				n := len(out)
				if n != len(in) || n < 12 || binary.BigEndian.Uint64(out) != id ||
					binary.BigEndian.Uint32(out[n-4:]) != crc32.ChecksumIEEE(out[:n-4]) {
					mismatches.Add(1)
				}
			}
		}(w)
	}
	wg.Wait()
	elapsed := time.Since(start)

	missing := 0
	for _, n := range ledger.seen {
		if n == 0 {
			missing++
		}
	}
	t.Logf("integrity: %d calls (payloads 12 B to 64 KiB, log-uniform) in %v: %d mismatches, %d duplicates, %d lost, %d failed; %d frames",
		calls, elapsed.Round(time.Millisecond), mismatches.Load(), ledger.dups.Load(), missing, failures.Load(),
		p.Metrics().Get("rpcxbatch.server.frames").(interface{ Count() int64 }).Count())
	require.Zero(t, failures.Load(), "first failure: %v", firstErr.Load())
	assert.Zero(t, mismatches.Load(), "replies that were not the call's own payload")
	assert.Zero(t, ledger.dups.Load(), "calls run twice")
	assert.Zero(t, missing, "calls that never reached the server")
}
