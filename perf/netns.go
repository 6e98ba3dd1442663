package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"time"
)

// netns is the optional two-host setup: the server runs in a network
// namespace of its own, joined to the harness by a veth pair, so the
// traffic crosses a real (virtual) link with its own qdisc rather than
// loopback, optionally shaped by tc netem. The namespace, the pair and the
// /30 between them are created here and removed by cleanup; nothing else
// on the machine is touched or addressed.
type netns struct {
	name, hostIf, srvIf string
	hostIP, serverIP    string
	created             []string // what cleanup has to undo, for its log
}

// netnsPrefix is an address block for the pair. 10.0.0.0/8 is private; the
// /30 within it is derived from the pid so two harnesses do not collide,
// and it exists only on the two ends of the pair.
var netnsPrefix = netip.MustParsePrefix("10.251.0.0/16")

func setupNetns(ctx context.Context, cfg Config, log io.Writer) (*netns, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("-netns needs root (ip netns add)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return nil, fmt.Errorf("-netns needs iproute2: %w", err)
	}
	pid := os.Getpid()
	base := netnsPrefix.Addr().As4()
	slot := pid % (1 << 14) // 16,384 /30s in the /16
	base[2], base[3] = byte(slot>>6), byte(slot&63)<<2
	hostIP := netip.AddrFrom4(base).Next()
	n := &netns{
		name:   fmt.Sprintf("rpcxperf%d", pid),
		hostIf: fmt.Sprintf("rpxh%d", pid%10000000), // interface names: 15 bytes at most
		srvIf:  fmt.Sprintf("rpxs%d", pid%10000000),
		hostIP: hostIP.String(), serverIP: hostIP.Next().String(),
	}
	steps := [][]string{
		{"ip", "netns", "add", n.name},
		{"ip", "link", "add", n.hostIf, "type", "veth", "peer", "name", n.srvIf},
		{"ip", "link", "set", n.srvIf, "netns", n.name},
		{"ip", "addr", "add", n.hostIP + "/30", "dev", n.hostIf},
		{"ip", "link", "set", n.hostIf, "up"},
		{"ip", "-n", n.name, "addr", "add", n.serverIP + "/30", "dev", n.srvIf},
		{"ip", "-n", n.name, "link", "set", n.srvIf, "up"},
		{"ip", "-n", n.name, "link", "set", "lo", "up"},
	}
	if netem := netemArgs(cfg); netem != nil {
		steps = append(steps,
			append([]string{"tc", "qdisc", "add", "dev", n.hostIf, "root", "netem"}, netem...),
			append([]string{"ip", "netns", "exec", n.name, "tc", "qdisc", "add", "dev", n.srvIf, "root", "netem"}, netem...))
	}
	for i, s := range steps {
		if err := runCmd(ctx, s); err != nil {
			n.cleanup(log)
			return nil, fmt.Errorf("-netns: %w", err)
		}
		if i == 0 {
			n.created = append(n.created, "namespace "+n.name)
		}
		if i == 1 {
			n.created = append(n.created, "veth "+n.hostIf)
		}
	}
	fmt.Fprintf(log, "netns %s: harness %s on %s, server %s on %s, netem %q\n",
		n.name, n.hostIP, n.hostIf, n.serverIP, n.srvIf, strings.Join(netemArgs(cfg), " "))
	return n, nil
}

// netemArgs are the tc netem parameters, or nil for an unshaped link.
func netemArgs(cfg Config) []string {
	var a []string
	if cfg.NetemRate != "" {
		a = append(a, "rate", cfg.NetemRate)
	}
	if cfg.NetemDelay != "" {
		a = append(a, "delay", cfg.NetemDelay)
	}
	return a
}

// execPrefix runs a command inside the namespace.
func (n *netns) execPrefix() []string { return []string{"ip", "netns", "exec", n.name} }

// cleanup removes the namespace (which takes its end of the pair, and so
// the pair, with it) and the host end if it is still there. Errors are
// logged, not returned: cleanup runs on the way out.
func (n *netns) cleanup(log io.Writer) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, s := range [][]string{{"ip", "netns", "del", n.name}, {"ip", "link", "del", n.hostIf}} {
		_ = runCmd(ctx, s) // either may already be gone
	}
	if len(n.created) > 0 {
		fmt.Fprintf(log, "netns: removed %s\n", strings.Join(n.created, ", "))
	}
}

func runCmd(ctx context.Context, argv []string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
