package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"syscall"
	"time"

	etcdclient "github.com/rpcxio/rpcx-etcd/client"
	"github.com/smallnest/rpcx/client"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/codec"
)

// The two paths every call runs over: rpcx's XClient and the drop-in.
const (
	pathPlainX = "plainx"
	pathDropin = "dropin"
)

// paths are the paths in table order.
var paths = []string{pathPlainX, pathDropin}

// pathLabel names a path for people.
var pathLabel = map[string]string{pathPlainX: "rpcx XClient", pathDropin: "drop-in"}

// Errors the set-up and the first call end with, each one line.
var (
	// ErrNoServer: the discovery lists no server of the service.
	ErrNoServer = errors.New("no server")
	// ErrUnreachable: a server, or etcd, does not answer.
	ErrUnreachable = errors.New("cannot reach")
	// ErrNoSuchService and ErrNoSuchMethod: the server has no such
	// service, or the service no such method.
	ErrNoSuchService = errors.New("no such service")
	ErrNoSuchMethod  = errors.New("no such method")
	// ErrRejected: the service answered the first call with an error.
	ErrRejected = errors.New("the service answered with an error")
	// ErrTimeout: the first call did not end within -timeout.
	ErrTimeout = errors.New("no reply in time")
)

// target is the service under test: an XClient per path, each over its
// own discovery, and the drop-in's Client, whose per-server state says
// whether a server has the plugin.
type target struct {
	cfg   Config
	xc    map[string]client.XClient
	discs []client.ServiceDiscovery
	bc    *batchclient.Client
}

// rpcxOption is the rpcx option both XClients get.
func rpcxOption(cfg Config) client.Option {
	opt := client.DefaultOption
	opt.SerializeType = cfg.Serialize
	opt.ConnectTimeout = 3 * time.Second
	return opt
}

// newDiscovery is cfg's discovery of the service: a static list, or
// rpcx-etcd's discovery under the base path (whose store gives up on an
// etcd that does not answer after its default 10 s).
func newDiscovery(cfg Config) (client.ServiceDiscovery, error) {
	if len(cfg.Etcd) > 0 {
		d, err := etcdclient.NewEtcdV3Discovery(cfg.BasePath, cfg.Service, cfg.Etcd, true, nil)
		if err != nil {
			return nil, fmt.Errorf("%w etcd at %s: %v", ErrUnreachable, strings.Join(cfg.Etcd, ","), err)
		}
		return d, nil
	}
	var pairs []*client.KVPair
	for _, a := range cfg.Addrs {
		if _, _, err := net.SplitHostPort(a); err != nil {
			return nil, fmt.Errorf("-addr %q: want host:port", a)
		}
		pairs = append(pairs, &client.KVPair{Key: "tcp@" + a})
	}
	return client.NewMultipleServersDiscovery(pairs)
}

// dial makes both paths' XClients. They connect on their first call.
func dial(cfg Config) (*target, error) {
	t := &target{cfg: cfg, xc: map[string]client.XClient{}}
	opt := rpcxOption(cfg)
	for _, path := range paths {
		d, err := newDiscovery(cfg)
		if err != nil {
			t.close()
			return nil, err
		}
		t.discs = append(t.discs, d)
		if path == pathPlainX {
			t.xc[path] = client.NewXClient(cfg.Service, cfg.FailMode, cfg.SelectMode, d, opt)
			continue
		}
		// The drop-in as NewXClient makes it, over a Client the tool
		// keeps, to read each server's state from.
		if t.bc, err = batchclient.New(batchclient.FromRPCX(opt)); err != nil {
			t.close()
			return nil, fmt.Errorf("drop-in: %w", err)
		}
		t.xc[path] = batchclient.NewXClientWith(t.bc, cfg.Service, cfg.FailMode, cfg.SelectMode, d, opt)
	}
	if len(t.servers()) == 0 {
		where := strings.Join(cfg.Addrs, ",")
		if len(cfg.Etcd) > 0 {
			where = fmt.Sprintf("%s/%s in etcd at %s", strings.TrimSuffix(cfg.BasePath, "/"), cfg.Service, strings.Join(cfg.Etcd, ","))
		}
		t.close()
		return nil, fmt.Errorf("%w of %s under %s", ErrNoServer, cfg.Service, where)
	}
	return t, nil
}

// close closes the XClients, the drop-in's Client and the discoveries.
func (t *target) close() {
	for _, xc := range t.xc {
		xc.Close()
	}
	if t.bc != nil {
		t.bc.Close()
	}
	for _, d := range t.discs {
		d.Close()
	}
}

// call is one call over path with a fresh context bounded by the timeout.
func (t *target) call(ctx context.Context, path string, args, reply any) error {
	if t.cfg.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t.cfg.Timeout)
		defer cancel()
	}
	return t.xc[path].Call(ctx, t.cfg.Method, args, reply)
}

// probe makes one call over each path, before any load: the first error
// ends the run, told in a line of its own (probeError). It returns the
// reply, for the header.
func (t *target) probe(ctx context.Context, args any) (string, error) {
	var shown string
	for _, path := range paths {
		reply := newReply(t.cfg.Serialize)
		if err := t.call(ctx, path, args, reply); err != nil {
			return "", t.probeError(path, err)
		}
		if shown == "" {
			shown = replyText(reply)
		}
	}
	return shown, nil
}

// probeError says what a first call's error means for the user.
func (t *target) probeError(path string, err error) error {
	call := t.cfg.Service + "." + t.cfg.Method
	msg := oneLine(err.Error())
	var se client.ServiceError
	switch {
	case strings.Contains(msg, "can't find service"):
		return fmt.Errorf("%w: the server has no service %q (%s)", ErrNoSuchService, t.cfg.Service, msg)
	case strings.Contains(msg, "can't find method"):
		return fmt.Errorf("%w: service %s has no method %q (%s)", ErrNoSuchMethod, t.cfg.Service, t.cfg.Method, msg)
	case errors.As(err, &se):
		return fmt.Errorf("%w: %s over the %s: %s (do -args' field names and types match what %s decodes? rpcxbench -h)",
			ErrRejected, call, pathLabel[path], msg, call)
	case errors.Is(err, client.ErrXClientNoServer):
		return fmt.Errorf("%w of %s to call (%s)", ErrNoServer, t.cfg.Service, msg)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%w: %s took longer than -timeout %v", ErrTimeout, call, t.cfg.Timeout)
	case isUnreachable(err):
		return fmt.Errorf("%w the server: %s", ErrUnreachable, msg)
	}
	return fmt.Errorf("%s over the %s: %s", call, pathLabel[path], msg)
}

// isUnreachable reports a connection that could not be made or was lost.
func isUnreachable(err error) bool {
	var ne net.Error
	var oe *net.OpError
	return errors.As(err, &oe) || errors.As(err, &ne) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, client.ErrShutdown)
}

// server is one server the discovery lists and what the drop-in found
// there.
type server struct {
	Addr string `json:"addr"`
	// Plugin is "yes" (the drop-in's calls went over lanes), "no" (the
	// server answered that it has no rpcxbatch plugin: the drop-in fell
	// back to plain rpcx), "advertised no" (its registry metadata says
	// rpcxbatch=0: the drop-in calls it over plain rpcx without asking),
	// "not tcp" (only tcp servers have lanes) or "unknown" (no call of the
	// drop-in has reached it yet).
	Plugin string `json:"plugin"`
	Lanes  int    `json:"lanes,omitempty"`
}

// servers lists the service's servers with what the drop-in found there.
func (t *target) servers() []server {
	var out []server
	for _, p := range t.discs[0].GetServices() {
		network, addr, found := strings.Cut(p.Key, "@")
		if !found {
			network, addr = "tcp", p.Key
		}
		s := server{Addr: addr, Plugin: "unknown"}
		switch {
		case network != "tcp":
			s.Plugin = "not tcp"
		case advertisedPlain(p.Value):
			s.Plugin = "advertised no"
		case t.bc != nil:
			in := t.bc.Info(addr)
			switch {
			case in.Plain:
				s.Plugin = "no"
			case in.Status == batchclient.Connected && in.Lanes > 0:
				s.Plugin, s.Lanes = "yes", in.Lanes
			}
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b server) int { return strings.Compare(a.Addr, b.Addr) })
	return out
}

// advertisedPlain reports registry metadata that says rpcxbatch=0, as
// plugin.Advertise publishes it for a server without the plugin.
func advertisedPlain(meta string) bool {
	v, err := url.ParseQuery(meta)
	return err == nil && v.Get(codec.MetaBatch) == "0"
}

// pluginSummary is the servers' plugin states in one word: "yes", "no"
// (none has it: the drop-in's figures are plain rpcx's), "mixed", or
// "unknown".
func pluginSummary(ss []server) string {
	yes, no := 0, 0
	for _, s := range ss {
		switch s.Plugin {
		case "yes":
			yes++
		case "no", "advertised no", "not tcp":
			no++
		}
	}
	switch {
	case yes > 0 && no == 0:
		return "yes"
	case no > 0 && yes == 0:
		return "no"
	case yes > 0:
		return "mixed"
	}
	return "unknown"
}

// oneLine is s with its line breaks turned into "; ".
func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " ; ")), " ")
}
