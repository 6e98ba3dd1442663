package lock

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// The partition test's storage (partition_test.go), run in a process of
// its own: one register per key, written only by read-modify-writes that
// carry a fencing token no older than the last one it accepted for the
// key, and a referee that watches the exclusive holds by its own clock.
// One-line commands on a TCP connection, each answered with one line:
//
//	ENTER <key> <class> <holder> <token>  a hold begins: OK, or STALE when
//	                                      a newer token entered already
//	EXIT <key> <holder>                   the hold ends: OK
//	READ <key> <holder> <token>           VAL <register> <shadow>, or STALE
//	WRITE <key> <holder> <token> <register> <shadow>
//	                                      OK, or STALE (not written)
//	STATS <class>                         the figures of the class's keys
//
// The shadow register beside each one takes every write, token or not:
// what the same holders would have done to storage without fencing.

// storeKey is one key's register and its referee's books.
type storeKey struct {
	class    string
	token    uint64 // the newest token accepted (ENTER, READ, WRITE)
	reg      int64
	shadow   int64
	accepted int64 // writes applied to reg
	shadowN  int64 // writes applied to shadow
	active   map[string]bool
	newest   string // the holder that entered last
}

// storeStats are a class's figures.
type storeStats struct {
	overlaps      int64 // an ENTER while another holder of the key was in
	staleRefused  int64 // READ or WRITE refused for an old token
	staleAccepted int64 // a WRITE applied from a holder that was not the newest in
	lostOrDoubled int64 // sum over keys of |accepted writes - register|
	shadowLost    int64 // the same for the shadow register
	writes        int64 // writes applied to the registers
}

type store struct {
	mu     sync.Mutex
	keys   map[string]*storeKey
	counts map[string]*storeStats // by class: overlaps, stale refused and accepted
}

func (s *store) key(k, class string) *storeKey {
	sk := s.keys[k]
	if sk == nil {
		sk = &storeKey{class: class, active: map[string]bool{}}
		s.keys[k] = sk
	}
	return sk
}

func (s *store) stats(class string) *storeStats {
	st := s.counts[class]
	if st == nil {
		st = &storeStats{}
		s.counts[class] = st
	}
	return st
}

func (s *store) do(f []string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	num := func(i int) uint64 { v, _ := strconv.ParseUint(f[i], 10, 64); return v }
	switch {
	case len(f) == 5 && f[0] == "ENTER":
		sk := s.key(f[1], f[2])
		tok := num(4)
		if tok < sk.token {
			return "STALE"
		}
		sk.token = tok
		if len(sk.active) > 0 {
			s.stats(sk.class).overlaps++
		}
		sk.active[f[3]] = true
		sk.newest = f[3]
		return "OK"
	case len(f) == 3 && f[0] == "EXIT":
		if sk := s.keys[f[1]]; sk != nil {
			delete(sk.active, f[2])
		}
		return "OK"
	case len(f) == 4 && f[0] == "READ":
		sk := s.keys[f[1]]
		if sk == nil {
			return "ERR unknown key"
		}
		tok := num(3)
		if tok < sk.token {
			s.stats(sk.class).staleRefused++
			return "STALE"
		}
		sk.token = tok
		return fmt.Sprintf("VAL %d %d", sk.reg, sk.shadow)
	case len(f) == 6 && f[0] == "WRITE":
		sk := s.keys[f[1]]
		if sk == nil {
			return "ERR unknown key"
		}
		reg, _ := strconv.ParseInt(f[4], 10, 64)
		shadow, _ := strconv.ParseInt(f[5], 10, 64)
		sk.shadow = shadow
		sk.shadowN++
		tok := num(3)
		if tok < sk.token {
			s.stats(sk.class).staleRefused++
			return "STALE"
		}
		if f[2] != sk.newest {
			s.stats(sk.class).staleAccepted++
		}
		sk.token = tok
		sk.reg = reg
		sk.accepted++
		return "OK"
	case len(f) == 2 && f[0] == "STATS":
		st := *s.stats(f[1])
		for _, sk := range s.keys {
			if sk.class != f[1] {
				continue
			}
			st.lostOrDoubled += abs64(sk.accepted - sk.reg)
			st.shadowLost += abs64(sk.shadowN - sk.shadow)
			st.writes += sk.accepted
		}
		return fmt.Sprintf("STATS %d %d %d %d %d %d", st.overlaps, st.staleRefused, st.staleAccepted, st.lostOrDoubled, st.shadowLost, st.writes)
	}
	return "ERR bad command"
}

func abs64(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// runPartStore serves the storage until its stdin closes.
func runPartStore() int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "store:", err)
		return 2
	}
	s := &store{keys: map[string]*storeKey{}, counts: map[string]*storeStats{}}
	fmt.Printf("ADDR %s\n", ln.Addr())
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				sc := bufio.NewScanner(c)
				w := bufio.NewWriter(c)
				for sc.Scan() {
					fmt.Fprintln(w, s.do(strings.Fields(sc.Text())))
					w.Flush()
				}
			}()
		}
	}()
	// The test closes stdin (or dies): the storage ends with it.
	io.Copy(io.Discard, os.Stdin)
	ln.Close()
	return 0
}

// storeConn is one connection to the storage.
type storeConn struct {
	c  net.Conn
	sc *bufio.Scanner
}

func dialStore(addr string) (*storeConn, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	return &storeConn{c: c, sc: bufio.NewScanner(c)}, nil
}

func (s *storeConn) do(format string, args ...any) (string, error) {
	if _, err := fmt.Fprintf(s.c, format+"\n", args...); err != nil {
		return "", err
	}
	if !s.sc.Scan() {
		if err := s.sc.Err(); err != nil {
			return "", err
		}
		return "", io.EOF
	}
	return s.sc.Text(), nil
}
