// Command quickstart shows rpcxbatch on loopback with no external service:
// one rpcx server with the batch plugin, one plain rpcx server, and one
// drop-in XClient calling both from many goroutines. It prints which path
// each server took and a small throughput table of plain rpcx against the
// batch path, measured side by side on this machine.
//
//	go run ./example/quickstart        (or: make example)
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/smallnest/rpcx/client"
	rlog "github.com/smallnest/rpcx/log"
	"github.com/smallnest/rpcx/server"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/batchserver"
)

// Data is the payload of every call: three groups of ten small integers,
// about 220 bytes in msgpack (rpcx's default codec), the "data" payload of
// the measurements in the README.
type Data struct {
	A Fields `msgpack:"a"`
	B Fields `msgpack:"b"`
	C Fields `msgpack:"c"`
}

// Fields are ten small integers.
type Fields struct {
	F0 int `msgpack:"val_0"`
	F1 int `msgpack:"val_1"`
	F2 int `msgpack:"val_2"`
	F3 int `msgpack:"val_3"`
	F4 int `msgpack:"val_4"`
	F5 int `msgpack:"val_5"`
	F6 int `msgpack:"val_6"`
	F7 int `msgpack:"val_7"`
	F8 int `msgpack:"val_8"`
	F9 int `msgpack:"val_9"`
}

// newData returns a Data filled from seed.
func newData(seed int) *Data {
	f := func(o int) Fields {
		s := seed + o
		return Fields{s, s + 1, s + 2, s + 3, s + 4, s + 5, s + 6, s + 7, s + 8, s + 9}
	}
	return &Data{f(0), f(30), f(60)}
}

// Echo is the service both servers run; its methods have rpcx's usual
// shape, nothing in them knows about batching.
type Echo struct{}

// Data returns its argument.
func (Echo) Data(_ context.Context, args *Data, reply *Data) error {
	*reply = *args
	return nil
}

func main() {
	perPoint := flag.Duration("point", 2*time.Second, "how long each throughput point runs")
	flag.Parse()
	rlog.SetDummyLogger() // rpcx logs every connection close at INFO
	if err := run(*perPoint); err != nil {
		log.Fatal(err)
	}
}

// startServer serves Echo on a free loopback port, with the batch plugin
// when batch is set, and returns its address and a function that stops it.
func startServer(batch bool) (string, func(), error) {
	s := server.NewServer()
	if batch {
		// The one line that makes an rpcx server a batch peer.
		if _, err := batchserver.New(s); err != nil {
			return "", nil, err
		}
	}
	if err := s.RegisterName("Echo", new(Echo), ""); err != nil {
		return "", nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	go s.ServeListener("tcp", ln)
	return ln.Addr().String(), func() { s.Close() }, nil
}

func run(perPoint time.Duration) error {
	batchAddr, stopBatch, err := startServer(true)
	if err != nil {
		return err
	}
	defer stopBatch()
	plainAddr, stopPlain, err := startServer(false)
	if err != nil {
		return err
	}
	defer stopPlain()
	fmt.Printf("batch server (plugin added): %s\nplain server (rpcx only):    %s\n\n", batchAddr, plainAddr)

	// One drop-in XClient over both servers: existing call sites only swap
	// client.NewXClient for batchclient.NewXClient.
	bc, err := batchclient.New()
	if err != nil {
		return err
	}
	defer bc.Close()
	d, err := client.NewMultipleServersDiscovery([]*client.KVPair{{Key: "tcp@" + batchAddr}, {Key: "tcp@" + plainAddr}})
	if err != nil {
		return err
	}
	xc := batchclient.NewXClientWith(bc, "Echo", client.Failtry, client.RoundRobin, d, client.DefaultOption)
	defer xc.Close()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	var ok, failed atomic.Int64
	for g := 0; g < 1000; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 10; i++ {
				var reply Data
				args := newData((g + i) % 50)
				if err := xc.Call(ctx, "Data", args, &reply); err != nil || reply != *args {
					failed.Add(1)
					continue
				}
				ok.Add(1)
			}
		}(g)
	}
	wg.Wait()
	fmt.Printf("1,000 goroutines × 10 calls through one drop-in XClient: %d correct replies, %d failures\n", ok.Load(), failed.Load())
	for _, a := range []struct{ name, addr string }{{"batch server", batchAddr}, {"plain server", plainAddr}} {
		in := bc.Info(a.addr)
		path := fmt.Sprintf("batch path: %d lanes, server incarnation %x", in.Lanes, in.Incarnation)
		if in.Plain {
			path = "plain rpcx (the handshake found no batch plugin)"
		}
		fmt.Printf("  %s %s → %s\n", a.name, a.addr, path)
	}

	fmt.Printf("\nThroughput against the batch server, plain rpcx and the batch path taking turns (%v a point):\n\n", perPoint)
	plain := client.NewXClient("Echo", client.Failtry, client.RoundRobin, mustP2P(batchAddr), client.DefaultOption)
	defer plain.Close()
	dropIn := batchclient.NewXClientWith(bc, "Echo", client.Failtry, client.RoundRobin, mustP2P(batchAddr), client.DefaultOption)
	defer dropIn.Close()

	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "goroutines\tplain rpcx calls/s\tbatch calls/s\tbatch ÷ plain\t")
	for _, g := range []int{1, 100, 1000, 10000} {
		p, err := throughput(plain, g, perPoint)
		if err != nil {
			return err
		}
		b, err := throughput(dropIn, g, perPoint)
		if err != nil {
			return err
		}
		fmt.Fprintf(tw, "%d\t%.0f\t%.0f\t%.2f×\t\n", g, p, b, b/p)
	}
	tw.Flush()
	fmt.Println("\nFigures are from this machine, client and servers in one process; `make bench` and `go run ./perf` measure more carefully.")
	return nil
}

func mustP2P(addr string) client.ServiceDiscovery {
	d, err := client.NewPeer2PeerDiscovery("tcp@"+addr, "")
	if err != nil {
		panic(err)
	}
	return d
}

// throughput runs g goroutines calling Echo.Data for d and returns calls/s.
func throughput(xc client.XClient, g int, d time.Duration) (float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d+30*time.Second)
	defer cancel()
	var done atomic.Int64
	var firstErr atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; i < g; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			args := newData(i % 50)
			var reply Data
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := xc.Call(ctx, "Data", args, &reply); err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				done.Add(1)
			}
		}(i)
	}
	time.Sleep(d)
	close(stop)
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		return 0, err
	}
	return float64(done.Load()) / time.Since(start).Seconds(), nil
}
