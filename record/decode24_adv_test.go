package record

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// Adversarial tests of the fast record decoder (decodeCommon) through the
// public ways in: Decoder.Records over every codec and timestamp type,
// RecordsIn from every record and with the data cut at every byte, checked
// against a decoder written here from the format, not against
// decodeFields.

// refRecord is a record as the format says it is.
type refRecord struct {
	off     Offset
	ts      int64
	key     []byte
	value   []byte
	headers []Header
	start   int // where it begins in the records bytes
	end     int
}

// refDecode decodes the uncompressed records bytes of the batch h, with
// encoding/binary's varints, or fails.
func refDecode(t *testing.T, h *BatchHeader, data []byte) []refRecord {
	t.Helper()
	var out []refRecord
	p := 0
	vi := func() int64 {
		v, n := binary.Varint(data[p:])
		require.Greater(t, n, 0, "varint at %d", p)
		p += n
		return v
	}
	bs := func() []byte {
		l := vi()
		if l < 0 {
			require.Equal(t, int64(-1), l)
			return nil
		}
		b := data[p : p+int(l)]
		p += int(l)
		return b
	}
	for i := int32(0); i < h.RecordCount; i++ {
		start := p
		length := vi()
		bodyStart := p
		p++ // attributes
		r := refRecord{start: start}
		tsd := vi()
		od := vi()
		require.True(t, od >= 0 && od <= int64(h.LastOffsetDelta))
		r.off = h.BaseOffset + Offset(od)
		r.ts = h.BaseTimestamp + tsd
		if h.Attributes.LogAppendTime() {
			r.ts = h.MaxTimestamp
		}
		r.key, r.value = bs(), bs()
		for n := vi(); n > 0; n-- {
			r.headers = append(r.headers, Header{Key: bs(), Value: bs()})
		}
		require.Equal(t, bodyStart+int(length), p, "record %d length", i)
		r.end = p
		out = append(out, r)
	}
	require.Equal(t, len(data), p)
	return out
}

// sameRecord checks r against the reference record want.
func sameRecord(t *testing.T, want refRecord, r *Record, what string) {
	t.Helper()
	ok := r.Offset == want.off && r.Timestamp == want.ts && sameBytes(r.Key, want.key) && sameBytes(r.Value, want.value) && len(r.Headers) == len(want.headers)
	for i := 0; ok && i < len(want.headers); i++ {
		ok = sameBytes(r.Headers[i].Key, want.headers[i].Key) && sameBytes(r.Headers[i].Value, want.headers[i].Value)
	}
	if !ok {
		t.Fatalf("%s: got offset %d ts %d key %q value %q headers %v, want offset %d ts %d key %q value %q headers %v",
			what, r.Offset, r.Timestamp, r.Key, r.Value, r.Headers, want.off, want.ts, want.key, want.value, want.headers)
	}
}

// adv24Batch builds a batch of n records of the shapes the fast path
// takes and declines, with timestamps going back and forth, offset deltas
// with gaps (one-, two-, three- and four-byte ones), null and empty keys
// and values, values of one- to three-byte lengths, headers now and then.
func adv24Batch(t *testing.T, rng *rand.Rand, n int, o BuildOptions, gaps bool) []byte {
	t.Helper()
	var b Builder
	ts := int64(1_700_000_000_000)
	delta := int32(-1)
	for i := 0; i < n; i++ {
		step := int32(1)
		if gaps {
			switch rng.IntN(6) {
			case 0:
				step = 1 + rng.Int32N(100)
			case 1:
				step = []int32{63, 64, 65, 8191, 8192, 8193, 1 << 20, 1<<20 + 1, 1 << 24}[rng.IntN(9)]
			}
		}
		delta += step
		switch rng.IntN(5) {
		case 0:
			ts -= rng.Int64N(10000) // back: negative deltas
		case 1:
			ts += []int64{63, 64, 8191, 8192, 1 << 20, 1 << 40}[rng.IntN(6)] // past two bytes now and then
		default:
			ts += rng.Int64N(100)
		}
		field := func() []byte {
			switch rng.IntN(8) {
			case 0:
				return nil
			case 1:
				return []byte{}
			case 2:
				return bytes.Repeat([]byte{'L'}, []int{63, 64, 8191, 8192, 20000}[rng.IntN(5)])
			default:
				return []byte(fmt.Sprintf("r%d-%s", i, bytes.Repeat([]byte{byte('a' + rng.IntN(26))}, rng.IntN(200))))
			}
		}
		var hs []Header
		if rng.IntN(10) == 0 {
			hs = []Header{{Key: []byte("h"), Value: field()}}
		}
		b.AppendAt(delta, ts, field(), field(), hs)
	}
	out, err := b.BuildWith(o)
	require.NoError(t, err)
	out = bytes.Clone(out)
	SetBaseOffset(out, Offset(rng.Int64N(1<<40)))
	return out
}

// Decoder.Records over every codec, CreateTime and LogAppendTime, one
// decoder reused from batch to batch (its header buffer shared): every
// record as the reference decodes it.
func TestDecode24RecordsEveryCodec(t *testing.T) {
	rng := rand.New(rand.NewPCG(24, 1))
	var dec Decoder
	for round := 0; round < 40; round++ {
		for _, c := range []Compression{None, Gzip, Snappy, LZ4, Zstd} {
			o := BuildOptions{Compression: c}
			if rng.IntN(2) == 0 {
				o.Attributes, o.LogAppendTime = Attributes(logAppendTimeBit), 1_800_000_000_000+rng.Int64N(1000)
			}
			raw := adv24Batch(t, rng, 1+rng.IntN(300), o, rng.IntN(2) == 0)
			b, err := ParseBatch(raw, Position(rng.IntN(1000)))
			require.NoError(t, err)
			// The reference decodes the records bytes, decompressed the
			// way a fresh decoder does.
			var d2 Decoder
			it2, err := d2.Records(&b)
			require.NoError(t, err)
			want := refDecode(t, &b.BatchHeader, it2.data)
			it, err := dec.Records(&b)
			require.NoError(t, err)
			k := 0
			for it.Next() {
				require.Less(t, k, len(want))
				sameRecord(t, want[k], it.Record(), fmt.Sprintf("round %d %v record %d", round, c, k))
				k++
			}
			require.NoError(t, it.Err())
			require.Equal(t, len(want), k)
		}
	}
}

// RecordsIn from every record of a batch, with its data cut at every
// byte: the records it yields are the reference's, in order, it is cut
// exactly when the data ends before the next record does, and Off and
// Index say where that record is.
func TestDecode24RecordsInEveryCut(t *testing.T) {
	rng := rand.New(rand.NewPCG(24, 2))
	for round := 0; round < 6; round++ {
		o := BuildOptions{}
		if round%3 == 1 {
			o.Attributes, o.LogAppendTime = Attributes(logAppendTimeBit), 1_900_000_000_000
		}
		raw := adv24Batch(t, rng, 12+rng.IntN(12), o, round%2 == 0)
		b, err := ParseBatch(raw, 0)
		require.NoError(t, err)
		data := raw[HeaderSize:]
		want := refDecode(t, &b.BatchHeader, data)
		for from := range want {
			rest := data[want[from].start:]
			cuts := []int{}
			for c := 0; c <= len(rest); c++ {
				// every byte near a record's end, some in between
				near := false
				for _, r := range want[from:] {
					if e := r.end - want[from].start; c >= e-3 && c <= e+3 {
						near = true
						break
					}
				}
				if near || rng.IntN(400) == 0 {
					cuts = append(cuts, c)
				}
			}
			for _, c := range cuts {
				what := fmt.Sprintf("round %d from record %d cut at %d of %d", round, from, c, len(rest))
				d := rest[:c]
				if rng.IntN(2) == 0 {
					d = append(bytes.Clone(d), 0xff, 0xff) // capacity and garbage past the cut must not count
					d = d[:c]
				}
				it := RecordsIn(&b.BatchHeader, 0, d, int32(from))
				k := from
				for it.Next() {
					require.Less(t, k, len(want), what)
					require.LessOrEqual(t, want[k].end-want[from].start, c, "%s: record %d decoded past the data", what, k)
					sameRecord(t, want[k], it.Record(), fmt.Sprintf("%s: record %d", what, k))
					k++
				}
				require.NoError(t, it.Err(), what)
				require.Equal(t, int32(k), it.Index(), what)
				if k < len(want) {
					require.True(t, it.Cut(), "%s: stopped at %d without a cut", what, k)
					require.Equal(t, want[k].start-want[from].start, it.Off(), what)
					require.Greater(t, want[k].end-want[from].start, c, "%s: record %d is whole in the data but not decoded", what, k)
				} else {
					require.False(t, it.Cut(), what)
					require.Equal(t, c, it.Off(), what)
				}
			}
		}
	}
}

// Records right at the end of the data, with a one-byte headers count and
// nothing after it, and records whose last byte is cut off: a record
// shaped for the fast path whose header count is missing must not decode.
func TestDecode24LastRecordEdges(t *testing.T) {
	rng := rand.New(rand.NewPCG(24, 3))
	for i := 0; i < 200; i++ {
		raw := adv24Batch(t, rng, 1+rng.IntN(4), BuildOptions{}, rng.IntN(2) == 0)
		b, err := ParseBatch(raw, 0)
		require.NoError(t, err)
		data := raw[HeaderSize:]
		want := refDecode(t, &b.BatchHeader, data)
		last := want[len(want)-1]
		// The batch's records as they are.
		it := RecordsIn(&b.BatchHeader, 0, data[last.start:], int32(len(want)-1))
		require.True(t, it.Next())
		sameRecord(t, last, it.Record(), "last")
		require.False(t, it.Next())
		require.NoError(t, it.Err())
		// A batch header whose last offset delta is below the last
		// record's, and a last record whose headers count (its last byte)
		// says one header and holds none: refused, not decoded.
		h := b.BatchHeader
		h.LastOffsetDelta = int32(last.off-b.BaseOffset) - 1
		lie := RecordsIn(&h, 0, data[last.start:], int32(len(want)-1))
		require.False(t, lie.Next(), "a record past the batch's last offset delta")
		require.Error(t, lie.Err())
		if len(last.headers) == 0 {
			d := bytes.Clone(data)
			d[len(d)-1] = 2 // one header
			lie = RecordsIn(&b.BatchHeader, 0, d[last.start:], int32(len(want)-1))
			require.False(t, lie.Next(), "a record whose header count says one and holds none")
			require.Error(t, lie.Err())
		}
		// The last record with its length one less (its last byte, the
		// headers count, outside it), then with the byte dropped: a
		// decoder that reads the whole batch must refuse both.
		if len(last.headers) > 0 {
			continue
		}
		body := data[last.start:]
		l, n := binary.Varint(body)
		short := binary.AppendVarint(nil, l-1)
		if len(short) != n {
			continue
		}
		for _, drop := range []bool{false, true} {
			rec := append(append([]byte(nil), short...), body[n:]...)
			if drop {
				rec = rec[:len(rec)-1]
			}
			d := append(append([]byte(nil), data[:last.start]...), rec...)
			bad := RecordIter{h: b.BatchHeader, data: d}
			for bad.Next() {
			}
			require.Error(t, bad.Err(), "a last record without its headers count (dropped %v)", drop)
		}
	}
}
