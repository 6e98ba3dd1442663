//go:build !linux

package lane

import "net"

// unreadBytes cannot tell on this system; the heartbeat then judges by what
// was read alone.
func unreadBytes(net.Conn) int { return 0 }
