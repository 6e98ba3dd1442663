package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/smallnest/rpcx/protocol"
)

// ErrArgs is what -args that cannot be encoded wraps.
var ErrArgs = errors.New("-args")

// argValue is the call's argument: the JSON of raw as a generic value
// (objects as map[string]any, arrays as []any, integral numbers as int64
// or uint64, other numbers as float64), which rpcx's codec of st then
// encodes as it would the service's own types, field by field; with
// SerializeNone, raw itself, as bytes.
//
// Integral numbers are kept integers because msgpack writes a float64 as
// a float, which msgpack will not decode into an int field.
func argValue(raw []byte, st protocol.SerializeType) (any, error) {
	if st == protocol.SerializeNone {
		b := bytes.Clone(raw)
		return &b, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("%w is not JSON: %s", ErrArgs, jsonErrText(raw, err))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w is not one JSON value: more follows it", ErrArgs)
	}
	return generic(v), nil
}

// jsonErrText is err with where in raw it happened.
func jsonErrText(raw []byte, err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("%v at byte %d", se, se.Offset)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		if len(bytes.TrimSpace(raw)) == 0 {
			return "it is empty"
		}
		return "it ends too soon"
	}
	return err.Error()
}

// generic turns json.Numbers into int64, uint64 or float64, recursively.
func generic(v any) any {
	switch v := v.(type) {
	case json.Number:
		if i, err := strconv.ParseInt(string(v), 10, 64); err == nil {
			return i
		}
		if u, err := strconv.ParseUint(string(v), 10, 64); err == nil {
			return u
		}
		f, _ := v.Float64()
		return f
	case map[string]any:
		for k, e := range v {
			v[k] = generic(e)
		}
	case []any:
		for i, e := range v {
			v[i] = generic(e)
		}
	}
	return v
}

// newReply is a value the reply decodes into: a generic value, or the
// reply's bytes with SerializeNone.
func newReply(st protocol.SerializeType) any {
	if st == protocol.SerializeNone {
		return new([]byte)
	}
	return new(any)
}

// replyText shows a reply in one line of at most 200 characters: as JSON,
// or, for bytes, their length and start.
func replyText(reply any) string {
	var s string
	switch r := reply.(type) {
	case *[]byte:
		s = fmt.Sprintf("%d bytes %q", len(*r), truncate(string(*r), 60))
	case *any:
		b, err := json.Marshal(jsonable(*r))
		if err != nil {
			s = fmt.Sprintf("%v", *r)
		} else {
			s = string(b)
		}
	default:
		s = fmt.Sprintf("%v", reply)
	}
	return truncate(s, 200)
}

// jsonable is v with the maps msgpack decodes (map[any]any when keys are
// not strings, []byte for bin) made printable as JSON.
func jsonable(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = jsonable(e)
		}
		return out
	case map[any]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[fmt.Sprint(k)] = jsonable(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = jsonable(e)
		}
		return out
	case []byte:
		return string(v)
	}
	return v
}

func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
