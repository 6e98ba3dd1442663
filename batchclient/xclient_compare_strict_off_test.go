//go:build !xcdiff

package batchclient_test

// strictDiffs is false: the comparison suite accepts the drop-in's known,
// not yet documented differences from rpcx's XClient (each logged where it
// is accepted). Build with -tags xcdiff to make each of them fail.
const strictDiffs = false
