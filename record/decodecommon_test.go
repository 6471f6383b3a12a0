package record

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// sameDecoding decodes the records of data, each as decodeCommon and as
// decodeFields decode it from the same place, and fails when they differ:
// decodeCommon must give the same record and the same place after it, or
// decline and change nothing; it must never take a record that
// decodeFields refuses. It stops at the first record decodeFields
// refuses, as a reader does.
func sameDecoding(t testing.TB, h *BatchHeader, data []byte) {
	t.Helper()
	for off := 0; off < len(data); {
		var ha, hb []Header
		a := RecordIter{h: *h, data: data, off: off, headers: &ha}
		b := RecordIter{h: *h, data: data, off: off, headers: &hb}
		took := a.decodeCommon()
		err := b.decodeFields()
		if !took {
			if a.off != off || a.rec.Key != nil || a.rec.Value != nil || a.rec.Offset != 0 || a.rec.Timestamp != 0 {
				t.Fatalf("at %d: decodeCommon declined and changed the iterator (off %d, record %v)", off, a.off, &a.rec)
			}
			if err != nil {
				return
			}
			off = b.off
			continue
		}
		if err != nil {
			t.Fatalf("at %d: decodeCommon took a record (%v) that decodeFields refuses: %v", off, &a.rec, err)
		}
		ra, rb := &a.rec, &b.rec
		switch {
		case a.off != b.off:
			t.Fatalf("at %d: decodeCommon ends the record at %d, decodeFields at %d", off, a.off, b.off)
		case ra.Offset != rb.Offset || ra.Timestamp != rb.Timestamp:
			t.Fatalf("at %d: offset and timestamp %d %d, want %d %d", off, ra.Offset, ra.Timestamp, rb.Offset, rb.Timestamp)
		case !sameBytes(ra.Key, rb.Key) || !sameBytes(ra.Value, rb.Value):
			t.Fatalf("at %d: key %q value %q, want %q %q", off, ra.Key, ra.Value, rb.Key, rb.Value)
		case len(ra.Headers) != 0 || len(rb.Headers) != 0:
			t.Fatalf("at %d: decodeCommon took a record with %d headers", off, len(rb.Headers))
		case cap(ra.Key) != len(ra.Key) || cap(ra.Value) != len(ra.Value):
			t.Fatalf("at %d: key or value can be appended to in place", off)
		}
		off = a.off
	}
}

// sameBytes is bytes.Equal that also tells nil (null) from empty.
func sameBytes(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }

// decodeSeeds builds batches of the shapes records take: values only, as
// append files write them, past 8,192 records (three-byte offset deltas);
// keys and values null, empty, and long enough for two- and three-byte
// lengths; timestamps far apart; headers; gaps in the offset deltas.
func decodeSeeds(t testing.TB) [][]byte {
	var out [][]byte
	var b Builder
	build := func() {
		raw, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, bytes.Clone(raw))
	}
	b.Reset()
	val := bytes.Repeat([]byte("v"), 99)
	for i := 0; i < 9000; i++ {
		b.Append(1_700_000_000_000, nil, val, nil)
	}
	build()

	b.Reset()
	for _, n := range []int{-1, 0, 1, 30, 31, 63, 64, 100, 8191, 8192, 9000} {
		var k, v []byte
		if n >= 0 {
			k, v = bytes.Repeat([]byte("k"), n), bytes.Repeat([]byte("w"), n)
		}
		b.Append(1_700_000_000_000+int64(n)*1000, k, v, nil)
		b.Append(1_700_000_000_000-int64(n), nil, v, nil)
		b.Append(1_700_000_000_000, k, nil, nil)
	}
	build()

	b.Reset()
	for i := int32(0); i < 200; i++ {
		var hs []Header
		if i%3 == 0 {
			hs = []Header{{Key: []byte("h"), Value: []byte("x")}}
		}
		b.AppendAt(i*97, int64(i)*(1<<40), []byte("key"), []byte("value"), hs)
	}
	build()
	return out
}

// mutate returns a copy of data with a few bytes changed, cut or added,
// the changes biased to the bytes that matter to varints.
func mutate(rng *rand.Rand, data []byte) []byte {
	d := bytes.Clone(data)
	special := []byte{0x00, 0x01, 0x02, 0x7e, 0x7f, 0x80, 0x81, 0xfe, 0xff}
	for n := 1 + rng.IntN(4); n > 0 && len(d) > 0; n-- {
		i := rng.IntN(len(d))
		switch rng.IntN(5) {
		case 0, 1:
			d[i] = special[rng.IntN(len(special))]
		case 2:
			d[i] ^= 1 << rng.IntN(8)
		case 3:
			d = d[:i]
		case 4:
			d = append(d[:i:i], append([]byte{special[rng.IntN(len(special))]}, d[i:]...)...)
		}
	}
	return d
}

// TestDecodeCommonMatchesFields checks decodeCommon against decodeFields
// on good batches of every shape and on thousands of damaged ones (a
// batch's CRC would refuse most of these, but a lie with a good CRC must
// not get past the decoder either), with the header's last offset delta
// and timestamp type varied too.
func TestDecodeCommonMatchesFields(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, raw := range decodeSeeds(t) {
		h, err := ParseHeader(raw, 0)
		if err != nil {
			t.Fatal(err)
		}
		data := raw[HeaderSize:]
		for _, last := range []int32{h.LastOffsetDelta, 0, 63, 64, 8191, 8192, -1} {
			hh := h
			hh.LastOffsetDelta = last
			sameDecoding(t, &hh, data)
			hh.Attributes |= logAppendTimeBit
			sameDecoding(t, &hh, data)
		}
		for i := 0; i < 300; i++ {
			// Damage near a random record, not only the batch's start.
			from := rng.IntN(len(data))
			d := append(bytes.Clone(data[:from]), mutate(rng, data[from:min(from+64, len(data))])...)
			d = append(d, data[min(from+64, len(data)):]...)
			sameDecoding(t, &h, d)
		}
	}
}

// TestDecodeCommonMatchesFieldsOnMadeRecords builds records field by
// field, each field's value picked from around the edges of the varint
// sizes and of what is allowed (negative lengths and deltas, lengths past
// the record, headers, bytes after them, a record length off by one),
// each varint written in its shortest form or padded with a zero byte,
// as a lying writer might: decodeCommon must decode each as decodeFields
// does, or decline.
func TestDecodeCommonMatchesFieldsOnMadeRecords(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for round := 0; round < 3000; round++ {
		var data []byte
		for n := 1 + rng.IntN(8); n > 0; n-- {
			data = append(data, madeRecord(rng)...)
		}
		lasts := []int32{-1, 0, 1, 62, 63, 64, 8191, 8192, 1 << 20, 1<<31 - 1}
		h := BatchHeader{BaseOffset: 100, BaseTimestamp: 1_700_000_000_000, MaxTimestamp: 1_800_000_000_000, LastOffsetDelta: lasts[rng.IntN(len(lasts))]}
		if rng.IntN(4) == 0 {
			h.Attributes |= logAppendTimeBit
		}
		sameDecoding(t, &h, data)
	}
}

// madeRecord returns one record's bytes, as TestDecodeCommonMatchesFieldsOnMadeRecords says.
func madeRecord(rng *rand.Rand) []byte {
	edges := []int64{0, 1, 2, 31, 32, 63, 64, 65, 100, 4095, 4096, 8191, 8192, 8193, 1<<20 - 1, 1 << 20, 1 << 21}
	pick := func(negative bool) int64 {
		v := edges[rng.IntN(len(edges))]
		if negative && rng.IntN(5) == 0 {
			v = -v - 1
		}
		return v
	}
	put := func(b []byte, v int64) []byte {
		b = appendVarint(b, v)
		if rng.IntN(8) == 0 {
			b[len(b)-1] |= 0x80
			return append(b, 0) // padded: a longer form of the same value
		}
		return b
	}
	field := func(b []byte) []byte {
		switch rng.IntN(6) {
		case 0:
			return put(b, -1) // null
		case 1:
			return put(b, -1-int64(rng.IntN(3))-1) // a bad length
		default:
			n := pick(false)
			if n > 9000 {
				n = int64(rng.IntN(9000)) // keep records small; lengths past them come from the record length
			}
			b = put(b, n)
			return append(b, bytes.Repeat([]byte{'x'}, int(n))...)
		}
	}
	body := []byte{byte(rng.IntN(256))} // attributes
	body = put(body, pick(true))        // timestamp delta
	body = put(body, pick(true))        // offset delta
	body = field(body)                  // key
	body = field(body)                  // value
	switch rng.IntN(8) {
	case 0:
		body = put(body, 1)
		body = field(put(body, 1))
		body = append(body, 'h')
		body = field(body)
	case 1:
		body = put(body, -1)
	case 2:
		body = put(body, 0)
		body = append(body, 0) // a byte after the last field
	default:
		body = put(body, 0)
	}
	length := int64(len(body))
	switch rng.IntN(10) {
	case 0:
		length--
	case 1:
		length++
	case 2:
		length = -length
	}
	return append(put(nil, length), body...)
}

// FuzzDecodeCommon runs the same comparison on what the fuzzer makes of
// the seeds: go test -run '^$' -fuzz FuzzDecodeCommon ./record
func FuzzDecodeCommon(f *testing.F) {
	for _, raw := range decodeSeeds(f) {
		if len(raw) < 64<<10 {
			f.Add(raw[HeaderSize:], int32(-1), false)
			f.Add(raw[HeaderSize:], int32(1<<20), true)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, last int32, logAppend bool) {
		h := BatchHeader{BaseOffset: 100, BaseTimestamp: 1_700_000_000_000, MaxTimestamp: 1_800_000_000_000, LastOffsetDelta: last}
		if logAppend {
			h.Attributes |= logAppendTimeBit
		}
		sameDecoding(t, &h, data)
	})
}
