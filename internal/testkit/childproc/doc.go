// Package childproc runs rpcxbatch test servers as child processes, so that
// tests can kill them with SIGKILL, freeze them with SIGSTOP, thaw them with
// SIGCONT and restart them at the same address. The child is the test binary
// itself, re-executed: a test package calls RunIfChild first thing in its
// TestMain.
//
// Goroutines: per child, a reaper (Start; ends when the process exits;
// Kill and the test's cleanup wait on it). In the child process, the rpcx
// server and a stdin watcher that exits the process when the parent goes.
package childproc
