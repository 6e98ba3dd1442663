// Package sockout reports how much of what was written to a connection its
// peer has not yet acknowledged: bytes a Write handed to the kernel that
// may still be lost when the socket is closed.
//
// A Write returns once its bytes are in the socket's send buffer, not once
// the peer has them. Closing a TCP socket that holds unread input makes
// Linux reset the connection and drop what the send buffer still holds,
// so a server that closes a connection right after writing its replies
// (rpcx's Shutdown does) can lose them while the peer reads slowly.
package sockout

import (
	"net"
	"reflect"
)

// Unacked returns the bytes written to c that its peer has not yet
// acknowledged, and whether it could tell: only for TCP on Linux, seen
// through the wrappers rpcx's connections come in (TLS, and cmux's, which
// rpcx's listener hands out when its HTTP gateway is on); elsewhere, and
// on a closed connection, ok is false.
func Unacked(c net.Conn) (n int, ok bool) {
	tc, isTCP := tcpConn(c)
	if !isTCP {
		return 0, false
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return 0, false
	}
	return unacked(rc)
}

// tcpConn unwraps c down to its *net.TCPConn, if it has one.
func tcpConn(c net.Conn) (*net.TCPConn, bool) {
	for range 4 {
		switch v := c.(type) {
		case *net.TCPConn:
			return v, true
		case interface{ NetConn() net.Conn }:
			c = v.NetConn()
		default:
			if c = embeddedConn(c); c == nil {
				return nil, false
			}
		}
	}
	return nil, false
}

// embeddedConn returns the net.Conn c embeds (as cmux.MuxConn does), or
// nil.
func embeddedConn(c net.Conn) net.Conn {
	v := reflect.ValueOf(c)
	if v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return nil
	}
	f, ok := v.Type().FieldByName("Conn")
	if !ok || !f.Anonymous {
		return nil
	}
	inner, _ := v.FieldByIndex(f.Index).Interface().(net.Conn)
	return inner
}
