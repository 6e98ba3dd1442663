package benchkit

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// Child is a copy of this binary started by StartChild. A goroutine
// reaps it: it ends when the process exits.
type Child struct {
	Cmd    *exec.Cmd
	Stdin  io.WriteCloser
	Stdout io.ReadCloser

	exited  chan struct{} // closed when the process has been reaped
	waitErr error
}

// Exited is closed once the process has exited and been reaped.
func (c *Child) Exited() <-chan struct{} { return c.exited }

// WaitErr is how the process ended (exec.Cmd.Wait's error), once Exited
// is closed.
func (c *Child) WaitErr() error { return c.waitErr }

// Stop closes the process's stdin, which ends it, kills it if it has not
// exited within grace, and returns once it is reaped. It is safe to call
// more than once.
func (c *Child) Stop(grace time.Duration) {
	c.Stdin.Close()
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-c.exited:
		return
	case <-t.C:
	}
	c.Cmd.Process.Kill()
	<-c.exited
}

// StartChild re-executes this binary (after prefix, a command that runs
// it, such as "ip netns exec NAME"; none when empty) with env added to the
// environment and stderr as its standard error. It runs in a process group
// of its own, so that a ^C in the terminal reaches the harness only, which
// then stops its children in order; Pdeathsig covers the harness being
// killed outright. what names the child in errors ("server", "node").
func StartChild(what string, prefix, env []string, stderr io.Writer) (*Child, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find own binary: %w", err)
	}
	argv := append(append([]string{}, prefix...), exe)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("%s stdin: %w", what, err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("%s stdout: %w", what, err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s %s: %w", what, exe, err)
	}
	c := &Child{Cmd: cmd, Stdin: stdin, Stdout: stdout, exited: make(chan struct{})}
	go func() {
		c.waitErr = cmd.Wait()
		close(c.exited)
	}()
	return c, nil
}
