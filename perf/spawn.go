package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/rpcxbatch/rpcxbatch/internal/benchkit"
)

// childProc is a process the harness started (a server, or a path's
// client): stop ends it.
type childProc struct{ *benchkit.Child }

// stop closes the process's stdin, which ends it, and kills it if it has
// not exited within five seconds. It is safe to call more than once.
func (c *childProc) stop() { c.Stop(5 * time.Second) }

// serverProc is the server process the harness started; stop ends it.
type serverProc struct {
	*childProc
	addr, ctrl string
}

// startServer re-executes this binary as path's server, on host,
// optionally inside a network namespace (prefix is then "ip netns exec
// NAME"), and waits for it to report its addresses. With a -cpuprofile
// prefix it writes its CPU profile.
func startServer(ctx context.Context, host, path, profilePrefix string, prefix []string, stderr io.Writer) (*serverProc, error) {
	// Its own process group and Pdeathsig (see StartChild); stdin's EOF
	// covers the rest.
	ch, err := benchkit.StartChild("server", prefix, []string{roleEnv + "=" + roleServer, listenEnv + "=" + host,
		profileEnv + "=" + profileFile(profilePrefix, "server-"+path)}, stderr)
	if err != nil {
		return nil, err
	}
	stdout := ch.Stdout

	type ready struct {
		addr, ctrl string
		err        error
	}
	readyc := make(chan ready, 1)
	go func() { // ends when the READY line arrives or stdout closes
		r := bufio.NewReader(stdout)
		a, c, err := readReady(r)
		readyc <- ready{a, c, err}
		io.Copy(io.Discard, r) // keep draining until the server exits
	}()
	sp := &serverProc{childProc: &childProc{ch}}

	t := time.NewTimer(15 * time.Second)
	defer t.Stop()
	select {
	case rd := <-readyc:
		if rd.err != nil {
			sp.stop()
			return nil, rd.err
		}
		sp.addr, sp.ctrl = rd.addr, rd.ctrl
		return sp, nil
	case <-sp.Exited():
		return nil, fmt.Errorf("server exited before it was ready: %w", sp.WaitErr())
	case <-t.C:
		sp.stop()
		return nil, errors.New("server not ready after 15s")
	case <-ctx.Done():
		sp.stop()
		return nil, ctx.Err()
	}
}
