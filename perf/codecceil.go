package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/smallnest/rpcx/protocol"

	"github.com/rpcxbatch/rpcxbatch/internal/benchkit"
	"github.com/rpcxbatch/rpcxbatch/internal/fastcodec"
)

// Ceiling is the codec ceiling of one payload with one codec: what
// encoding and decoding alone cost in this process, on all its cores, with
// no transport at all. Any transport on this machine that uses that codec
// pays at least that per operation, so CallsPerS bounds call throughput and
// OnewayPerS cast and send throughput (client and server share these cores
// in the sweep, as they do here).
type Ceiling struct {
	Payload string `json:"payload"`
	// Codec is codecRPCX (rpcx's share.Codecs msgpack codec, which the
	// plain path and every send use) or codecBatch (the batch path's
	// encoding of call and cast arguments and replies: the same bytes,
	// see internal/fastcodec).
	Codec          string  `json:"codec"`
	PayloadBytes   int     `json:"payload_bytes"`
	Procs          int     `json:"gomaxprocs"`
	CallsPerS      float64 `json:"calls_per_s"`       // encode args, decode args, encode reply, decode reply
	CPUusPerCall   float64 `json:"cpu_us_per_call"`   // CPU of one such cycle
	OnewayPerS     float64 `json:"oneway_per_s"`      // encode args, decode args
	CPUusPerOneway float64 `json:"cpu_us_per_oneway"` // CPU of one such cycle
}

// The codecs a ceiling is measured for.
const (
	codecRPCX  = "rpcx"
	codecBatch = "rpcxbatch"
)

// codecs are the encode and decode functions of each measured codec.
var codecs = map[string]struct {
	encode func(any) ([]byte, error)
	decode func([]byte, any) error
}{
	codecRPCX: {msgpack.Encode, msgpack.Decode},
	codecBatch: {
		func(v any) ([]byte, error) { return fastcodec.Encode(protocol.MsgPack, v) },
		func(b []byte, v any) error { return fastcodec.Decode(protocol.MsgPack, b, v) },
	},
}

// codecOf names the codec a result's operation spends its codec time in.
func codecOf(r Result) string {
	if batchTransport(r.Path) && r.Op != "send" {
		return codecBatch
	}
	return codecRPCX
}

// measureCeiling runs the codec cycles for payload with codec on
// GOMAXPROCS goroutines, d for calls and d for oneways.
func measureCeiling(ctx context.Context, payload, codec string, d time.Duration) (Ceiling, error) {
	p := payloads[payload]
	args := p.args()
	enc, dec := codecs[codec].encode, codecs[codec].decode
	call := func() error {
		b, err := enc(args)
		if err != nil {
			return err
		}
		v := p.newValue()
		if err := dec(b, v); err != nil {
			return err
		}
		rb, err := enc(v)
		if err != nil {
			return err
		}
		return dec(rb, p.newValue())
	}
	oneway := func() error {
		b, err := enc(args)
		if err != nil {
			return err
		}
		return dec(b, p.newValue())
	}
	c := Ceiling{Payload: payload, Codec: codec, PayloadBytes: p.size, Procs: runtime.GOMAXPROCS(0)}
	var err error
	if c.CallsPerS, c.CPUusPerCall, err = spin(ctx, c.Procs, d, call); err != nil {
		return c, fmt.Errorf("codec ceiling %s %s: %w", payload, codec, err)
	}
	if c.OnewayPerS, c.CPUusPerOneway, err = spin(ctx, c.Procs, d, oneway); err != nil {
		return c, fmt.Errorf("codec ceiling %s %s: %w", payload, codec, err)
	}
	return c, nil
}

// spin runs f on procs goroutines for d and returns the cycles per second
// and the CPU µs per cycle.
func spin(ctx context.Context, procs int, d time.Duration, f func() error) (perS, cpuUS float64, err error) {
	settleMemory()
	var stop atomic.Bool
	var n atomic.Int64
	var firstErr atomic.Pointer[error]
	var wg sync.WaitGroup
	base := readUsage()
	t0 := time.Now()
	for range procs {
		wg.Go(func() {
			var k int64
			for !stop.Load() {
				if err := f(); err != nil {
					firstErr.Store(&err)
					break
				}
				k++
			}
			n.Add(k)
		})
	}
	benchkit.Sleep(ctx, d)
	stop.Store(true)
	wg.Wait()
	elapsed := time.Since(t0)
	cpu := readUsage().sub(base).CPU
	if e := firstErr.Load(); e != nil {
		return 0, 0, *e
	}
	if ctx.Err() != nil {
		return 0, 0, ctx.Err()
	}
	total := n.Load()
	if total == 0 {
		return 0, 0, fmt.Errorf("no cycle finished in %v", d)
	}
	return float64(total) / elapsed.Seconds(), float64(cpu.Microseconds()) / float64(total), nil
}

// printCeilings prints the codec ceilings as a small table.
func printCeilings(w io.Writer, cs []Ceiling) {
	fmt.Fprintf(w, "\ncodec ceiling (msgpack only, %d cores, no transport):\n", runtime.GOMAXPROCS(0))
	fmt.Fprintf(w, "%-13s %-9s %8s | %11s %9s | %11s %9s\n", "payload", "codec", "bytes", "calls/s", "cpuµs/call", "oneway/s", "cpuµs/1way")
	for _, c := range cs {
		fmt.Fprintf(w, "%-13s %-9s %8d | %11.0f %9.1f | %11.0f %9.1f\n",
			c.Payload, c.Codec, c.PayloadBytes, c.CallsPerS, c.CPUusPerCall, c.OnewayPerS, c.CPUusPerOneway)
	}
}
