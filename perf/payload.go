package main

import (
	"fmt"
	"slices"

	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/share"

	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// profile is one payload: the value a writer sends and how the server
// names the methods that take it.
type profile struct {
	// method is the method of the Perf (echo) and Sink (count) services
	// that take this payload; the send handler is "sink."+method.
	method string
	// newValue returns a fresh value of the payload's type; args returns the
	// value writers send (shared by all writers, read only).
	newValue func() any
	args     func() any
	// size is the msgpack size of args, filled in by init.
	size int
}

// payloads are the profiles of ecall's measurements and larger binaries.
// "data" is ecall's: three keys of ten small integers, about 220 bytes.
var payloads = map[string]*profile{
	"tiny":          {method: "Tiny", newValue: func() any { return new(testsvc.Args) }, args: func() any { return &testsvc.Args{A: 6, B: 7} }},
	"data":          {method: "Data", newValue: func() any { return new(testsvc.Data) }, args: func() any { return testsvc.NewData(7) }},
	"binary_10kib":  binaryProfile(10 << 10),
	"binary_100kib": binaryProfile(100 << 10),
	"binary_1mib":   binaryProfile(1 << 20),
}

func binaryProfile(n int) *profile {
	return &profile{method: "Bytes", newValue: func() any { return new([]byte) }, args: func() any {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i * 31)
		}
		return &b
	}}
}

// msgpack is the codec both paths use for arguments and replies: rpcx's
// default, and the batch client's.
var msgpack = share.Codecs[protocol.MsgPack]

func init() {
	for name, p := range payloads {
		b, err := msgpack.Encode(p.args())
		if err != nil {
			panic(fmt.Sprintf("perf: payload %s does not encode: %v", name, err))
		}
		p.size = len(b)
	}
}

// payloadNames lists the profiles, smallest first.
func payloadNames() []string {
	names := make([]string, 0, len(payloads))
	for n := range payloads {
		names = append(names, n)
	}
	slices.SortFunc(names, func(a, b string) int { return payloads[a].size - payloads[b].size })
	return names
}

// sendHandler is the name the server registers a payload's send handler
// under.
func sendHandler(p *profile) string { return "sink." + p.method }
