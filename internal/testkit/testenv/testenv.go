package testenv

import (
	"context"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
)

// NewClient returns a batchclient.Client that is closed when the test ends.
func NewClient(t testing.TB, opts ...batchclient.Option) *batchclient.Client {
	t.Helper()
	c, err := batchclient.New(opts...)
	if err != nil {
		t.Fatalf("batchclient.New: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// WaitConnected starts the client's connection to addr and waits, at most
// 5 s, until its pool is up or the server was found plain.
func WaitConnected(t testing.TB, c *batchclient.Client, addr string) batchclient.Info {
	t.Helper()
	if err := c.Start(addr); err != nil {
		t.Fatalf("Start(%s): %v", addr, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		in := c.Info(addr)
		if in.Status == batchclient.Connected || in.Plain {
			return in
		}
		if time.Now().After(deadline) {
			t.Fatalf("no connection to %s: %+v", addr, in)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Ctx returns a context that times out after d and ends with the test.
func Ctx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// Concurrently runs fn(0) … fn(n-1), each on a goroutine of its own, waits
// for all of them, and fails the test with the errors they returned.
func Concurrently(t testing.TB, n int, fn func(i int) error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(i); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	failed := 0
	for err := range errs {
		if failed++; failed <= 3 {
			t.Error(err)
		}
	}
	if failed > 0 {
		t.Fatalf("%d of %d failed", failed, n)
	}
}

// RestartAddr returns a loopback address, "127.0.0.1:PORT", free a moment
// ago, for a server a test stops and starts again at the same address.
// Its port lies below the kernel's ephemeral range, from which every
// listener on port 0 and every outgoing connection on the machine takes
// its port: while the test's server is down, a server of another test
// (another package's test binary runs beside this one) could otherwise
// be given that port, and the test's clients, dialling the address
// again, would reach it ("rpcx: can't find service Roll").
func RestartAddr(t testing.TB) string {
	t.Helper()
	lo := ephemeralLow()
	base := max(lo/2, 1024)
	for range 1000 {
		port := base + rand.IntN(lo-base)
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			continue
		}
		ln.Close()
		return ln.Addr().String()
	}
	t.Fatalf("RestartAddr: no free port in [%d, %d)", base, lo)
	return ""
}

// ephemeralLow is the first port of the kernel's ephemeral range
// (Linux's net.ipv4.ip_local_port_range; elsewhere, or unreadable, the
// IANA range's first port).
func ephemeralLow() int {
	const iana = 49152
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return iana
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return iana
	}
	lo, err := strconv.Atoi(f[0])
	if err != nil || lo <= 2048 {
		return iana
	}
	return lo
}
