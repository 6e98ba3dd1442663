package batchserver

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/server"
	"github.com/smallnest/rpcx/share"

	"github.com/rpcxbatch/rpcxbatch/codec"
	"github.com/rpcxbatch/rpcxbatch/internal/fastcodec"
)

// BenchData is the benchmark's payload.
type BenchData struct {
	A, B, C [10]int
}

// BenchEcho echoes BenchData.
type BenchEcho struct{}

// Data echoes.
func (BenchEcho) Data(_ context.Context, a, r *BenchData) error { *r = *a; return nil }

// BenchmarkExecute measures what the server does for one call entry once
// it has its goroutine: context, lookup, decode, plugins, the method,
// encode.
func BenchmarkExecute(b *testing.B) {
	s := server.NewServer()
	p, err := New(s)
	if err != nil {
		b.Fatal(err)
	}
	if err := s.RegisterName("Echo", BenchEcho{}, ""); err != nil {
		b.Fatal(err)
	}
	payload, _ := share.Codecs[protocol.MsgPack].Encode(&BenchData{})
	c1, c2 := net.Pipe()
	defer c1.Close()
	defer c2.Close()
	c := newConn(p, c1, &laneMark{})
	b.ReportAllocs()
	var (
		buf []byte
		fc  fastcodec.Codec
	)
	for i := 0; i < b.N; i++ {
		e := codec.Entry{Kind: codec.KindCall, ID: 1, ServicePath: "Echo", ServiceMethod: "Data",
			SerializeType: uint8(protocol.MsgPack), Payload: payload, TimeoutMicros: 5000000}
		ec := entryContext(c, &e, time.Now(), nil)
		out, _, err := p.execute(ec, &e, buf[:0], &fc)
		if err != nil {
			b.Fatal(err)
		}
		buf = out // reused, as a connection reuses its reply buffers
		ec.end()
	}
}
