package rpcxlayout

import (
	"time"

	"github.com/smallnest/rpcx/server"
)

// rpcx v1.9.4 keeps what its options set (the pool, the read and write
// timeouts) and its AddHandler router in unexported fields with no
// accessor. They are set in NewServer (the router by AddHandler, before
// serving), so reading them races with nothing.

// Pool returns the pool s was given with server.WithPool or
// server.WithCustomPool (nil for none), and whether the field could be
// read.
func Pool(s *server.Server) (server.WorkerPool, bool) {
	return serverField[server.WorkerPool](s, "pool")
}

// ReadTimeout returns the read timeout s was given with
// server.WithReadTimeout (0 for none), and whether the field could be
// read.
func ReadTimeout(s *server.Server) (time.Duration, bool) {
	return serverField[time.Duration](s, "readTimeout")
}

// WriteTimeout returns the write timeout s was given with
// server.WithWriteTimeout (0 for none), and whether the field could be
// read.
func WriteTimeout(s *server.Server) (time.Duration, bool) {
	return serverField[time.Duration](s, "writeTimeout")
}

// Router returns the map AddHandler writes to (the very map, which rpcx
// reads without a lock on every request), and whether it could be read.
func Router(s *server.Server) (map[string]server.Handler, bool) {
	return serverField[map[string]server.Handler](s, "router")
}
