package lock

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// envPartitionLong makes TestPartitionFencing cut the nodes apart 12
// times rather than 3 (about a minute).
const envPartitionLong = "RPCXBATCH_PARTITION_LONG"

// startPartChild starts a process of the partition test in role (store
// or node) and reads its address.
func startPartChild(t *testing.T, role string, nt time.Duration) *lockChild {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envPartRole+"="+role, fmt.Sprintf("%s=%d", envPartNT, nt.Milliseconds()))
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &lockChild{cmd: cmd, in: in, lines: make(chan string, 64)}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
	}()
	t.Cleanup(func() {
		in.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Signal(syscall.SIGKILL)
			<-done
		}
	})
	first := c.read(t)
	if !strings.HasPrefix(first, "ADDR ") {
		t.Fatalf("%s process said %q, want its address", role, first)
	}
	c.addr = strings.TrimPrefix(first, "ADDR ")
	return c
}

// readWithin reads c's next line, for up to d.
func (c *lockChild) readWithin(t *testing.T, d time.Duration) string {
	t.Helper()
	select {
	case l, ok := <-c.lines:
		if !ok {
			t.Fatal("process exited")
		}
		return l
	case <-time.After(d):
		t.Fatalf("process did not answer in %v", d)
		return ""
	}
}

// partStats are the storage's figures for one class of holders.
type partStats struct {
	overlaps, staleRefused, staleAccepted, lostOrDoubled, shadowLost, writes int64
}

// A Jepsen-style check of the lock's safety under partitions, on real
// processes on loopback: three lock nodes, each reaching the others
// through a proxy of this test, and a storage process. Holders on every
// node lock keys on the first node (the lock node), enter the key at the
// storage with their fencing token and read, increment and write its
// register for up to 2 × NodeTimeout (3 × for ignoring holders), then release; meanwhile the test
// cuts one of the other two nodes off the lock node (its proxies drop
// everything both ways) for 2.5 × NodeTimeout, heals, and again.
//
// Holders of class stop end their session when Lost fires: the storage
// must never see two of them in one key at once. Holders of class ignore
// carry on: they are seen beside the holder the lock node granted the
// key to after it dropped theirs (expected, reported), and the tokens
// must then refuse their writes: no stale write applied, no increment
// lost or doubled, in either class. The shadow register, written without
// the token check, shows what the ignoring holders would have done.
func TestPartitionFencing(t *testing.T) {
	const nt = time.Second
	rounds := 3
	if os.Getenv(envPartitionLong) != "" {
		rounds = 12
	}
	cutFor, healFor := nt*5/2, nt*3/2
	work := time.Duration(rounds)*(cutFor+healFor) + nt

	st := startPartChild(t, "store", nt)
	var nodes [3]*lockChild
	for i := range nodes {
		nodes[i] = startPartChild(t, "node", nt)
	}
	// proxies[i][j] carries node i's calls to node j.
	var proxies [3][3]*cutProxy
	for i := range nodes {
		for j := range nodes {
			if i == j {
				continue
			}
			proxies[i][j] = startCutProxy(t, nodes[j].addr)
			if got := nodes[i].do(t, fmt.Sprintf("route %s %s", nodes[j].addr, proxies[i][j].addr())); got != "OK" {
				t.Fatalf("route: %s", got)
			}
		}
	}
	lockNode := nodes[0].addr
	const keys, holders = 6, 4
	for _, c := range nodes {
		for _, class := range []string{"stop", "ignore"} {
			if _, err := fmt.Fprintf(c.in, "work %s %s %s %d %d %d\n", class, lockNode, st.addr, keys, holders, work.Milliseconds()); err != nil {
				t.Fatal(err)
			}
		}
	}
	start := time.Now()
	time.Sleep(nt / 2)
	for r := range rounds {
		victim := 1 + r%2
		proxies[victim][0].setCut(true)
		proxies[0][victim].setCut(true)
		time.Sleep(cutFor)
		proxies[victim][0].setCut(false)
		proxies[0][victim].setCut(false)
		time.Sleep(healFor)
	}
	lost := map[string]int64{}
	sessions := map[string]int64{}
	for range 2 * len(nodes) {
		got := waitAnyLine(t, nodes[:], work+30*time.Second-time.Since(start))
		var class string
		var s, l, ops int64
		if _, err := fmt.Sscanf(got, "DONE %s %d %d %d", &class, &s, &l, &ops); err != nil {
			t.Fatalf("node said %q, want DONE", got)
		}
		lost[class] += l
		sessions[class] += s
	}
	sc, err := dialStore(st.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.c.Close()
	stats := map[string]partStats{}
	for _, class := range []string{"stop", "ignore"} {
		got, err := sc.do("STATS %s", class)
		if err != nil {
			t.Fatal(err)
		}
		var p partStats
		if _, err := fmt.Sscanf(got, "STATS %d %d %d %d %d %d", &p.overlaps, &p.staleRefused, &p.staleAccepted, &p.lostOrDoubled, &p.shadowLost, &p.writes); err != nil {
			t.Fatalf("storage said %q", got)
		}
		stats[class] = p
		t.Logf("%-6s holders: %d sessions, %d told Lost; storage: %d overlaps of exclusive holds, %d stale reads/writes refused, %d stale writes applied, %d increments lost or doubled in %d writes (without tokens: %d)",
			class, sessions[class], lost[class], p.overlaps, p.staleRefused, p.staleAccepted, p.lostOrDoubled, p.writes, p.shadowLost)
	}
	t.Logf("%d cuts of %v (NodeTimeout %v) in %v", rounds, cutFor, nt, time.Since(start).Round(time.Millisecond))
	stop, ignore := stats["stop"], stats["ignore"]
	if stop.overlaps != 0 {
		t.Errorf("%d overlaps of holders that stop at Lost, want 0", stop.overlaps)
	}
	for class, p := range stats {
		if p.staleAccepted != 0 {
			t.Errorf("%s: %d stale writes applied with tokens checked, want 0", class, p.staleAccepted)
		}
		if p.lostOrDoubled != 0 {
			t.Errorf("%s: %d increments lost or doubled with tokens, want 0", class, p.lostOrDoubled)
		}
		if p.writes == 0 {
			t.Errorf("%s: no writes: the holders did not run", class)
		}
	}
	if lost["stop"]+lost["ignore"] == 0 {
		t.Error("no holder was told Lost: the cuts did not cut")
	}
	if ignore.overlaps == 0 {
		t.Log("no overlap of ignoring holders this run (they are expected, not required)")
	}
}

// waitAnyLine returns the next line of any of cs, waiting up to d.
func waitAnyLine(t *testing.T, cs []*lockChild, d time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		for _, c := range cs {
			select {
			case l, ok := <-c.lines:
				if !ok {
					t.Fatal("node process exited")
				}
				return l
			default:
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no node answered in %v", d)
	return ""
}
