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
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

func main() {
	perPoint := flag.Duration("point", 2*time.Second, "how long each throughput point runs")
	flag.Parse()
	rlog.SetDummyLogger() // rpcx logs every connection close at INFO
	if err := run(*perPoint); err != nil {
		log.Fatal(err)
	}
}

// startServer serves Echo on a random loopback port, with the batch plugin
// when batch is set.
func startServer(batch bool) (string, func(), error) {
	s := server.NewServer()
	if batch {
		// The one line that makes an rpcx server a batch peer.
		if _, err := batchserver.New(s); err != nil {
			return "", nil, err
		}
	}
	if err := s.RegisterName("Echo", new(testsvc.Echo), ""); err != nil {
		return "", nil, err
	}
	return testsvc.Serve(s)
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
				var reply testsvc.Data
				args := testsvc.NewData((g + i) % 50)
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
			args := testsvc.NewData(i % 50)
			var reply testsvc.Data
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
