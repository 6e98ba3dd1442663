package childproc

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// RSS is the child's resident set size in bytes (Linux: /proc).
func (c *Child) RSS() (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", c.Pid()))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", c.Pid())
}

// Sockets counts the child's open sockets (Linux: /proc), its listener
// among them.
func (c *Child) Sockets() (int, error) {
	dir := fmt.Sprintf("/proc/%d/fd", c.Pid())
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range ents {
		if target, err := os.Readlink(dir + "/" + e.Name()); err == nil && strings.HasPrefix(target, "socket:") {
			n++
		}
	}
	return n, nil
}
