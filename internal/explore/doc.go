// Package explore holds the differential explorer of issue 43: a seeded
// generator of scenarios (fail and select modes, retries, one to three
// servers of which some are down, hung or slow, serialize types, handler
// kinds and outcomes, server and client plugins on every hook, the error
// funcs, deadlines and __ServerTimeout, compression, TLS, and the calls
// Go, Call, Oneshot, Broadcast, Fork and Inform), each run on rpcx
// v1.9.4's client.NewXClient against plain rpcx servers and on
// batchclient.NewXClient against the same servers with batchserver.New,
// with the outcomes normalised and compared.
//
// It has no code outside its tests. `go test ./internal/explore/` (part of
// `make test`) runs a fixed set of seeds; `make explore SEEDS=N` runs
// more. The differences the explorer accepts are one list in its tests
// (accepted_test.go), which docs/compatibility.md's "What differs" section
// repeats; a test keeps the two the same. A scenario with a difference the
// list does not accept fails with its seed and the command that replays it
// alone.
package explore
