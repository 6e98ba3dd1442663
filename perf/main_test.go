package main

import (
	"context"
	"fmt"
	"os"
	"testing"
)

// TestMain lets the test binary be the server and client processes too:
// the end-to-end tests re-execute it with roleEnv set, as the harness does
// with its own binary.
func TestMain(m *testing.M) {
	if os.Getenv(roleEnv) == roleServer {
		if err := runServer(os.Getenv(listenEnv)); err != nil {
			fmt.Fprintln(os.Stderr, "perf server:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if os.Getenv(roleEnv) == roleClient {
		if err := runClient(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, "perf client:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}
