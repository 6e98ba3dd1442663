// Package mpack appends msgpack values to a byte slice, each in its
// smallest form, as github.com/vmihailenco/msgpack/v5 (rpcx's msgpack
// codec) writes them. The wire codec (codec/) writes its frames with it
// and the compiled struct plans (internal/fastcodec) their payloads;
// lock's wire types write themselves through tinylib/msgp. It has no
// reader: the two decode different things by different rules (the frames
// a strict subset, the payloads whatever the library accepts), and each
// keeps its own.
//
// It starts no goroutines and holds no state.
package mpack
