package main

import (
	"fmt"
	"os"
	"testing"
)

// TestMain lets the test binary be the server process too: the end-to-end
// test re-executes it with roleEnv set, as the harness does with its own
// binary.
func TestMain(m *testing.M) {
	if os.Getenv(roleEnv) == roleServer {
		if err := runServer(os.Getenv(listenEnv)); err != nil {
			fmt.Fprintln(os.Stderr, "perf server:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}
