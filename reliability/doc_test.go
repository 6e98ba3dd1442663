// Package reliability_test is rpcxbatch's reliability suite: what callers
// see when peers die, freeze, restart, overload or send garbage, TLS and
// auth on the batch path, and end-to-end integrity under load. `make test`
// runs it in CI size; `make soak` runs the long forms (RPCXBATCH_SOAK=1).
//
// It runs without the race detector: several tests need far more
// goroutines than the detector allows (8128). The packages under test run
// under it in their own suites.
package reliability_test

import (
	"os"
	"testing"

	rlog "github.com/smallnest/rpcx/log"

	"github.com/rpcxbatch/rpcxbatch/internal/testkit/childproc"
)

func TestMain(m *testing.M) {
	childproc.RunIfChild()
	rlog.SetLogger(capture) // see security_test.go
	os.Exit(m.Run())
}

// soak reports whether the long forms were asked for.
func soak() bool { return os.Getenv("RPCXBATCH_SOAK") == "1" }
