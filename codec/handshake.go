package codec

import "fmt"

// Handshake is what a batch server tells a client lane before the lane sends
// any frame: the protocol it speaks, how many lanes it wants per client, its
// caps, and the incarnation it was started with.
type Handshake struct {
	Version uint64
	// PoolSize is the number of lanes the server asks each client to open.
	PoolSize int
	// BatchCap is the most entries the server accepts in one frame.
	BatchCap int
	// MaxFrameBytes is the largest frame the server accepts.
	MaxFrameBytes int
	// Incarnation is a random id drawn when the server started; a new value
	// at the same address means the server restarted.
	Incarnation uint64
}

// AppendHandshake encodes h.
func AppendHandshake(dst []byte, h *Handshake) []byte {
	dst = appendArrayLen(dst, 5)
	dst = appendUint(dst, h.Version)
	dst = appendUint(dst, uint64(h.PoolSize))
	dst = appendUint(dst, uint64(h.BatchCap))
	dst = appendUint(dst, uint64(h.MaxFrameBytes))
	return appendUint(dst, h.Incarnation)
}

// DecodeHandshake decodes a handshake and checks its version.
func DecodeHandshake(b []byte) (Handshake, error) {
	var h Handshake
	r := &reader{b: b}
	if err := r.fixed("handshake", 5); err != nil {
		return h, err
	}
	fields := []*uint64{&h.Version, nil, nil, nil, &h.Incarnation}
	var ints [3]uint64
	fields[1], fields[2], fields[3] = &ints[0], &ints[1], &ints[2]
	for _, f := range fields {
		v, err := r.uint("handshake field")
		if err != nil {
			return h, err
		}
		*f = v
	}
	if h.Version != Version {
		return h, fmt.Errorf("%w: server speaks %d, this client %d", ErrVersion, h.Version, Version)
	}
	if r.left() != 0 {
		return h, fmt.Errorf("%w: %d trailing bytes after the handshake", ErrMalformed, r.left())
	}
	const maxInt = int(^uint(0) >> 1)
	for _, v := range ints {
		if v == 0 || v > uint64(maxInt) {
			return h, fmt.Errorf("%w: handshake field %d out of range", ErrMalformed, v)
		}
	}
	h.PoolSize, h.BatchCap, h.MaxFrameBytes = int(ints[0]), int(ints[1]), int(ints[2])
	return h, nil
}
