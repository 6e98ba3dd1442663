package fastcodec

import (
	"reflect"
	"testing"

	"github.com/smallnest/rpcx/protocol"
	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/rpcxbatch/rpcxbatch/internal/mpack"
)

// namedLengths has field names of every length from 1 to 10 bytes: the
// short ones are matched as packed words, the longer ones as strings.
type namedLengths struct {
	N1  int `msgpack:"a"`
	N2  int `msgpack:"ab"`
	N3  int `msgpack:"abc"`
	N4  int `msgpack:"abcd"`
	N5  int `msgpack:"abcde"`
	N6  int `msgpack:"abcdef"`
	N7  int `msgpack:"abcdefg"`
	N8  int `msgpack:"abcdefgh"`
	N9  int `msgpack:"abcdefghi"`
	N10 int `msgpack:"abcdefghij"`
}

// TestFieldNamesMatchExactly: a key matches a field only when it is the
// field's name, byte for byte: a key of the same length that differs in
// any one byte is an unknown field, skipped as the library skips it; and
// a key equal to a field's name sets that field, in any order.
func TestFieldNamesMatchExactly(t *testing.T) {
	// The plan decodes this type (its first use checks it against the
	// library, and a plan that disagreed would be dropped).
	require.NotNil(t, planFor(reflect.TypeOf(&namedLengths{})), "no plan for the type")
	names := []string{"a", "ab", "abc", "abcd", "abcde", "abcdef", "abcdefg", "abcdefgh", "abcdefghi", "abcdefghij"}
	for i, name := range names {
		for pos := 0; pos < len(name); pos++ {
			b := []byte(name)
			b[pos] ^= 0x20 // a near miss: one byte's case flipped
			// The near miss comes last: taken for the field, it would
			// overwrite the field's value.
			in := mpack.AppendMapLen(nil, 2)
			in = mpack.AppendStr(in, name)
			in = mpack.AppendInt(in, int64(i+1))
			in = mpack.AppendStr(in, string(b))
			in = mpack.AppendInt(in, 7)
			var fast, lib namedLengths
			require.NoError(t, Decode(protocol.MsgPack, in, &fast))
			require.NoError(t, msgpack.Unmarshal(in, &lib))
			require.Equal(t, lib, fast, "keys %q and %q", b, name)
			require.Equal(t, i+1, fieldByName(t, fast, name), "key %q", name)
		}
	}
	// Every name in field order, as the library's encoder writes them
	// (the keys at hand are checked against the field's key as written
	// first), one of them a near miss: that field stays unset.
	for k, name := range names {
		for pos := 0; pos < len(name); pos++ {
			in := mpack.AppendMapLen(nil, len(names))
			for i, n := range names {
				if i == k {
					b := []byte(n)
					b[pos] ^= 0x20
					n = string(b)
				}
				in = mpack.AppendStr(in, n)
				in = mpack.AppendInt(in, int64(i+1))
			}
			var fast, lib namedLengths
			require.NoError(t, Decode(protocol.MsgPack, in, &fast))
			require.NoError(t, msgpack.Unmarshal(in, &lib))
			require.Equal(t, lib, fast, "field %q's key missed at byte %d", name, pos)
			require.Zero(t, fieldByName(t, fast, name))
		}
	}
	// Every name, in a map's order (seldom at the index the encoder
	// would have written it).
	m := map[string]int{}
	for i, name := range names {
		m[name] = 100 + i
	}
	in, err := msgpack.Marshal(m)
	require.NoError(t, err)
	var fast namedLengths
	require.NoError(t, Decode(protocol.MsgPack, in, &fast))
	for i, name := range names {
		require.Equal(t, 100+i, fieldByName(t, fast, name))
	}
}

// fieldByName is the field of v whose msgpack name is name.
func fieldByName(t *testing.T, v namedLengths, name string) int {
	t.Helper()
	switch name {
	case "a":
		return v.N1
	case "ab":
		return v.N2
	case "abc":
		return v.N3
	case "abcd":
		return v.N4
	case "abcde":
		return v.N5
	case "abcdef":
		return v.N6
	case "abcdefg":
		return v.N7
	case "abcdefgh":
		return v.N8
	case "abcdefghi":
		return v.N9
	case "abcdefghij":
		return v.N10
	}
	t.Fatalf("no field %q", name)
	return 0
}
