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
	dst     []byte // nil when not all rendered (skipAhead)
	n       int    // the bytes rendered into dst
	rest    int    // the rendering of the records from the first that did not fit: its length,
	restSum uint32 // and its CRC-32C
	index   int32
	off     int
	cut     bool
	err     string
}

// renderValuesWith renders as storage's renderValues does: before each
// Next, ahead (if not nil) takes the records that fit, then Next renders
// the one it left, into dst while records fit, and the rest, from the
// first that does not, are counted in rest. With ahead nil it is Next
// alone, the reference.
func renderValuesWith(it RecordIter, dst []byte, ahead func(it *RecordIter, dst []byte, n int) int) valuesRender {
	var r valuesRender
	n, spilled := 0, false
	for {
		if ahead != nil && !spilled {
			n = ahead(&it, dst, n)
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

// appendAhead and skipAhead are the aheads of renderValuesWith: records
// rendered by AppendValues, or counted by SkipValues (and then not in dst).
func appendAhead(it *RecordIter, dst []byte, n int) int { return it.AppendValues(dst, n) }
func skipAhead(it *RecordIter, dst []byte, n int) int {
	return n + int(it.SkipValues(int64(len(dst)-n)))
}

func (r *valuesRender) spill(value []byte) {
	r.rest += len(value) + 1
	r.restSum = crc32.Update(crc32.Update(r.restSum, castagnoli, value), castagnoli, []byte{'\n'})
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
		want := renderValuesWith(it, b[:size], nil)
		if d := renderValuesWith(it, a[:size], appendAhead).diff(want); d != "" {
			t.Fatalf("%s, %d-byte buffer: %s", what, size, d)
		}
		skipped := renderValuesWith(it, a[:size], skipAhead)
		skipped.dst = nil // what SkipValues passed over is not in it
		if d := skipped.diff(want); d != "" {
			t.Fatalf("%s, %d-byte buffer, skipping: %s", what, size, d)
		}
	}
}

// eachSeedIterator calls check with iterators over the seed batches
// (decodeSeeds), over damaged copies of them (damaged of each) and over
// RecordsIn data from a record on, cut between records, a byte or two
// into one, or anywhere (cuts of each, at least three).
func eachSeedIterator(t *testing.T, rng *rand.Rand, counts func(records int32) (damaged, cuts int), check func(it RecordIter, what string)) {
	t.Helper()
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
		check(it, fmt.Sprintf("seed %d", s))

		data := raw[HeaderSize:]
		damaged, cuts := counts(b.RecordCount)
		for i := 0; i < damaged; i++ {
			from := rng.IntN(len(data))
			d := append(bytes.Clone(data[:from]), mutate(rng, data[from:min(from+64, len(data))])...)
			d = append(d, data[min(from+64, len(data)):]...)
			check(RecordIter{h: b.BatchHeader, data: d}, fmt.Sprintf("seed %d damaged near %d", s, from))
		}

		var starts []int
		for it, _ := dec.Records(&b); ; {
			starts = append(starts, it.Off())
			if !it.Next() {
				break
			}
		}
		for i := 0; i < max(cuts, 3); i++ {
			k := rng.IntN(len(starts))
			rest := data[starts[k]:]
			cut := rng.IntN(len(rest) + 1)
			if k+1 < len(starts) && i%3 < 2 {
				cut = starts[min(k+1+rng.IntN(40), len(starts)-1)] - starts[k] // between records,
				cut = min(cut+i%3*(1+rng.IntN(2)), len(rest))                  // or a byte or two after
			}
			check(RecordsIn(&b.BatchHeader, 0, rest[:cut:cut], int32(k)), fmt.Sprintf("seed %d from record %d cut at %d", s, k, cut))
		}
	}
}

// madeBatch returns a batch's header and records built by madeRecord, the
// record count sometimes fewer or more than there are.
func madeBatch(rng *rand.Rand) (BatchHeader, []byte) {
	var data []byte
	n := 1 + rng.IntN(8)
	for k := n; k > 0; k-- {
		data = append(data, madeRecord(rng)...)
	}
	lasts := []int32{-1, 0, 1, 63, 64, 8192, 1<<31 - 1}
	h := BatchHeader{BaseOffset: 100, BaseTimestamp: 1_700_000_000_000, RecordCount: int32(n), LastOffsetDelta: lasts[rng.IntN(len(lasts))]}
	if rng.IntN(3) == 0 {
		h.RecordCount = int32(rng.IntN(n + 2))
	}
	return h, data
}

// TestAppendValuesRendersAsNext checks AppendValues and SkipValues against
// Next: on good batches of every shape (null and empty values, keys,
// headers, three-byte offset deltas), on damaged ones, where they must
// stop where Next fails and with Next's error, and through RecordsIn with
// the data cut inside and between records, from several records on.
func TestAppendValuesRendersAsNext(t *testing.T) {
	rng := rand.New(rand.NewPCG(26, 1))
	counts := func(records int32) (int, int) {
		if records > 1000 {
			return 4, 2
		}
		return 100, 50
	}
	eachSeedIterator(t, rng, counts, func(it RecordIter, what string) { sameValuesRender(t, it, what, rng) })
}

// TestAppendValuesOnMadeRecords runs the same check on records built field
// by field around every edge (see TestDecodeCommonMatchesFieldsOnMadeRecords).
func TestAppendValuesOnMadeRecords(t *testing.T) {
	rng := rand.New(rand.NewPCG(26, 2))
	for round := 0; round < 2000; round++ {
		h, data := madeBatch(rng)
		sameValuesRender(t, RecordIter{h: h, data: data}, fmt.Sprintf("round %d", round), rng)
	}
}
