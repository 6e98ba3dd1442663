package codec

import (
	"encoding/binary"
	"fmt"
	"io"

	"github.com/smallnest/rpcx/protocol"
)

// headerLen is the fixed rpcx header plus the 4-byte total length.
const headerLen = 12 + 4

// Message is an rpcx protocol message as rpcxbatch reads it off a lane. Its
// byte fields alias the buffer passed to ReadMessage.
type Message struct {
	Header        protocol.Header
	ServicePath   string
	ServiceMethod string
	Metadata      map[string]string
	Payload       []byte
}

// MessageMark remembers where a message started by StartMessage lies in its
// buffer, so that FinishMessage can fill in the lengths once the payload has
// been appended in place.
type MessageMark struct {
	start, payloadLen int
}

// StartMessage appends an rpcx message's header, service path, method and
// metadata to dst; the caller then appends the payload directly (no copy)
// and calls FinishMessage. The result is byte for byte what rpcx's own
// protocol.Message.Encode writes, so rpcx servers and cmux read it unchanged.
func StartMessage(dst []byte, h *protocol.Header, path, method string, meta map[string]string) ([]byte, MessageMark) {
	m := MessageMark{start: len(dst)}
	dst = append(dst, h[:]...)
	dst = append(dst, 0, 0, 0, 0) // total length, patched by FinishMessage
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(path)))
	dst = append(dst, path...)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(method)))
	dst = append(dst, method...)
	lenAt := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	for k, v := range meta {
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(k)))
		dst = append(dst, k...)
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(v)))
		dst = append(dst, v...)
	}
	binary.BigEndian.PutUint32(dst[lenAt:], uint32(len(dst)-lenAt-4))
	m.payloadLen = len(dst)
	return append(dst, 0, 0, 0, 0), m
}

// FinishMessage patches the lengths of the message that m marks, whose
// payload runs to the end of b.
func FinishMessage(b []byte, m MessageMark) {
	binary.BigEndian.PutUint32(b[m.start+12:], uint32(len(b)-m.start-headerLen))
	binary.BigEndian.PutUint32(b[m.payloadLen:], uint32(len(b)-m.payloadLen-4))
}

// AppendMessage appends a whole rpcx message with the given payload.
func AppendMessage(dst []byte, h *protocol.Header, path, method string, meta map[string]string, payload []byte) []byte {
	dst, m := StartMessage(dst, h, path, method, meta)
	dst = append(dst, payload...)
	FinishMessage(dst, m)
	return dst
}

// ReadMessage reads one rpcx message from r into buf (grown when too small,
// and returned for reuse, its length the message's). A message whose declared length exceeds maxBytes
// is refused with ErrFrameTooLarge before its body is allocated or read,
// and so is a compressed payload that unpacks to more than maxBytes.
func ReadMessage(r io.Reader, maxBytes int, buf []byte) (Message, []byte, error) {
	return ReadMessageInflate(r, maxBytes, maxBytes, buf)
}

// ReadMessageInflate is ReadMessage with a bound of its own, maxInflated,
// on what a compressed payload unpacks to.
func ReadMessageInflate(r io.Reader, maxBytes, maxInflated int, buf []byte) (Message, []byte, error) {
	var msg Message
	var head [headerLen]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return msg, buf, err
	}
	copy(msg.Header[:], head[:12])
	if !msg.Header.CheckMagicNumber() {
		return msg, buf, fmt.Errorf("%w: bad magic number 0x%02x", ErrMalformed, head[0])
	}
	total := binary.BigEndian.Uint32(head[12:])
	if uint64(total) > uint64(maxBytes) {
		return msg, buf, fmt.Errorf("%w: message of %d bytes, cap %d", ErrFrameTooLarge, total, maxBytes)
	}
	if cap(buf) < int(total) {
		buf = make([]byte, total)
	}
	body := buf[:total]
	if _, err := io.ReadFull(r, body); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return msg, buf, err
	}
	err := parseBody(&msg, body, maxInflated)
	return msg, body, err
}

func parseBody(msg *Message, body []byte, maxBytes int) error {
	next := func(what string) ([]byte, error) {
		if len(body) < 4 {
			return nil, fmt.Errorf("%w: message %s length missing", ErrMalformed, what)
		}
		n := binary.BigEndian.Uint32(body)
		if uint64(n) > uint64(len(body)-4) {
			return nil, fmt.Errorf("%w: message %s of %d bytes overruns the message", ErrMalformed, what, n)
		}
		p := body[4 : 4+n]
		body = body[4+n:]
		return p, nil
	}
	path, err := next("service path")
	if err != nil {
		return err
	}
	method, err := next("service method")
	if err != nil {
		return err
	}
	meta, err := next("metadata")
	if err != nil {
		return err
	}
	payload, err := next("payload")
	if err != nil {
		return err
	}
	msg.ServicePath, msg.ServiceMethod, msg.Payload = name(path), name(method), payload
	if len(meta) > 0 {
		if msg.Metadata, err = parseMeta(meta); err != nil {
			return err
		}
	}
	if ct := msg.Header.CompressType(); ct != protocol.None {
		if msg.Payload, err = unzip(ct, msg.Payload, maxBytes); err != nil {
			return err
		}
	}
	return nil
}

// name returns b as a string, without allocating for the names lanes read
// in every message (a reply frame and the credit beside it would otherwise
// cost two strings each).
func name(b []byte) string {
	switch string(b) {
	case "":
		return ""
	case ServicePath:
		return ServicePath
	case MethodReply:
		return MethodReply
	case MethodCredit:
		return MethodCredit
	}
	return string(b)
}

// unzip decompresses a payload, refusing one that expands beyond maxBytes:
// the byte cap holds for what a message unpacks to, not only for what it
// weighs on the wire.
func unzip(ct protocol.CompressType, p []byte, maxBytes int) ([]byte, error) {
	return inflate(ct, p, maxBytes)
}

func parseMeta(b []byte) (map[string]string, error) {
	m := make(map[string]string, 4)
	for len(b) > 0 {
		var kv [2]string
		for i := range kv {
			if len(b) < 4 {
				return nil, fmt.Errorf("%w: metadata truncated", ErrMalformed)
			}
			n := binary.BigEndian.Uint32(b)
			if uint64(n) > uint64(len(b)-4) {
				return nil, fmt.Errorf("%w: metadata entry overruns", ErrMalformed)
			}
			kv[i] = string(b[4 : 4+n])
			b = b[4+n:]
		}
		m[kv[0]] = kv[1]
	}
	return m, nil
}
