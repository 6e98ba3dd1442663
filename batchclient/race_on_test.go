//go:build race

package batchclient_test

// raceEnabled reports whether the tests run under the race detector.
const raceEnabled = true
