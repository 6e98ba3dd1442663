package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	gometrics "github.com/rcrowley/go-metrics"
)

// The memory a load leaves behind, per path: after the sweep, each path in
// turn runs one more burst (the sweep's largest call point) on a client
// that stays open, as a service keeps its client, starting from both
// processes settled; the harness then drops its own part of the burst
// (the writers end, their histograms go) and waits with nothing forced (no
// GC, no FreeOSMemory but what the libraries' idle memory release does, if
// it is on), and takes both processes' RSS. So each path is charged what
// its own burst left, not what the other path or the sweep before left.

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

// afterLoad is the memory of both processes before the sweep and after
// each path's burst, in MB.
type afterLoad struct {
	Wait time.Duration
	// ServerIdleRelease and ClientIdleRelease are the server's and the
	// batch client's WithIdleMemoryRelease (0: off).
	ServerIdleRelease, ClientIdleRelease time.Duration
	// IdleClient is the client process's RSS before the sweep, settled.
	IdleClient float64
	// Shared says both paths ran against one server process
	// (Config.SharedServer).
	Shared bool
	Paths  []pathAfterLoad
}

// pathAfterLoad is what one path's burst left behind.
type pathAfterLoad struct {
	Path  string
	Burst Point
	// IdleServer is the path's server's RSS before the sweep, settled,
	// and IdleServerMem its breakdown then.
	IdleServer    float64
	IdleServerMem MemDetail
	// Settled* are both processes' RSS settled right before the burst:
	// idle, with the sweep's code and data paged in.
	SettledClient, SettledServer float64
	PeakClient, PeakServer       float64
	AfterClient, AfterServer     float64
	// The runtime's breakdown of each process's memory after the wait
	// (memdetail.go).
	AfterClientMem, AfterServerMem MemDetail
	// ClientReleases are the batch client's idle memory releases during
	// the wait (-1: the path has none).
	ClientReleases int64
}

// idleRSS takes both processes' RSS with no load, each settled.
func idleRSS(ctx context.Context, ctl *controlClient) (client, server float64, err error) {
	settleMemory()
	if _, err := ctl.reset(ctx); err != nil { // settles the server
		return 0, 0, err
	}
	s, err := ctl.rss(ctx)
	return mb(rssNow()), mb(s), err
}

// burstPoint is the point each path's after-load burst repeats: the
// sweep's call point with the most writers (closed loop first), else its
// point with the most writers.
func burstPoint(points []Point) Point {
	best := points[0]
	score := func(p Point) int {
		s := p.Writers * 4
		if p.Op == "call" {
			s += 2 << 30
		}
		if p.PaceMS == 0 {
			s += 1 << 30
		}
		return s
	}
	for _, p := range points[1:] {
		if score(p) > score(best) {
			best = p
		}
	}
	return best
}

// measureAfterLoad runs each path's burst and wait (see above).
func measureAfterLoad(ctx context.Context, cfg Config, envs pathEnvs, points []Point, idleClient float64, stderr io.Writer) (afterLoad, error) {
	a := afterLoad{Wait: cfg.AfterLoad, IdleClient: idleClient, Shared: cfg.SharedServer,
		ServerIdleRelease: cfg.ServerIdleRelease, ClientIdleRelease: cfg.ClientIdleRelease}
	pt := burstPoint(points)
	for _, path := range afterLoadOrder(cfg.runPaths()) {
		env := envs[path]
		if env == nil || !offers(path, pt.Op) {
			continue
		}
		fmt.Fprintf(stderr, "after the load, %s: %s w=%d pace=%dms × %d on a client kept open, then %v idle\n",
			path, pt.Op, pt.Writers, pt.PaceMS, pt.Messages, cfg.AfterLoad)
		p, err := pathAfter(ctx, env, pt, path)
		if err != nil {
			return a, fmt.Errorf("after the load, %s: %w", path, err)
		}
		a.Paths = append(a.Paths, p)
	}
	return a, nil
}

// afterLoadOrder is the order the paths' bursts run in: rpcxbatch's
// first (with a shared server, a burst meets what the ones before left).
func afterLoadOrder(paths []string) []string {
	var out []string
	for _, p := range paths {
		if batchTransport(p) {
			out = append(out, p)
		}
	}
	for _, p := range paths {
		if !batchTransport(p) {
			out = append(out, p)
		}
	}
	return out
}

// pathAfter is one path's burst and wait.
func pathAfter(ctx context.Context, env *runEnv, pt Point, path string) (pathAfterLoad, error) {
	p := pathAfterLoad{Path: path, Burst: pt, ClientReleases: -1, IdleServer: env.idleServer, IdleServerMem: env.idleServerMem}
	t, err := dialTarget(path, pt.Op, env.srv.addr, env.cfg)
	if err != nil {
		return p, err
	}
	defer t.close()
	if p.SettledClient, p.SettledServer, err = idleRSS(ctx, env.ctl); err != nil {
		return p, err
	}
	m, err := runOn(ctx, env, t, pt, path)
	if err != nil {
		return p, err
	}
	p.PeakClient, p.PeakServer = mb(m.clientRSS), mb(m.server.PeakRSS)
	releases := func() int64 {
		if bt, ok := t.(*batchTarget); ok {
			if c, ok := bt.c.Metrics().Get("rpcxbatch.client.memory_releases").(gometrics.Counter); ok {
				return c.Count()
			}
			return 0
		}
		return -1
	}
	before := releases()
	w := time.NewTimer(env.cfg.AfterLoad)
	defer w.Stop()
	select {
	case <-w.C:
	case <-ctx.Done():
		return p, ctx.Err()
	}
	s, err := env.ctl.rss(ctx)
	p.AfterClient, p.AfterServer = mb(rssNow()), mb(s)
	if err != nil {
		return p, err
	}
	if before >= 0 {
		p.ClientReleases = releases() - before
	}
	p.AfterClientMem = memDetailNow()
	if p.AfterServerMem, err = env.ctl.mem(ctx); err != nil {
		return p, err
	}
	return p, writeHeapProfile(path)
}

// within reports whether after is back within 20 % of idle.
func within(after, idle float64) bool { return after <= 1.2*idle }

func (a afterLoad) print(w io.Writer) {
	fmt.Fprintf(w, "\nmemory %v after the load, per path (its own burst, client kept open), idle memory release server %s, batch client %s (RSS MB idle before the sweep / settled before the burst / peak / after; back within 20 %% of settled?):\n",
		a.Wait, releaseText(a.ServerIdleRelease), releaseText(a.ClientIdleRelease))
	for _, p := range a.Paths {
		fmt.Fprintf(w, "  %-6s burst %s w=%d pace=%dms%s\n", p.Path, p.Burst.Op, p.Burst.Writers, p.Burst.PaceMS, p.releasesText())
		fmt.Fprintf(w, "    client %6.0f / %6.0f / %6.0f / %6.0f  %v\n", a.IdleClient, p.SettledClient, p.PeakClient, p.AfterClient, within(p.AfterClient, p.SettledClient))
		fmt.Fprintf(w, "    server %6.0f / %6.0f / %6.0f / %6.0f  %v\n", p.IdleServer, p.SettledServer, p.PeakServer, p.AfterServer, within(p.AfterServer, p.SettledServer))
		fmt.Fprintf(w, "    client after (MB): %v\n    server after (MB): %v\n", p.AfterClientMem, p.AfterServerMem)
		fmt.Fprintf(w, "    server idle before the sweep (MB): %v\n", p.IdleServerMem)
	}
}

func (p pathAfterLoad) releasesText() string {
	if p.ClientReleases < 0 {
		return ""
	}
	return fmt.Sprintf(", client idle releases during the wait: %d", p.ClientReleases)
}

// markdown is the report's section on it.
func (a afterLoad) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n## Memory after the load\n\n"+
		"Per path, after the sweep: both processes settled (a collection, free memory returned to the OS), one more burst "+
		"on a client kept open, as a service keeps its client; the harness drops its own part of the burst (writers, histograms) "+
		"and waits %v with nothing forced but what the libraries' idle memory release does (server: %s; batch client: %s). "+
		"\"idle\" is the process before the sweep, \"settled\" right before the burst (idle, with the sweep's code and data paged in, "+
		"and the g structs of the most goroutines the process ever ran at once, which the Go runtime never frees, about 0.4 KB each: "+
		"see the points' client_goroutines_peak; plain rpcx's oneway calls can run 100,000 and more). %s\n\n"+
		"| path | burst | process | idle MB | settled MB | peak MB | after MB | after ÷ settled | after ÷ idle |\n|---|---|---|--:|--:|--:|--:|--:|--:|\n",
		a.Wait, releaseText(a.ServerIdleRelease), releaseText(a.ClientIdleRelease), a.serversText())
	for _, p := range a.Paths {
		burst := fmt.Sprintf("%s w=%d pace=%d", p.Burst.Op, p.Burst.Writers, p.Burst.PaceMS)
		fmt.Fprintf(&b, "| %s | %s | client | %.0f | %.0f | %.0f | %.0f | %.2f | %.2f |\n", p.Path, burst,
			a.IdleClient, p.SettledClient, p.PeakClient, p.AfterClient, p.AfterClient/p.SettledClient, p.AfterClient/a.IdleClient)
		fmt.Fprintf(&b, "| %s | %s | server | %.0f | %.0f | %.0f | %.0f | %.2f | %.2f |\n", p.Path, burst,
			p.IdleServer, p.SettledServer, p.PeakServer, p.AfterServer, p.AfterServer/p.SettledServer, p.AfterServer/p.IdleServer)
	}
	b.WriteString("\nAfter the wait, as the Go runtime sees it (MB):\n\n")
	for _, p := range a.Paths {
		fmt.Fprintf(&b, "- %s, client: %v%s\n- %s, server: %v\n- %s, server when idle, before the sweep: %v\n",
			p.Path, p.AfterClientMem, p.releasesText(), p.Path, p.AfterServerMem, p.Path, p.IdleServerMem)
	}
	return b.String()
}

// serversText says which server process each path's burst ran against.
func (a afterLoad) serversText() string {
	if a.Shared {
		return "Every path's burst runs against the same server process, the rpcxbatch paths' first."
	}
	return "Each path's burst runs against its own server process, the one its sweep points ran against."
}

// releaseText says whether a process released memory after the load.
func releaseText(d time.Duration) string {
	if d <= 0 {
		return "off"
	}
	return fmt.Sprintf("after %v (WithIdleMemoryRelease)", d)
}

func mb(b int64) float64 { return float64(b) / (1 << 20) }
