package main

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// childEnv makes the test binary measure in a process of its own: records
// made by an earlier test in the same process would be reused, not made.
const childEnv = "GFLOOR_TEST_CHILD"

// TestBurstLeavesGoroutineRecords checks the claim the README's "memory
// after the load" rests on: after 5,000 goroutines have ended and memory
// has been handed back to the OS, a fresh process stays above its idle RSS
// by at least 256 bytes a goroutine (a record is about 400 bytes). Should
// a Go release free dead goroutines' records (golang/go#9869), this fails
// and the README's after-load paragraph must change.
func TestBurstLeavesGoroutineRecords(t *testing.T) {
	const n = 5000
	if os.Getenv(childEnv) != "" {
		f, err := measure(n, 0)
		require.NoError(t, err)
		fmt.Printf("FLOOR %d %d %d %d %d\n", f.idle, f.peak, f.after, f.heapIdle, f.heapAfter)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestBurstLeavesGoroutineRecords$", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	var f floor
	_, err = fmt.Sscanf(findLine(string(out), "FLOOR "), "FLOOR %d %d %d %d %d", &f.idle, &f.peak, &f.after, &f.heapIdle, &f.heapAfter)
	require.NoError(t, err, "%s", out)
	t.Logf("RSS KiB idle %d, peak %d, after %d; live heap %d → %d bytes", f.idle, f.peak, f.after, f.heapIdle, f.heapAfter)
	require.Greater(t, f.peak, f.idle, "5,000 goroutines alive took no memory")
	require.GreaterOrEqual(t, f.heapAfter, f.heapIdle+n*256, "live heap after the burst: the goroutine records are gone")
}

func findLine(s, prefix string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}
