package mpack

import (
	"encoding/binary"
	"math"
)

// AppendUint appends n in the fewest bytes, as the library's EncodeUint.
func AppendUint(b []byte, n uint64) []byte {
	switch {
	case n <= math.MaxInt8:
		return append(b, byte(n))
	case n <= math.MaxUint8:
		return append(b, 0xcc, byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, 0xcd), uint16(n))
	case n <= math.MaxUint32:
		return binary.BigEndian.AppendUint32(append(b, 0xce), uint32(n))
	}
	return binary.BigEndian.AppendUint64(append(b, 0xcf), n)
}

// AppendInt appends n in the fewest bytes, as the library's EncodeInt.
func AppendInt(b []byte, n int64) []byte {
	switch {
	case n >= 0:
		return AppendUint(b, uint64(n))
	case n >= -32:
		return append(b, byte(n))
	case n >= math.MinInt8:
		return append(b, 0xd0, byte(n))
	case n >= math.MinInt16:
		return binary.BigEndian.AppendUint16(append(b, 0xd1), uint16(n))
	case n >= math.MinInt32:
		return binary.BigEndian.AppendUint32(append(b, 0xd2), uint32(n))
	}
	return binary.BigEndian.AppendUint64(append(b, 0xd3), uint64(n))
}

// AppendStr appends a string (str 8 from 32 bytes: msgpack spec 2.0, as
// the library writes it).
func AppendStr(b []byte, s string) []byte {
	if n := len(s); n < 32 {
		b = append(b, 0xa0|byte(n))
	} else {
		b = appendLen(b, 0xd9, n)
	}
	return append(b, s...)
}

// AppendBin appends a byte string.
func AppendBin(b []byte, p []byte) []byte {
	return append(appendLen(b, 0xc4, len(p)), p...)
}

// appendLen appends the header of a str or bin of n bytes in its 8-, 16-
// or 32-bit form, whose codes are code8, code8+1 and code8+2.
func appendLen(b []byte, code8 byte, n int) []byte {
	switch {
	case n <= math.MaxUint8:
		return append(b, code8, byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, code8+1), uint16(n))
	}
	return binary.BigEndian.AppendUint32(append(b, code8+2), uint32(n))
}

// AppendArrayLen appends the header of an array of n elements.
func AppendArrayLen(b []byte, n int) []byte {
	return appendCount(b, 0x90, 0xdc, n)
}

// AppendMapLen appends the header of a map of n pairs.
func AppendMapLen(b []byte, n int) []byte {
	return appendCount(b, 0x80, 0xde, n)
}

// appendCount appends the header of an array or map of n elements in its
// fixed form (fix|n), or its 16- or 32-bit form, whose codes are code16 and
// code16+1.
func appendCount(b []byte, fix, code16 byte, n int) []byte {
	switch {
	case n < 16:
		return append(b, fix|byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, code16), uint16(n))
	}
	return binary.BigEndian.AppendUint32(append(b, code16+1), uint32(n))
}

// Append16 appends code and then n big-endian.
func Append16(b []byte, code byte, n uint16) []byte {
	return binary.BigEndian.AppendUint16(append(b, code), n)
}

// Append32 appends code and then n big-endian.
func Append32(b []byte, code byte, n uint32) []byte {
	return binary.BigEndian.AppendUint32(append(b, code), n)
}

// Append64 appends code and then n big-endian.
func Append64(b []byte, code byte, n uint64) []byte {
	return binary.BigEndian.AppendUint64(append(b, code), n)
}
