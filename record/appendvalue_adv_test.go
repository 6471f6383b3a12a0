package record

import (
	"bytes"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// avOp is one step applied to two builders: want makes every record with
// Append or AppendAt, got makes the value-only ones with AppendValue.
type avOp struct {
	reset   bool   // Reset both builders (after building the batch so far)
	at      int32  // >0: AppendAt this offset delta, on both
	general bool   // Append with the key and headers below, on both
	ts      int64  // the record's timestamp
	key     []byte // general only
	value   []byte
	headers []Header // general only
}

func av(ts int64, v []byte) avOp { return avOp{ts: ts, value: v} }

// avBytes is a value of n bytes that differ from one another.
func avBytes(n int) []byte {
	v := make([]byte, n)
	for i := range v {
		v[i] = byte(i*7 + 3)
	}
	return v
}

// avWant is a record as the decoder must give it back.
type avWant struct {
	delta   int32
	ts      int64
	key     []byte
	value   []byte
	headers int
}

// runAV applies ops and checks each batch got builds (before each reset
// and at the end) against want's, byte for byte, and against the records
// the ops describe, decoded back.
func runAV(t *testing.T, ops []avOp) {
	t.Helper()
	var want, got Builder
	var recs []avWant
	var baseTS int64
	check := func() {
		t.Helper()
		w, err := want.Build()
		require.NoError(t, err)
		w = bytes.Clone(w)
		g, err := got.Build()
		require.NoError(t, err)
		require.Equal(t, len(w), len(g), "batch sizes")
		require.True(t, bytes.Equal(w, g), "AppendValue's batch differs from Append's at byte %d", firstDiff(w, g))

		b, err := ParseBatch(g, 0)
		require.NoError(t, err)
		require.Equal(t, int32(len(recs)), b.RecordCount)
		require.Equal(t, recs[len(recs)-1].delta, b.LastOffsetDelta)
		maxTS := int64(NoTimestamp)
		for _, r := range recs {
			maxTS = max(maxTS, r.ts)
		}
		require.Equal(t, maxTS, b.MaxTimestamp)
		require.Equal(t, baseTS, b.BaseTimestamp)
		var d Decoder
		it, err := d.Records(&b)
		require.NoError(t, err)
		i := 0
		for it.Next() {
			r := it.Record()
			require.Less(t, i, len(recs))
			w := recs[i]
			require.Equal(t, Offset(w.delta), r.Offset, "record %d offset", i)
			require.Equal(t, w.ts, r.Timestamp, "record %d timestamp", i)
			require.Equal(t, w.key == nil, r.Key == nil, "record %d: null key", i)
			require.True(t, bytes.Equal(w.key, r.Key), "record %d key", i)
			require.Equal(t, w.value == nil, r.Value == nil, "record %d: null value", i)
			require.True(t, bytes.Equal(w.value, r.Value), "record %d value", i)
			require.Len(t, r.Headers, w.headers, "record %d headers", i)
			i++
		}
		require.NoError(t, it.Err())
		require.Equal(t, len(recs), i)
	}
	for _, op := range ops {
		if op.reset {
			check()
			want.Reset()
			got.Reset()
			recs = recs[:0]
			continue
		}
		delta := int32(0)
		if len(recs) > 0 {
			delta = recs[len(recs)-1].delta + 1
		} else {
			baseTS = op.ts
		}
		switch {
		case op.at > 0:
			delta = op.at
			want.AppendAt(op.at, op.ts, op.key, op.value, op.headers)
			got.AppendAt(op.at, op.ts, op.key, op.value, op.headers)
		case op.general:
			want.Append(op.ts, op.key, op.value, op.headers)
			got.Append(op.ts, op.key, op.value, op.headers)
		default:
			want.Append(op.ts, nil, op.value, nil)
			got.AppendValue(op.ts, op.value)
		}
		recs = append(recs, avWant{delta: delta, ts: op.ts, key: op.key, value: op.value, headers: len(op.headers)})
	}
	check()
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestAppendValueAdvEdges tries AppendValue where its own sizing of the
// record's framing could go wrong: each varint it writes (record length,
// timestamp delta, offset delta, value length) on both sides of its byte
// boundaries, null against empty values, a zero Builder and a reused one,
// offset deltas after gaps AppendAt left, timestamps below the batch's
// first and at the ends of int64, and records Append makes before and
// after. Each batch must be Append's byte for byte and decode back to the
// records given.
func TestAppendValueAdvEdges(t *testing.T) {
	const t0 = int64(1_700_000_000_000)
	many := func(n int, ts func(i int) int64, v func(i int) []byte) []avOp {
		ops := make([]avOp, n)
		for i := range ops {
			ops[i] = av(ts(i), v(i))
		}
		return ops
	}
	flat := func(int) int64 { return t0 }
	small := func(i int) []byte { return avBytes(i % 3) }
	var lengths []avOp
	// Zigzag varints grow a byte at 64, 8192 and 2^20: the value's length
	// and, 7 to 9 bytes later, the record's length cross them.
	for _, edge := range []int{64, 8192, 1 << 20} {
		for d := -10; d <= 2; d++ {
			lengths = append(lengths, av(t0, avBytes(edge+d)))
		}
	}
	cases := map[string][]avOp{
		"zero builder, null value":             {av(t0, nil)},
		"zero builder, empty value":            {av(t0, []byte{})},
		"zero builder, negative timestamp":     {av(-5, []byte("a")), av(-10, nil)},
		"zero builder, timestamp 0":            {av(0, []byte("a"))},
		"null and empty alternate":             {av(t0, nil), av(t0, []byte{}), av(t0, nil), av(t0, []byte{}), av(t0, []byte("x"))},
		"value and record length varint edges": lengths,
		"offset deltas past 63 and 8191":       many(8300, flat, small),
		"timestamp deltas past the varint edges": many(200, func(i int) int64 {
			return t0 + []int64{0, 63, 64, -64, -65, 8191, 8192, -8192, -8193, 1 << 40, -(1 << 40)}[i%11]
		}, small),
		"timestamps only before the first": many(20, func(i int) int64 { return t0 - int64(i)*1000 }, small),
		"all timestamps below NoTimestamp": {av(-100, nil), av(-50, []byte("a")), av(-200, []byte{})},
		"extreme timestamps": {
			av(0, []byte("a")), av(math.MaxInt64, []byte("b")), av(math.MinInt64+1, []byte("c")), av(-1, nil),
		},
		"first timestamp MinInt64": {av(math.MinInt64, []byte("a")), av(math.MaxInt64, nil), av(0, []byte{})},
		"first timestamp MaxInt64": {av(math.MaxInt64, []byte("a")), av(math.MinInt64, nil), av(t0, []byte{})},
		"gap then values": {
			av(t0, []byte("a")), {at: 63, ts: t0, value: []byte("g")}, av(t0, []byte("b")), av(t0, nil),
			{at: 8190, ts: t0 + 1, value: nil}, av(t0-1, []byte("c")), av(t0, []byte{}),
			{at: 1 << 20, ts: t0, key: []byte("k"), value: []byte("v")}, av(t0, []byte("d")),
		},
		"AppendAt first, with a gap from 0": {{at: 5, ts: t0, value: []byte("g")}, av(t0-1, []byte("a"))},
		"general then value": {
			{general: true, ts: t0, key: []byte("k"), value: []byte("v"), headers: []Header{{Key: []byte("h"), Value: nil}}},
			av(t0+1, []byte("a")), av(t0-1, nil),
		},
		"value then general": {
			av(t0, []byte("a")),
			{general: true, ts: t0 + 5, key: []byte{}, value: []byte{}},
			av(t0+2, []byte{}),
			{general: true, ts: t0 - 5, key: nil, value: []byte("v"), headers: []Header{}},
			av(t0, nil),
		},
		"reset reuses the builder": {
			av(t0, avBytes(100)), {at: 9000, ts: t0 + 99, value: []byte("g")}, av(math.MaxInt64, nil),
			{reset: true},
			av(t0-7, []byte("a")), av(t0, nil), av(t0-8, []byte{}),
			{reset: true},
			av(-3, nil),
		},
	}
	for name, ops := range cases {
		t.Run(name, func(t *testing.T) { runAV(t, ops) })
	}
}

// TestAppendValueAdvAfterBuild: a Builder whose batch was built goes on
// taking records (Build does not reset it), and AppendValue's growth of
// the buffer must not disturb the records before.
func TestAppendValueAdvAfterBuild(t *testing.T) {
	var want, got Builder
	for i := 0; i < 3000; i++ {
		v := avBytes(i % 200)
		if i%17 == 0 {
			v = nil
		}
		ts := int64(1_700_000_000_000 + (i%5)*100 - 200)
		want.Append(ts, nil, v, nil)
		got.AppendValue(ts, v)
		if i%500 == 0 {
			w, err := want.Build()
			require.NoError(t, err)
			g, err := got.Build()
			require.NoError(t, err)
			require.True(t, bytes.Equal(w, g), "after %d records", i+1)
		}
	}
	w, err := want.Build()
	require.NoError(t, err)
	g, err := got.Build()
	require.NoError(t, err)
	require.True(t, bytes.Equal(w, g))
	require.Equal(t, want.Size(), got.Size())
	require.Equal(t, want.Len(), got.Len())
}
