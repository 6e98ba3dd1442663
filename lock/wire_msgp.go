package lock

import (
	"fmt"

	"github.com/tinylib/msgp/msgp"
)

// The hot wire types encode themselves (msgp.Marshaler and Unmarshaler,
// which rpcx's msgpack codec and the batch path's both use before
// reflection): a map of field name to value, the bytes vmihailenco's
// msgpack writes for the same struct, so either side may be the other.
// Every two-node lock sends an AcquireArgs and a ReleaseArgs and gets an
// AcquireReply and an Ack back, so msgpack's reflection on them showed in
// a node's CPU profile (perf/locks).

var (
	_ msgp.Marshaler   = (*AcquireArgs)(nil)
	_ msgp.Unmarshaler = (*AcquireArgs)(nil)
	_ msgp.Marshaler   = (*AcquireReply)(nil)
	_ msgp.Unmarshaler = (*AcquireReply)(nil)
	_ msgp.Marshaler   = (*ReleaseArgs)(nil)
	_ msgp.Unmarshaler = (*ReleaseArgs)(nil)
	_ msgp.Marshaler   = (*AbortArgs)(nil)
	_ msgp.Unmarshaler = (*AbortArgs)(nil)
	_ msgp.Marshaler   = (*DropArgs)(nil)
	_ msgp.Unmarshaler = (*DropArgs)(nil)
)

func appendOwner(b []byte, id OwnerID) []byte {
	b = msgp.AppendMapHeader(b, 2)
	b = msgp.AppendString(b, "Node")
	b = msgp.AppendUint64(b, id.Node)
	b = msgp.AppendString(b, "Seq")
	return msgp.AppendUint64(b, id.Seq)
}

func readOwner(b []byte) (OwnerID, []byte, error) {
	var id OwnerID
	if msgp.IsNil(b) {
		b, err := msgp.ReadNilBytes(b)
		return id, b, err
	}
	n, b, err := msgp.ReadMapHeaderBytes(b)
	if err != nil {
		return id, b, err
	}
	for range n {
		var k []byte
		if k, b, err = msgp.ReadMapKeyZC(b); err != nil {
			return id, b, err
		}
		switch string(k) {
		case "Node":
			id.Node, b, err = msgp.ReadUint64Bytes(b)
		case "Seq":
			id.Seq, b, err = msgp.ReadUint64Bytes(b)
		default:
			b, err = msgp.Skip(b)
		}
		if err != nil {
			return id, b, err
		}
	}
	return id, b, nil
}

// appendStrings writes nil for a nil slice, as msgpack does.
func appendStrings(b []byte, s []string) []byte {
	if s == nil {
		return msgp.AppendNil(b)
	}
	b = msgp.AppendArrayHeader(b, uint32(len(s)))
	for _, x := range s {
		b = msgp.AppendString(b, x)
	}
	return b
}

func readStrings(b []byte) ([]string, []byte, error) {
	return readStringsInto(b, nil)
}

// readStringsInto is readStrings into buf's storage when the list fits
// in it (a value's own one-key array), else into a slice of its own.
func readStringsInto(b []byte, buf []string) ([]string, []byte, error) {
	if msgp.IsNil(b) {
		b, err := msgp.ReadNilBytes(b)
		return nil, b, err
	}
	n, b, err := msgp.ReadArrayHeaderBytes(b)
	if err != nil {
		return nil, b, err
	}
	if uint32(len(b)) < n {
		// Every string takes a byte at least: a count past the input is
		// a broken message, not an allocation to make.
		return nil, b, msgp.ErrShortBytes
	}
	var out []string
	if buf != nil && int(n) <= cap(buf) {
		out = buf[:n]
	} else {
		out = make([]string, n)
	}
	for i := range out {
		if out[i], b, err = msgp.ReadStringBytes(b); err != nil {
			return nil, b, err
		}
	}
	return out, b, nil
}

// MarshalMsg appends a's msgpack encoding to b.
func (a *AcquireArgs) MarshalMsg(b []byte) ([]byte, error) {
	fields := uint32(10)
	if a.ReleasedAll {
		// Written only when set: the reader's zero value is false.
		fields++
	}
	b = msgp.AppendMapHeader(b, fields)
	b = msgp.AppendString(b, "Owner")
	b = appendOwner(b, a.Owner)
	b = msgp.AppendString(b, "Age")
	b = msgp.AppendInt64(b, a.Age)
	b = msgp.AppendString(b, "Origin")
	b = msgp.AppendString(b, a.Origin)
	b = msgp.AppendString(b, "OriginInc")
	b = msgp.AppendUint64(b, a.OriginInc)
	b = msgp.AppendString(b, "Seq")
	b = msgp.AppendUint64(b, a.Seq)
	b = msgp.AppendString(b, "LastOK")
	b = msgp.AppendUint64(b, a.LastOK)
	b = msgp.AppendString(b, "Mode")
	b = msgp.AppendUint8(b, uint8(a.Mode))
	b = msgp.AppendString(b, "Keys")
	b = appendStrings(b, a.Keys)
	b = msgp.AppendString(b, "Released")
	b = appendStrings(b, a.Released)
	b = msgp.AppendString(b, "Holds")
	b = msgp.AppendBool(b, a.Holds)
	if a.ReleasedAll {
		b = msgp.AppendString(b, "ReleasedAll")
		b = msgp.AppendBool(b, true)
	}
	return b, nil
}

// UnmarshalMsg decodes a from the front of b and returns the rest.
func (a *AcquireArgs) UnmarshalMsg(b []byte) ([]byte, error) {
	// A value decoded into again (rpcx's UsePool) keeps nothing of its
	// last message: the encoder leaves empty fields out.
	*a = AcquireArgs{}
	n, b, err := msgp.ReadMapHeaderBytes(b)
	if err != nil {
		return b, fmt.Errorf("AcquireArgs: %w", err)
	}
	for range n {
		var k []byte
		if k, b, err = msgp.ReadMapKeyZC(b); err != nil {
			return b, fmt.Errorf("AcquireArgs: %w", err)
		}
		switch string(k) {
		case "Owner":
			a.Owner, b, err = readOwner(b)
		case "Age":
			a.Age, b, err = msgp.ReadInt64Bytes(b)
		case "Origin":
			var o []byte
			if o, b, err = msgp.ReadStringZC(b); err == nil {
				a.Origin = internBytes(o)
			}
		case "OriginInc":
			a.OriginInc, b, err = msgp.ReadUint64Bytes(b)
		case "Seq":
			a.Seq, b, err = msgp.ReadUint64Bytes(b)
		case "LastOK":
			a.LastOK, b, err = msgp.ReadUint64Bytes(b)
		case "Mode":
			var m uint8
			m, b, err = msgp.ReadUint8Bytes(b)
			a.Mode = Mode(m)
		case "Keys":
			a.Keys, b, err = readStringsInto(b, a.keys1[:0])
		case "Released":
			a.Released, b, err = readStrings(b)
		case "Holds":
			a.Holds, b, err = msgp.ReadBoolBytes(b)
		case "ReleasedAll":
			a.ReleasedAll, b, err = msgp.ReadBoolBytes(b)
		default:
			b, err = msgp.Skip(b)
		}
		if err != nil {
			return b, fmt.Errorf("AcquireArgs.%s: %w", k, err)
		}
	}
	return b, nil
}

// MarshalMsg appends r's msgpack encoding to b.
func (r *AcquireReply) MarshalMsg(b []byte) ([]byte, error) {
	if r.Token == 0 {
		b = msgp.AppendMapHeader(b, 2)
	} else {
		// Only a grant has one: the other replies stay as they were.
		b = msgp.AppendMapHeader(b, 3)
		b = msgp.AppendString(b, "Token")
		b = msgp.AppendUint64(b, r.Token)
	}
	b = msgp.AppendString(b, "Code")
	b = msgp.AppendInt(b, r.Code)
	b = msgp.AppendString(b, "Msg")
	return msgp.AppendString(b, r.Msg), nil
}

// UnmarshalMsg decodes r from the front of b and returns the rest.
func (r *AcquireReply) UnmarshalMsg(b []byte) ([]byte, error) {
	*r = AcquireReply{} // nothing of an earlier message (see AcquireArgs)
	n, b, err := msgp.ReadMapHeaderBytes(b)
	if err != nil {
		return b, fmt.Errorf("AcquireReply: %w", err)
	}
	for range n {
		var k []byte
		if k, b, err = msgp.ReadMapKeyZC(b); err != nil {
			return b, fmt.Errorf("AcquireReply: %w", err)
		}
		switch string(k) {
		case "Code":
			r.Code, b, err = msgp.ReadIntBytes(b)
		case "Msg":
			r.Msg, b, err = msgp.ReadStringBytes(b)
		case "Token":
			r.Token, b, err = msgp.ReadUint64Bytes(b)
		default:
			b, err = msgp.Skip(b)
		}
		if err != nil {
			return b, fmt.Errorf("AcquireReply.%s: %w", k, err)
		}
	}
	return b, nil
}

// MarshalMsg appends a's msgpack encoding to b.
func (a *ReleaseArgs) MarshalMsg(b []byte) ([]byte, error) {
	b = msgp.AppendMapHeader(b, 4)
	b = msgp.AppendString(b, "Owner")
	b = appendOwner(b, a.Owner)
	b = msgp.AppendString(b, "Keys")
	b = appendStrings(b, a.Keys)
	b = msgp.AppendString(b, "Seq")
	b = msgp.AppendUint64(b, a.Seq)
	b = msgp.AppendString(b, "All")
	return msgp.AppendBool(b, a.All), nil
}

// UnmarshalMsg decodes a from the front of b and returns the rest.
func (a *ReleaseArgs) UnmarshalMsg(b []byte) ([]byte, error) {
	*a = ReleaseArgs{} // nothing of an earlier message (see AcquireArgs)
	n, b, err := msgp.ReadMapHeaderBytes(b)
	if err != nil {
		return b, fmt.Errorf("ReleaseArgs: %w", err)
	}
	for range n {
		var k []byte
		if k, b, err = msgp.ReadMapKeyZC(b); err != nil {
			return b, fmt.Errorf("ReleaseArgs: %w", err)
		}
		switch string(k) {
		case "Owner":
			a.Owner, b, err = readOwner(b)
		case "Keys":
			a.Keys, b, err = readStrings(b)
		case "Seq":
			a.Seq, b, err = msgp.ReadUint64Bytes(b)
		case "All":
			a.All, b, err = msgp.ReadBoolBytes(b)
		default:
			b, err = msgp.Skip(b)
		}
		if err != nil {
			return b, fmt.Errorf("ReleaseArgs.%s: %w", k, err)
		}
	}
	return b, nil
}

// appendSeqArgs writes a map of Owner and one sequence number named seq
// (DropArgs' LastSeq).
func appendSeqArgs(b []byte, id OwnerID, seqName string, seq uint64) []byte {
	b = msgp.AppendMapHeader(b, 2)
	b = msgp.AppendString(b, "Owner")
	b = appendOwner(b, id)
	b = msgp.AppendString(b, seqName)
	return msgp.AppendUint64(b, seq)
}

func readSeqArgs(b []byte, what, seqName string) (OwnerID, uint64, []byte, error) {
	var id OwnerID
	var seq uint64
	n, b, err := msgp.ReadMapHeaderBytes(b)
	if err != nil {
		return id, seq, b, fmt.Errorf("%s: %w", what, err)
	}
	for range n {
		var k []byte
		if k, b, err = msgp.ReadMapKeyZC(b); err != nil {
			return id, seq, b, fmt.Errorf("%s: %w", what, err)
		}
		switch string(k) {
		case "Owner":
			id, b, err = readOwner(b)
		case seqName:
			seq, b, err = msgp.ReadUint64Bytes(b)
		default:
			b, err = msgp.Skip(b)
		}
		if err != nil {
			return id, seq, b, fmt.Errorf("%s.%s: %w", what, k, err)
		}
	}
	return id, seq, b, nil
}

// MarshalMsg appends a's msgpack encoding to b.
func (a *AbortArgs) MarshalMsg(b []byte) ([]byte, error) {
	b = msgp.AppendMapHeader(b, 3)
	b = msgp.AppendString(b, "Owner")
	b = appendOwner(b, a.Owner)
	b = msgp.AppendString(b, "Seq")
	b = msgp.AppendUint64(b, a.Seq)
	b = msgp.AppendString(b, "From")
	return msgp.AppendUint64(b, a.From), nil
}

// UnmarshalMsg decodes a from the front of b and returns the rest.
func (a *AbortArgs) UnmarshalMsg(b []byte) ([]byte, error) {
	*a = AbortArgs{} // nothing of an earlier message (see AcquireArgs)
	n, b, err := msgp.ReadMapHeaderBytes(b)
	if err != nil {
		return b, fmt.Errorf("AbortArgs: %w", err)
	}
	for range n {
		var k []byte
		if k, b, err = msgp.ReadMapKeyZC(b); err != nil {
			return b, fmt.Errorf("AbortArgs: %w", err)
		}
		switch string(k) {
		case "Owner":
			a.Owner, b, err = readOwner(b)
		case "Seq":
			a.Seq, b, err = msgp.ReadUint64Bytes(b)
		case "From":
			a.From, b, err = msgp.ReadUint64Bytes(b)
		default:
			b, err = msgp.Skip(b)
		}
		if err != nil {
			return b, fmt.Errorf("AbortArgs.%s: %w", k, err)
		}
	}
	return b, nil
}

// MarshalMsg appends a's msgpack encoding to b.
func (a *DropArgs) MarshalMsg(b []byte) ([]byte, error) {
	return appendSeqArgs(b, a.Owner, "LastSeq", a.LastSeq), nil
}

// UnmarshalMsg decodes a from the front of b and returns the rest.
func (a *DropArgs) UnmarshalMsg(b []byte) (rest []byte, err error) {
	*a = DropArgs{} // nothing of an earlier message (see AcquireArgs)
	a.Owner, a.LastSeq, rest, err = readSeqArgs(b, "DropArgs", "LastSeq")
	return rest, err
}
