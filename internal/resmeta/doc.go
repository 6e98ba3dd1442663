// Package resmeta fills a caller's rpcx response-metadata map (the map at
// share.ResMetaDataKey in its context) from a completed call, as rpcx
// v1.9.4's Client.Call does. batchclient (lane and plain calls) and group's
// PlainCaller (through internal/plainconn) use it.
//
// It starts no goroutines.
package resmeta
