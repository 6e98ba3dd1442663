package lock

import (
	"math"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/smallnest/rpcx/server"
	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"
)

// The same structs without the methods: what msgpack's reflection writes
// and reads for the wire types.
type (
	acquireArgsRefl  AcquireArgs
	acquireReplyRefl AcquireReply
	releaseArgsRefl  ReleaseArgs
	abortArgsRefl    AbortArgs
	dropArgsRefl     DropArgs
)

func randStrings(r *rand.Rand) []string {
	switch r.IntN(3) {
	case 0:
		return nil
	case 1:
		return []string{}
	}
	s := make([]string, 1+r.IntN(12))
	for i := range s {
		b := make([]byte, r.IntN(40))
		for j := range b {
			b[j] = byte(r.IntN(256))
		}
		s[i] = string(b)
	}
	return s
}

func randU64(r *rand.Rand) uint64 {
	return []uint64{0, 1, 127, 128, 255, 256, 65535, 65536, math.MaxUint32, math.MaxUint32 + 1, math.MaxUint64, r.Uint64()}[r.IntN(12)]
}

func randI64(r *rand.Rand) int64 {
	return []int64{0, 1, -1, -32, -33, 127, -128, math.MinInt64, math.MaxInt64, r.Int64(), -r.Int64()}[r.IntN(11)]
}

// The hand-written encodings against msgpack's reflection, both ways:
// what one writes the other reads back unchanged.
func TestWireMsgpMatchesReflection(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		acq := AcquireArgs{Owner: OwnerID{randU64(r), randU64(r)}, Age: randI64(r), Origin: string(rune(r.IntN(5000))) + "x",
			OriginInc: randU64(r), Seq: randU64(r), LastOK: randU64(r), Mode: Mode(r.IntN(256)),
			Keys: randStrings(r), Released: randStrings(r), Holds: r.IntN(2) == 1, ReleasedAll: r.IntN(2) == 1}
		rep := AcquireReply{Code: int(randI64(r)), Msg: "m" + string(rune(r.IntN(5000))), Token: randU64(r)}
		rel := ReleaseArgs{Owner: OwnerID{randU64(r), randU64(r)}, Keys: randStrings(r), Seq: randU64(r), All: r.IntN(2) == 1}
		ab := AbortArgs{Owner: OwnerID{randU64(r), randU64(r)}, Seq: randU64(r), From: randU64(r)}
		dr := DropArgs{Owner: OwnerID{randU64(r), randU64(r)}, LastSeq: randU64(r)}
		for _, c := range []struct {
			own, refl     any
			newOwn, newRf func() any
		}{
			{&acq, (*acquireArgsRefl)(&acq), func() any { return new(AcquireArgs) }, func() any { return new(acquireArgsRefl) }},
			{&rep, (*acquireReplyRefl)(&rep), func() any { return new(AcquireReply) }, func() any { return new(acquireReplyRefl) }},
			{&rel, (*releaseArgsRefl)(&rel), func() any { return new(ReleaseArgs) }, func() any { return new(releaseArgsRefl) }},
			{&ab, (*abortArgsRefl)(&ab), func() any { return new(AbortArgs) }, func() any { return new(abortArgsRefl) }},
			{&dr, (*dropArgsRefl)(&dr), func() any { return new(DropArgs) }, func() any { return new(dropArgsRefl) }},
		} {
			own, err := c.own.(interface{ MarshalMsg([]byte) ([]byte, error) }).MarshalMsg(nil)
			if err != nil {
				t.Fatal(err)
			}
			refl, err := msgpack.Marshal(c.refl)
			if err != nil {
				t.Fatal(err)
			}
			// Hand-written bytes, read by reflection.
			gotRefl := c.newRf()
			if err := msgpack.Unmarshal(own, gotRefl); err != nil {
				t.Fatalf("case %d %T: reflection cannot read the hand-written bytes: %v", i, c.own, err)
			}
			if !reflect.DeepEqual(reflect.ValueOf(gotRefl).Elem().Interface(), reflect.ValueOf(c.refl).Elem().Interface()) {
				t.Fatalf("case %d %T: reflection read %+v, want %+v", i, c.own, gotRefl, c.refl)
			}
			// Reflection's bytes, read by the hand-written decoder.
			gotOwn := c.newOwn()
			rest, err := gotOwn.(interface{ UnmarshalMsg([]byte) ([]byte, error) }).UnmarshalMsg(refl)
			if err != nil || len(rest) != 0 {
				t.Fatalf("case %d %T: hand-written decoder on reflection's bytes: %v (%d bytes left)", i, c.own, err, len(rest))
			}
			if !reflect.DeepEqual(wireFields(gotOwn), c.own) {
				t.Fatalf("case %d: hand-written decoder read %+v, want %+v", i, gotOwn, c.own)
			}
		}
	}
}

// Truncated and corrupted input is an error, never a panic.
func TestWireMsgpBrokenInput(t *testing.T) {
	a := &AcquireArgs{Owner: OwnerID{1, 2}, Origin: "127.0.0.1:1", Seq: 3, Mode: Exclusive, Keys: []string{"a", "b"}, Released: []string{"c"}}
	b, _ := a.MarshalMsg(nil)
	for n := range len(b) {
		if _, err := new(AcquireArgs).UnmarshalMsg(b[:n]); err == nil {
			t.Fatalf("%d of %d bytes decoded without error", n, len(b))
		}
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 5000 {
		c := append([]byte(nil), b...)
		c[r.IntN(len(c))] = byte(r.IntN(256))
		new(AcquireArgs).UnmarshalMsg(c)
		new(ReleaseArgs).UnmarshalMsg(c)
		new(AcquireReply).UnmarshalMsg(c)
		new(AbortArgs).UnmarshalMsg(c)
		new(DropArgs).UnmarshalMsg(c)
	}
}

// TestAcquireArgsDecodedWholeIntoAReusedValue: fields the encoder leaves
// out when empty (ReleasedAll, Released, Holds) do not survive from an
// earlier message when a value is decoded into again (rpcx's UsePool
// reuses argument values): a stale ReleasedAll would release everything
// the holder holds on the node.
func TestAcquireArgsDecodedWholeIntoAReusedValue(t *testing.T) {
	first := AcquireArgs{Owner: OwnerID{Node: 1, Seq: 1}, Origin: "a", Seq: 2, Keys: []string{"k"}, Released: []string{"r"}, ReleasedAll: true, Holds: true}
	b, err := first.MarshalMsg(nil)
	require.NoError(t, err)
	var a AcquireArgs
	_, err = a.UnmarshalMsg(b)
	require.NoError(t, err)
	require.Equal(t, first, *wireFields(&a).(*AcquireArgs))

	second := AcquireArgs{Owner: OwnerID{Node: 1, Seq: 1}, Origin: "a", Seq: 3, Keys: []string{"k2"}}
	b, err = second.MarshalMsg(nil)
	require.NoError(t, err)
	_, err = a.UnmarshalMsg(b)
	require.NoError(t, err)
	require.Equal(t, second, *wireFields(&a).(*AcquireArgs))
}

// wireFields returns v as sent: for an AcquireArgs, a copy without the
// decoder's own key storage (keys1), which is not part of the message.
func wireFields(v any) any {
	a, ok := v.(*AcquireArgs)
	if !ok {
		return v
	}
	c := *a
	c.keys1 = [1]string{}
	return &c
}

// TestAcquireArgsOneKeyDecodedInPlace: the usual request, one key, is
// decoded with no allocation for its key list (the key itself is one),
// and two values decoded from the same bytes do not share it.
func TestAcquireArgsOneKeyDecodedInPlace(t *testing.T) {
	b, err := (&AcquireArgs{Owner: OwnerID{Node: 1, Seq: 2}, Origin: "a", Seq: 3, Mode: Exclusive, Keys: []string{"key-1"}}).MarshalMsg(nil)
	require.NoError(t, err)
	var a, c AcquireArgs
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := a.UnmarshalMsg(b); err != nil {
			t.Fatal(err)
		}
	})
	require.Equal(t, 1.0, allocs, "allocations to decode a one-key AcquireArgs (the key's string only)")
	_, err = c.UnmarshalMsg(b)
	require.NoError(t, err)
	a.Keys[0] = "changed"
	require.Equal(t, []string{"key-1"}, c.Keys)
}

// TestAcquireReplyPooled: AcquireReply has rpcx's Reset, so that rpcx's
// server and the batch plugin reuse replies from a pool, and Reset leaves
// nothing of the last verdict (a stale Msg or Code would reach the next
// holder).
func TestAcquireReplyPooled(t *testing.T) {
	var r any = &AcquireReply{Code: codeDeadlock, Msg: "deadlock"}
	p, ok := r.(server.Reset)
	require.True(t, ok, "AcquireReply has no Reset: every Acquire allocates its reply")
	p.Reset()
	require.Equal(t, AcquireReply{}, *r.(*AcquireReply))
}

// TestAcquireArgsPooledAndDetached: AcquireArgs has rpcx's Reset, so that
// servers reuse argument values, and a request that waits keeps a copy
// (detached) that the value's next use cannot change, one-key array
// included. (Without the copy, the lock tests that queue requests over
// the batch plugin fail under -race: TestChaosInvariant,
// TestTwoNodeInvariantUnderContention and others.)
func TestAcquireArgsPooledAndDetached(t *testing.T) {
	b, err := (&AcquireArgs{Owner: OwnerID{Node: 1, Seq: 2}, Origin: "a", Seq: 3, Mode: Exclusive, Keys: []string{"key-1"}, Released: []string{"r"}}).MarshalMsg(nil)
	require.NoError(t, err)
	var a AcquireArgs
	_, err = a.UnmarshalMsg(b)
	require.NoError(t, err)
	d := a.detached()
	var p any = &a
	r, ok := p.(server.Reset)
	require.True(t, ok, "AcquireArgs has no Reset: every Acquire allocates its arguments")
	r.Reset()
	require.Equal(t, AcquireArgs{}, a)
	a.keys1[0] = "reused"
	require.Equal(t, []string{"key-1"}, d.Keys)
	require.Equal(t, []string{"r"}, d.Released)
	require.Equal(t, uint64(3), d.Seq)
}
