package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/rpcxbatch/rpcxbatch/internal/benchkit"
)

// nodeProc is a lock node process the harness started; stop ends it.
type nodeProc struct {
	*benchkit.Child
	lines chan string // the node's stdout, line by line; closed at EOF
	addr  string
}

// startNode re-executes this binary as a lock node whose cross-node
// traffic goes over transport, and waits for its address.
func startNode(ctx context.Context, transport string, nodeTimeout time.Duration) (*nodeProc, error) {
	ch, err := benchkit.StartChild("node", nil, []string{roleEnv + "=" + roleNode, transportEnv + "=" + transport, timeoutEnv + "=" + nodeTimeout.String()}, os.Stderr)
	if err != nil {
		return nil, err
	}
	np := &nodeProc{Child: ch, lines: make(chan string, 4)}
	go func() { // ends when the node's stdout closes, at its exit
		defer close(np.lines)
		sc := bufio.NewScanner(ch.Stdout)
		sc.Buffer(make([]byte, 1<<16), 1<<20)
		for sc.Scan() {
			np.lines <- sc.Text()
		}
	}()
	line, err := np.expect(ctx, "ADDR ", 15*time.Second)
	if err != nil {
		np.stop()
		return nil, err
	}
	np.addr = line
	return np, nil
}

// send writes one line to the node.
func (np *nodeProc) send(line string) error {
	if _, err := io.WriteString(np.Stdin, line+"\n"); err != nil {
		return fmt.Errorf("node %s: %w", np.addr, err)
	}
	return nil
}

// expect waits for the node's next line, which must start with prefix,
// and returns the rest of it.
func (np *nodeProc) expect(ctx context.Context, prefix string, timeout time.Duration) (string, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case line, ok := <-np.lines:
		if !ok {
			return "", fmt.Errorf("node %s exited", np.addr)
		}
		if rest, found := strings.CutPrefix(line, prefix); found {
			return rest, nil
		}
		if rest, found := strings.CutPrefix(line, "ERR "); found {
			return "", fmt.Errorf("node %s: %s", np.addr, rest)
		}
		return "", fmt.Errorf("node %s: want %q, got %q", np.addr, prefix, line)
	case <-t.C:
		return "", fmt.Errorf("node %s: no %q within %v", np.addr, strings.TrimSpace(prefix), timeout)
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// stop closes the node's stdin, which ends it, and kills it if it has not
// exited within ten seconds. It is safe to call more than once.
func (np *nodeProc) stop() { np.Stop(10 * time.Second) }

var errInterrupted = errors.New("interrupted")
