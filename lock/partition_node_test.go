package lock

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/server"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/batchserver"
)

// A lock node process of the partition test (partition_test.go). It
// reaches each other node through the proxy the test names for it
// (route), and runs holders on command (work). One-line commands on
// stdin:
//
//	route <addr> <via>     calls to node addr go to via: OK
//	work <class> <lock node> <store> <keys> <holders> <ms>
//	                       holders of class stop or ignore run for ms;
//	                       answers DONE <class> <sessions> <lost> <ops>
//	                       when they are done

const (
	envPartRole = "RPCXBATCH_LOCK_PART"    // store or node
	envPartNT   = "RPCXBATCH_LOCK_PART_NT" // the nodes' NodeTimeout in ms
)

// routeTransport sends each call to the address its node is reached at
// (the test's proxy), while the nodes keep naming each other by their
// own addresses.
type routeTransport struct {
	inner  *batchclient.Client
	routes sync.Map // addr -> via
}

func (r *routeTransport) via(addr string) string {
	if v, ok := r.routes.Load(addr); ok {
		return v.(string)
	}
	return addr
}

func (r *routeTransport) Call(ctx context.Context, addr, sp, sm string, args, reply any) error {
	return r.inner.Call(ctx, r.via(addr), sp, sm, args, reply)
}

func (r *routeTransport) Cast(ctx context.Context, addr, sp, sm string, args any) error {
	return r.inner.Cast(ctx, r.via(addr), sp, sm, args)
}

func (r *routeTransport) Go(ctx context.Context, addr, sp, sm string, args, reply any, done chan *client.Call) *client.Call {
	return r.inner.Go(ctx, r.via(addr), sp, sm, args, reply, done)
}

func runPartNode() int {
	ms, _ := strconv.Atoi(os.Getenv(envPartNT))
	nt := time.Duration(ms) * time.Millisecond
	s := server.NewServer()
	if _, err := batchserver.New(s); err != nil {
		fmt.Fprintln(os.Stderr, "node:", err)
		return 2
	}
	addr, stop, err := serveAt(s, "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "node:", err)
		return 2
	}
	defer stop()
	bc, err := batchclient.New(batchclient.WithHeartbeat(nt/5, nt))
	if err != nil {
		fmt.Fprintln(os.Stderr, "node:", err)
		return 2
	}
	defer bc.Close()
	rt := &routeTransport{inner: bc}
	n, err := New(Config{Server: s, Addr: addr, Transport: rt, NodeTimeout: nt})
	if err != nil {
		fmt.Fprintln(os.Stderr, "node:", err)
		return 2
	}
	defer n.Close()
	var outMu sync.Mutex
	say := func(format string, args ...any) {
		outMu.Lock()
		defer outMu.Unlock()
		fmt.Printf(format+"\n", args...)
	}
	say("ADDR %s", addr)
	var wg sync.WaitGroup
	defer wg.Wait()
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 3 && f[0] == "route":
			rt.routes.Store(f[1], f[2])
			say("OK")
		case len(f) == 7 && f[0] == "work":
			keys, _ := strconv.Atoi(f[4])
			holders, _ := strconv.Atoi(f[5])
			ms, _ := strconv.Atoi(f[6])
			w := &partWork{n: n, class: f[1], lockNode: f[2], store: f[3], keys: keys, until: time.Now().Add(time.Duration(ms) * time.Millisecond)}
			wg.Add(1)
			go func() {
				defer wg.Done()
				w.run(holders)
				say("DONE %s %d %d %d", w.class, w.sessions.Load(), w.lost.Load(), w.ops.Load())
			}()
		default:
			say("ERR bad command")
		}
	}
	return 0
}

// partWork is one class of holders on a node: each, in a loop, locks a
// key on the lock node, enters it at the storage with its token, and
// reads, increments and writes the key's register for a while (a
// session that may outlast NodeTimeout), then exits and releases. A
// holder of class stop checks Lost before every step and ends its
// session there; one of class ignore does not look.
type partWork struct {
	n        *Node
	class    string
	lockNode string
	store    string
	keys     int
	until    time.Time

	sessions atomic.Int64 // sessions that entered the storage
	lost     atomic.Int64 // sessions whose holder was told Lost
	ops      atomic.Int64 // writes the storage applied
}

func (w *partWork) run(holders int) {
	var wg sync.WaitGroup
	for i := range holders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.holder(i)
		}()
	}
	wg.Wait()
}

func (w *partWork) holder(i int) {
	sc, err := dialStore(w.store)
	if err != nil {
		fmt.Fprintln(os.Stderr, "holder:", err)
		return
	}
	defer sc.c.Close()
	r := rand.New(rand.NewPCG(uint64(i), uint64(time.Now().UnixNano())))
	for time.Now().Before(w.until) {
		key := fmt.Sprintf("%s/%d", w.class, r.IntN(w.keys))
		w.session(sc, key, r)
	}
}

// session is one hold of key, bounded by the node's NodeTimeout × 2
// for class stop and × 3 for class ignore: long enough for the lock
// node to drop the hold of a cut-off holder and grant it to another while
// an ignoring holder still acts on it.
func (w *partWork) session(sc *storeConn, key string, r *rand.Rand) {
	h, err := w.n.NewHolder(context.Background())
	if err != nil {
		return
	}
	defer h.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 4*w.n.cfg.NodeTimeout)
	err = h.LockOn(ctx, []string{w.lockNode}, Exclusive, key)
	cancel()
	if err != nil {
		time.Sleep(time.Duration(r.IntN(20)) * time.Millisecond)
		return
	}
	tok, _ := h.Token(key)
	id := fmt.Sprintf("%x.%d", h.ID().Node, h.ID().Seq)
	if got, err := sc.do("ENTER %s %s %s %d", key, w.class, id, tok); err != nil || got != "OK" {
		return
	}
	w.sessions.Add(1)
	defer func() {
		if h.LostCause() != nil {
			w.lost.Add(1)
		}
	}()
	defer sc.do("EXIT %s %s", key, id)
	end := time.Now().Add(w.n.cfg.NodeTimeout * 2)
	if w.class == "ignore" {
		end = time.Now().Add(w.n.cfg.NodeTimeout * 3)
	}
	stopped := func() bool {
		if w.class != "stop" {
			return false
		}
		select {
		case <-h.Lost():
			return true
		default:
			return false
		}
	}
	for time.Now().Before(end) {
		if stopped() {
			return
		}
		got, err := sc.do("READ %s %s %d", key, id, tok)
		if err != nil || !strings.HasPrefix(got, "VAL ") {
			return
		}
		var reg, shadow int64
		fmt.Sscanf(got, "VAL %d %d", &reg, &shadow)
		time.Sleep(time.Millisecond) // the modify
		if stopped() {
			return
		}
		got, err = sc.do("WRITE %s %s %d %d %d", key, id, tok, reg+1, shadow+1)
		if err != nil || got != "OK" {
			return
		}
		w.ops.Add(1)
		time.Sleep(time.Duration(2+r.IntN(4)) * time.Millisecond)
	}
}
