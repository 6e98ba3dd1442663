package codec

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// roundTripReplies encodes replies, decodes them (into a fresh dst), checks
// they came back equal and that ReplySize bounds each, and returns the frame.
func roundTripReplies(t *testing.T, incarnation uint64, replies []Reply) []byte {
	t.Helper()
	frame := AppendReplyHeader(nil, incarnation, len(replies))
	for i := range replies {
		before := len(frame)
		frame = AppendReply(frame, &replies[i])
		require.LessOrEqual(t, len(frame)-before, ReplySize(&replies[i]), "ReplySize must bound reply %d", i)
	}
	gotInc, got, err := DecodeReplies(frame, 0, nil)
	require.NoError(t, err)
	assert.Equal(t, incarnation, gotInc)
	requireRepliesEqual(t, replies, got)
	for i := range got {
		require.True(t, aliases(frame, got[i].Payload), "reply %d payload must alias the frame", i)
	}
	return frame
}

func TestRepliesRoundTripSample(t *testing.T) {
	replies := make([]Reply, 20)
	for i := range replies {
		replies[i] = sampleReply(i)
	}
	roundTripReplies(t, 0xdeadbeefcafe, replies)
}

func TestRepliesRoundTripStringLengths(t *testing.T) {
	for _, n := range strLens {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			rp := sampleReply(1)
			rp.Error = str("error", n)
			rp.Metadata = map[string]string{str("key", n): str("value", n)}
			roundTripReplies(t, 1, []Reply{rp, sampleReply(2)})
		})
	}
}

func TestRepliesRoundTripPayloadLengths(t *testing.T) {
	for _, n := range payloadLens {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			rp := sampleReply(0)
			rp.Payload = pattern(n)
			roundTripReplies(t, 1, []Reply{rp, sampleReply(3)})
		})
	}
}

func TestRepliesRoundTripCounts(t *testing.T) {
	for _, n := range countLens {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			replies := make([]Reply, n)
			for i := range replies {
				replies[i] = Reply{ID: uint64(i)}
			}
			roundTripReplies(t, uint64(n), replies)
		})
	}
}

func TestRepliesRoundTripIntegers(t *testing.T) {
	for _, v := range uintValues {
		t.Run(fmt.Sprint(v), func(t *testing.T) {
			rp := sampleReply(1)
			rp.ID = v
			roundTripReplies(t, v, []Reply{rp, sampleReply(0)})
		})
	}
}

func TestRepliesRoundTripMetadata(t *testing.T) {
	for name, m := range map[string]map[string]string{
		"nil":   nil,
		"empty": {},
		"one":   {"k": "v"},
		"two":   {"k": "v", "": ""},
	} {
		t.Run(name, func(t *testing.T) {
			rp := sampleReply(1)
			rp.Metadata = m
			frame := roundTripReplies(t, 1, []Reply{rp})
			_, got, err := DecodeReplies(frame, 0, nil)
			require.NoError(t, err)
			require.Len(t, got[0].Metadata, len(m))
			for k, v := range m {
				assert.Equal(t, v, got[0].Metadata[k])
			}
		})
	}
}

// DecodeReplies reuses dst when it is big enough and overwrites every field,
// so nothing of a previous frame leaks into the next.
func TestRepliesDecodeReusesDst(t *testing.T) {
	stale := make([]Reply, 8)
	for i := range stale {
		stale[i] = Reply{ID: 999, Status: StatusError, Error: "stale", Metadata: map[string]string{"stale": "1"}, Payload: []byte("stale")}
	}
	want := []Reply{{ID: 1}, {ID: 2, Payload: []byte("x")}, sampleReply(1)}
	frame := encodeReplies(5, want)

	_, got, err := DecodeReplies(frame, 0, stale)
	require.NoError(t, err)
	require.Len(t, got, 3)
	assert.Same(t, &stale[0], &got[0], "dst with enough capacity is reused")
	requireRepliesEqual(t, want, got)
	assert.Nil(t, got[0].Metadata)
	assert.Empty(t, got[0].Error)

	// Too small a dst is replaced, not overrun.
	small := make([]Reply, 1)
	_, got, err = DecodeReplies(frame, 0, small)
	require.NoError(t, err)
	require.Len(t, got, 3)
	requireRepliesEqual(t, want, got)

	// A zero-length dst with capacity is fine too.
	_, got, err = DecodeReplies(frame, 0, stale[:0])
	require.NoError(t, err)
	requireRepliesEqual(t, want, got)
}

func TestRepliesMaxEntries(t *testing.T) {
	frame := encodeReplies(1, []Reply{sampleReply(0), sampleReply(1), sampleReply(2)})
	for _, max := range []int{0, -5, 3, 100} {
		_, got, err := DecodeReplies(frame, max, nil)
		require.NoError(t, err)
		require.Len(t, got, 3)
	}
	_, got, err := DecodeReplies(frame, 2, nil)
	require.ErrorIs(t, err, ErrTooManyEntries)
	require.Nil(t, got)
}

func TestRepliesUnknownStatus(t *testing.T) {
	for _, st := range []Status{2, 127, 255} {
		rp := sampleReply(0)
		rp.Status = st
		_, _, err := DecodeReplies(encodeReplies(1, []Reply{rp}), 0, nil)
		require.ErrorIs(t, err, ErrMalformed, "status %d", st)
	}
}
