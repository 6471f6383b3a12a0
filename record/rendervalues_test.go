package record

import (
	"bytes"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"slices"
	"testing"
)

// valuesRender is what a values renderer made of an iterator: the bytes
// it put in dst, those of the records from the first that did not fit on
// (their length and checksum), and where the iterator stopped, and why.
type valuesRender struct {
	dst     []byte // nil when not rendered (renderSkip)
	n       int    // the bytes rendered into dst
	rest    int    // bytes of the records after it: how many,
	restSum uint32 // and their CRC-32C
	index   int32
	off     int
	cut     bool
	err     string
}

// renderByNext renders with Next alone: each record's value and '\n' into
// dst while they fit, the rest after the first that does not into rest.
func renderByNext(it RecordIter, dst []byte) valuesRender {
	var r valuesRender
	n, spilled := 0, false
	for it.Next() {
		rec := it.Record()
		if spilled || n+len(rec.Value)+1 > len(dst) {
			spilled = true
			r.spill(rec.Value)
			continue
		}
		n += copy(dst[n:], rec.Value)
		dst[n] = '\n'
		n++
	}
	r.dst, r.n = dst[:n], n
	return r.stopped(&it)
}

// renderFast renders as storage's renderValues does: AppendValues for the
// records that fit, Next for the one it leaves, again and again.
func renderFast(it RecordIter, dst []byte) valuesRender {
	var r valuesRender
	n, spilled := 0, false
	for {
		if !spilled {
			n = it.AppendValues(dst, n)
		}
		if !it.Next() {
			break
		}
		rec := it.Record()
		if spilled || n+len(rec.Value)+1 > len(dst) {
			spilled = true
			r.spill(rec.Value)
			continue
		}
		n += copy(dst[n:], rec.Value)
		dst[n] = '\n'
		n++
	}
	r.dst, r.n = dst[:n], n
	return r.stopped(&it)
}

func (r *valuesRender) spill(value []byte) {
	r.rest += len(value) + 1
	r.restSum = crc32.Update(crc32.Update(r.restSum, castagnoli, value), castagnoli, []byte{'\n'})
}

// renderSkip is renderFast counting with SkipValues instead of rendering
// with AppendValues: its dst is nil, and n says how much it would have
// rendered.
func renderSkip(it RecordIter, dst []byte) valuesRender {
	var r valuesRender
	n, spilled := 0, false
	for {
		if !spilled {
			n += int(it.SkipValues(int64(len(dst) - n)))
		}
		if !it.Next() {
			break
		}
		rec := it.Record()
		if spilled || n+len(rec.Value)+1 > len(dst) {
			spilled = true
			r.spill(rec.Value)
			continue
		}
		n += len(rec.Value) + 1
	}
	r.n = n
	return r.stopped(&it)
}

func (r valuesRender) stopped(it *RecordIter) valuesRender {
	r.index, r.off, r.cut = it.Index(), it.Off(), it.Cut()
	if err := it.Err(); err != nil {
		r.err = err.Error()
	}
	return r
}

func (r valuesRender) diff(o valuesRender) string {
	switch {
	case r.n != o.n:
		return fmt.Sprintf("rendered %d bytes, want %d", r.n, o.n)
	case r.dst != nil && o.dst != nil && !bytes.Equal(r.dst, o.dst):
		return fmt.Sprintf("rendered %q, want %q", r.dst, o.dst)
	case r.rest != o.rest || r.restSum != o.restSum:
		return fmt.Sprintf("left %d bytes (CRC %08x), want %d (%08x)", r.rest, r.restSum, o.rest, o.restSum)
	case r.index != o.index || r.off != o.off || r.cut != o.cut:
		return fmt.Sprintf("stopped at record %d, byte %d, cut %v; want %d, %d, %v", r.index, r.off, r.cut, o.index, o.off, o.cut)
	case r.err != o.err:
		return fmt.Sprintf("error %q, want %q", r.err, o.err)
	}
	return ""
}

// renderSizes returns buffer sizes around places a rendering of it could
// stop: a record's end and one byte either side, for the first and last
// few records and some in between (for each one, in a small batch).
func renderSizes(it RecordIter, rng *rand.Rand) []int {
	sizes := []int{0, 1, 2}
	var ends []int
	at := 0
	for it.Next() {
		at += len(it.Record().Value) + 1
		ends = append(ends, at)
	}
	for i, e := range ends {
		if i < 3 || i >= len(ends)-3 || len(ends) <= 32 || rng.IntN(len(ends)) < 8 {
			sizes = append(sizes, e-1, e, e+1)
		}
	}
	return append(sizes, rng.IntN(at+2), at+8) // the last: all fit
}

// sameValuesRender fails unless rendering with AppendValues and Next gives
// what Next alone gives, for every buffer size that matters.
func sameValuesRender(t *testing.T, it RecordIter, what string, rng *rand.Rand) {
	t.Helper()
	sizes := renderSizes(it, rng)
	a, b := make([]byte, slices.Max(sizes)), make([]byte, slices.Max(sizes))
	for _, size := range sizes {
		want := renderByNext(it, b[:size])
		if d := renderFast(it, a[:size]).diff(want); d != "" {
			t.Fatalf("%s, %d-byte buffer: %s", what, size, d)
		}
		if d := renderSkip(it, a[:size]).diff(want); d != "" {
			t.Fatalf("%s, %d-byte buffer, skipping: %s", what, size, d)
		}
	}
}

// TestAppendValuesRendersAsNext checks AppendValues against Next: on good
// batches of every shape (null and empty values, keys, headers, three-byte
// offset deltas), on damaged ones, where it must stop where Next fails and
// with Next's error, and through RecordsIn with the data cut inside and
// between records, from several records on.
func TestAppendValuesRendersAsNext(t *testing.T) {
	rng := rand.New(rand.NewPCG(26, 1))
	var dec Decoder
	for s, raw := range decodeSeeds(t) {
		b, err := ParseBatch(raw, 0)
		if err != nil {
			t.Fatal(err)
		}
		it, err := dec.Records(&b)
		if err != nil {
			t.Fatal(err)
		}
		sameValuesRender(t, it, fmt.Sprintf("seed %d", s), rng)

		data := raw[HeaderSize:]
		damaged := 100
		if b.RecordCount > 1000 {
			damaged = 4
		}
		for i := 0; i < damaged; i++ {
			from := rng.IntN(len(data))
			d := append(bytes.Clone(data[:from]), mutate(rng, data[from:min(from+64, len(data))])...)
			d = append(d, data[min(from+64, len(data)):]...)
			it := RecordIter{h: b.BatchHeader, data: d}
			sameValuesRender(t, it, fmt.Sprintf("seed %d damaged near %d", s, from), rng)
		}

		var starts []int
		for it, _ := dec.Records(&b); ; {
			starts = append(starts, it.Off())
			if !it.Next() {
				break
			}
		}
		for i := 0; i < damaged/2; i++ {
			k := rng.IntN(len(starts))
			rest := data[starts[k]:]
			cut := rng.IntN(len(rest) + 1)
			if i%2 == 0 && k+1 < len(starts) {
				cut = starts[min(k+1+rng.IntN(4), len(starts)-1)] - starts[k] // between records
			}
			it := RecordsIn(&b.BatchHeader, 0, rest[:cut:cut], int32(k))
			sameValuesRender(t, it, fmt.Sprintf("seed %d from record %d cut at %d", s, k, cut), rng)
		}
	}
}

// TestAppendValuesOnMadeRecords runs the same check on records built field
// by field around every edge (see TestDecodeCommonMatchesFieldsOnMadeRecords).
func TestAppendValuesOnMadeRecords(t *testing.T) {
	rng := rand.New(rand.NewPCG(26, 2))
	for round := 0; round < 2000; round++ {
		var data []byte
		n := 1 + rng.IntN(8)
		for k := n; k > 0; k-- {
			data = append(data, madeRecord(rng)...)
		}
		lasts := []int32{-1, 0, 1, 63, 64, 8192, 1<<31 - 1}
		h := BatchHeader{BaseOffset: 100, BaseTimestamp: 1_700_000_000_000, RecordCount: int32(n), LastOffsetDelta: lasts[rng.IntN(len(lasts))]}
		if rng.IntN(3) == 0 {
			h.RecordCount = int32(rng.IntN(n + 2)) // fewer or more than there are
		}
		sameValuesRender(t, RecordIter{h: h, data: data}, fmt.Sprintf("round %d", round), rng)
	}
}
