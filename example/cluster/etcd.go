package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// A throwaway etcd for the example, when -etcd names none: a single member
// on two free loopback ports with a fresh data directory, so the run
// neither needs nor touches an etcd of the machine's. Against a real
// cluster, pass -etcd and none of this runs.

// errNoEtcd is returned by startEtcd when there is no etcd binary on PATH.
var errNoEtcd = errors.New("no etcd binary on PATH")

// etcdProc is a running throwaway etcd.
type etcdProc struct {
	endpoint string // "127.0.0.1:PORT", as rpcx's etcd plugins take it
	cmd      *exec.Cmd
	dir      string
	log      bytes.Buffer  // etcd's output; read only once it has exited
	exited   chan struct{} // closed when the process has exited
}

// startEtcd starts etcd and waits until it answers, or ctx ends.
func startEtcd(ctx context.Context) (*etcdProc, error) {
	bin, err := exec.LookPath("etcd")
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errNoEtcd, err)
	}
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "rpcxbatch-cluster-etcd-")
	if err != nil {
		return nil, err
	}
	clientURL := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	peerURL := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	e := &etcdProc{endpoint: "127.0.0.1:" + strconv.Itoa(ports[0]), dir: dir, exited: make(chan struct{})}
	e.cmd = exec.Command(bin,
		"--name", "example", "--data-dir", dir,
		"--listen-client-urls", clientURL, "--advertise-client-urls", clientURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "example="+peerURL, "--initial-cluster-state", "new",
		"--log-level", "warn")
	e.cmd.Stdout, e.cmd.Stderr = &e.log, &e.log
	if err := e.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	go func() {
		// The process's owner: it reaps it; stop waits for it.
		e.cmd.Wait()
		close(e.exited)
	}()
	if err := e.waitReady(ctx); err != nil {
		e.stop()
		return nil, fmt.Errorf("%w; etcd's log:\n%s", err, e.log.String())
	}
	return e, nil
}

// waitReady waits, for at most 15 s, until etcd takes connections and
// then answers a read. (The client logs every failed attempt: dialling
// first keeps a normal start quiet.)
func (e *etcdProc) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	for {
		conn, err := net.DialTimeout("tcp", e.endpoint, time.Second)
		if err == nil {
			conn.Close()
			break
		}
		select {
		case <-e.exited:
			return fmt.Errorf("etcd exited at start (%v)", e.cmd.ProcessState)
		case <-ctx.Done():
			return fmt.Errorf("etcd not listening: %w (last: %v)", ctx.Err(), err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{e.endpoint}, DialTimeout: time.Second})
	if err != nil {
		return fmt.Errorf("etcd client: %w", err)
	}
	defer c.Close()
	if _, err := c.Get(ctx, "ready?"); err != nil {
		return fmt.Errorf("etcd not answering: %w", err)
	}
	return nil
}

// stop ends etcd (an interrupt, then a kill after 5 s), waits for it and
// removes its data directory.
func (e *etcdProc) stop() {
	if err := e.cmd.Process.Signal(os.Interrupt); err != nil {
		e.cmd.Process.Kill()
	}
	select {
	case <-e.exited:
	case <-time.After(5 * time.Second):
		e.cmd.Process.Kill()
		<-e.exited
	}
	os.RemoveAll(e.dir)
}

// freePorts returns n distinct loopback ports that were free a moment ago.
func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
