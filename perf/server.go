package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/smallnest/rpcx/log"
	"github.com/smallnest/rpcx/server"

	"github.com/rpcxbatch/rpcxbatch/batchserver"
)

// The server process: the harness re-executes its own binary with roleEnv
// set to roleServer; the process serves on listenEnv's host, prints one
// line "READY <service addr> <control addr>" on stdout, and runs until its
// stdin closes (the harness ended, however it ended) or it gets SIGTERM.
const (
	roleEnv    = "RPCXBATCH_PERF_ROLE"
	roleServer = "server"
	listenEnv  = "RPCXBATCH_PERF_LISTEN"
	readyWord  = "READY"
)

func runServer(host string) error {
	if host == "" {
		host = "127.0.0.1"
	}
	// rpcx logs every closed connection at Info level; the harness closes
	// a client after every run.
	log.SetLogger(quietLogger{log.GetLogger()})

	count := newCounter()
	s := server.NewServer()
	// Counts the Write calls on the service's connections, both paths';
	// added before the batch plugin so its reply writes are counted too.
	dataIO := &ioCounter{}
	s.Plugins.Add(dataIO)
	if err := s.RegisterName("Perf", Perf{}, ""); err != nil {
		return fmt.Errorf("register Perf: %w", err)
	}
	if err := s.RegisterName("Sink", Sink{count}, ""); err != nil {
		return fmt.Errorf("register Sink: %w", err)
	}
	p, err := batchserver.New(s)
	if err != nil {
		return fmt.Errorf("batch plugin: %w", err)
	}
	for _, prof := range payloads {
		// A send carries the msgpack bytes of the payload, as the plain
		// path's oneway call does; the handler decodes them, as rpcx
		// decodes the oneway call's argument, so both do the same work.
		newValue := prof.newValue
		err := p.HandleSend(sendHandler(prof), func(_ context.Context, b []byte) {
			if msgpack.Decode(b, newValue()) == nil {
				count.inc()
			}
		})
		if err != nil && !errors.Is(err, batchserver.ErrSendHandlerExists) {
			return fmt.Errorf("send handler %s: %w", sendHandler(prof), err)
		}
	}

	ctrlIO := &ioCounter{}
	cs := server.NewServer()
	cs.Plugins.Add(ctrlIO)
	ctl := &Control{count: count, reg: p.Metrics(), ctrl: ctrlIO, data: dataIO,
		info: ServerInfo{Pid: os.Getpid(), GOMAXPROCS: runtime.GOMAXPROCS(0), PoolSize: p.Options().PoolSize}}
	if err := cs.RegisterName("Control", ctl, ""); err != nil {
		return fmt.Errorf("register Control: %w", err)
	}

	addr, err := serve(s, host)
	if err != nil {
		return err
	}
	defer s.Close()
	caddr, err := serve(cs, host)
	if err != nil {
		return err
	}
	defer cs.Close()
	fmt.Printf("%s %s %s\n", readyWord, addr, caddr)

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sig)
	eof := make(chan struct{})
	go func() { // ends with the process: it blocks on stdin until EOF
		io.Copy(io.Discard, os.Stdin)
		close(eof)
	}()
	select {
	case <-sig:
	case <-eof:
	}
	return nil
}

// serve starts s on a random port of host and returns its address.
func serve(s *server.Server, host string) (string, error) {
	errc := make(chan error, 1)
	go func() { errc <- s.Serve("tcp", net.JoinHostPort(host, "0")) }()
	deadline := time.Now().Add(5 * time.Second)
	for s.Address() == nil {
		select {
		case err := <-errc:
			return "", fmt.Errorf("serve on %s: %w", host, err)
		default:
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("serve on %s: no address after 5s", host)
		}
		time.Sleep(time.Millisecond)
	}
	return s.Address().String(), nil
}

// quietLogger drops rpcx's Info and Debug lines and keeps the rest.
type quietLogger struct{ log.Logger }

func (quietLogger) Info(...any)           {}
func (quietLogger) Infof(string, ...any)  {}
func (quietLogger) Debug(...any)          {}
func (quietLogger) Debugf(string, ...any) {}

// readReady reads the server's READY line.
func readReady(r *bufio.Reader) (addr, ctrl string, err error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", "", fmt.Errorf("server did not report its address: %w", err)
	}
	var word string
	if _, err := fmt.Sscan(line, &word, &addr, &ctrl); err != nil || word != readyWord {
		return "", "", fmt.Errorf("server said %q, want %s <addr> <ctrl>", line, readyWord)
	}
	return addr, ctrl, nil
}
