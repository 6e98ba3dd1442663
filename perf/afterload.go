package main

import (
	"context"
	"fmt"
	"io"
	"time"
)

// The memory a load leaves behind: both processes' RSS when idle before the
// sweep, at their peak during it, and a while after it ended with nothing
// forced (no GC, no FreeOSMemory): what a service would keep holding after
// a burst.

// RSSReply is the server process's resident set size now.
type RSSReply struct{ RSS int64 }

// RSS reports the server's resident set size as it is, without settling
// memory first (Reset settles).
func (c *Control) RSS(_ context.Context, _ *Empty, r *RSSReply) error {
	r.RSS = rssNow()
	return nil
}

func (cc *controlClient) rss(ctx context.Context) (int64, error) {
	var r RSSReply
	return r.RSS, cc.call(ctx, 5*time.Second, "RSS", &Empty{}, &r)
}

// afterLoad is the memory of both processes around the sweep, in MB.
type afterLoad struct {
	Wait time.Duration
	// ServerIdleRelease is the server's WithIdleMemoryRelease (0: off).
	ServerIdleRelease        time.Duration
	IdleClient, IdleServer   float64
	PeakClient, PeakServer   float64
	AfterClient, AfterServer float64
	// The runtime's breakdown of each process's memory after the wait
	// (memdetail.go).
	AfterClientMem, AfterServerMem MemDetail
	// IdleServerMem is the server's breakdown when idle, before the sweep.
	IdleServerMem MemDetail
}

// idleRSS takes both processes' RSS before any load, each settled.
func idleRSS(ctx context.Context, ctl *controlClient) (client, server float64, err error) {
	settleMemory()
	s, err := ctl.rss(ctx)
	return mb(rssNow()), mb(s), err
}

// measureAfterLoad waits wait after the sweep, with both processes idle,
// and takes their RSS; the peaks are the largest of the points'.
func measureAfterLoad(ctx context.Context, ctl *controlClient, wait time.Duration, idleClient, idleServer float64, results []Result) (afterLoad, error) {
	a := afterLoad{Wait: wait, IdleClient: idleClient, IdleServer: idleServer}
	for _, r := range results {
		a.PeakClient = max(a.PeakClient, r.ClientRSSMB)
		a.PeakServer = max(a.PeakServer, r.ServerRSSMB)
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return a, ctx.Err()
	}
	s, err := ctl.rss(ctx)
	a.AfterClient, a.AfterServer = mb(rssNow()), mb(s)
	if err != nil {
		return a, err
	}
	a.AfterClientMem = memDetailNow()
	a.AfterServerMem, err = ctl.mem(ctx)
	return a, err
}

// within reports whether after is back within 20 % of idle.
func within(after, idle float64) bool { return after <= 1.2*idle }

func (a afterLoad) print(w io.Writer) {
	fmt.Fprintf(w, "\nmemory %v after the load, server idle memory release %s (RSS MB idle before / peak / after; back within 20 %% of idle?):\n", a.Wait, a.releaseText())
	fmt.Fprintf(w, "  client %6.0f / %6.0f / %6.0f  %v\n", a.IdleClient, a.PeakClient, a.AfterClient, within(a.AfterClient, a.IdleClient))
	fmt.Fprintf(w, "  server %6.0f / %6.0f / %6.0f  %v\n", a.IdleServer, a.PeakServer, a.AfterServer, within(a.AfterServer, a.IdleServer))
	fmt.Fprintf(w, "  client after (MB): %v\n  server after (MB): %v\n  server idle  (MB): %v\n", a.AfterClientMem, a.AfterServerMem, a.IdleServerMem)
}

// markdown is the report's section on it.
func (a afterLoad) markdown() string {
	return fmt.Sprintf("\n## Memory after the load\n\n"+
		"RSS of each process idle before the sweep (settled), its peak over the points, and %v after the last point ended, "+
		"with nothing forced in between (no GC, no `FreeOSMemory`) but what the server's idle memory release (%s) does: what a process keeps after a burst. "+
		"The client process holds both paths' clients in turn (closed after each point) and the harness.\n\n"+
		"| process | idle MB | peak MB | after MB | after ÷ idle |\n|---|--:|--:|--:|--:|\n"+
		"| client | %.0f | %.0f | %.0f | %.2f |\n| server | %.0f | %.0f | %.0f | %.2f |\n",
		a.Wait, a.releaseText(), a.IdleClient, a.PeakClient, a.AfterClient, a.AfterClient/a.IdleClient,
		a.IdleServer, a.PeakServer, a.AfterServer, a.AfterServer/a.IdleServer) +
		fmt.Sprintf("\nAfter the wait, as the Go runtime sees it (MB):\n\n- client: %v\n- server: %v\n- server when idle, before the sweep: %v\n", a.AfterClientMem, a.AfterServerMem, a.IdleServerMem)
}

// releaseText says whether the server released memory after the load.
func (a afterLoad) releaseText() string {
	if a.ServerIdleRelease <= 0 {
		return "off"
	}
	return fmt.Sprintf("after %v (WithIdleMemoryRelease)", a.ServerIdleRelease)
}

func mb(b int64) float64 { return float64(b) / (1 << 20) }
