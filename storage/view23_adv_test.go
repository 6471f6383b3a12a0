package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/internal/broker"
	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/vfs"
)

// Adversarial tests of the read path of stop 23 (70cb31c, 623206b): walks
// that read what innerBatch.span estimates, or the batch the scanner has
// in memory (walkSource.mem), and a first read of a render elsewhere sized
// by viewIndex.startAfter.

// v23Text returns n bytes of letters that differ from place to place, so
// that bytes served from the wrong place of a long record show.
func v23Text(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('a' + rng.Intn(26))
	}
	return b
}

// v23Vals returns n values tagged tag-k, each with up to size letters.
func v23Vals(rng *rand.Rand, tag string, n, size int) []string {
	out := make([]string, n)
	for k := range out {
		out[k] = fmt.Sprintf("%s-%d-%s", tag, k, v23Text(rng, rng.Intn(size)))
	}
	return out
}

// v23Skewed returns big batches whose record bytes render very unevenly,
// so that span's estimate (the batch's own ratio of record bytes to
// rendered ones) is far too small in one part and far too big in another,
// and records longer than any first read.
func v23Skewed(rng *rand.Rand) map[string][]Record {
	tiny := func(i int) Record {
		switch i % 7 {
		case 0:
			return Record{Value: nil}
		case 1:
			return Record{Value: []byte{}}
		default:
			return Record{Value: v23Text(rng, rng.Intn(6))}
		}
	}
	out := map[string][]Record{}
	var recs []Record
	for i := 0; i < 3000; i++ {
		recs = append(recs, tiny(i))
	}
	recs = append(recs, Record{Value: v23Text(rng, 200<<10)})
	for i := 0; i < 300; i++ {
		recs = append(recs, tiny(i))
	}
	out["tiny then 200 KB"] = recs

	recs = nil
	for i := 0; i < 300; i++ { // records of big keys: Values renders ~2 bytes of ~2 KB
		recs = append(recs, Record{Key: v23Text(rng, 2000), Value: v23Text(rng, rng.Intn(3))})
	}
	out["key heavy"] = recs

	recs = nil
	for i := 0; i < 12; i++ {
		recs = append(recs, Record{Value: v23Text(rng, 40<<10+rng.Intn(60<<10))})
	}
	out["every record longer than a window"] = recs

	recs = nil
	for i := 0; i < 60; i++ {
		if i%2 == 0 {
			recs = append(recs, Record{Value: v23Text(rng, 1)})
		} else {
			recs = append(recs, Record{Value: v23Text(rng, 50<<10+rng.Intn(2000))})
		}
	}
	out["alternating 1 B and 50 KB"] = recs

	recs = []Record{{Value: v23Text(rng, 300<<10)}}
	for i := 0; i < 2000; i++ {
		recs = append(recs, tiny(i))
	}
	recs = append(recs, Record{Value: v23Text(rng, 5000)}, Record{Value: nil})
	out["300 KB then tiny"] = recs

	recs = nil
	for i := 0; i < 400; i++ { // headers: record bytes JSONL shows, Values does not
		recs = append(recs, Record{Value: v23Text(rng, rng.Intn(300)), Headers: []record.Header{{Key: []byte("h"), Value: v23Text(rng, rng.Intn(800))}}})
	}
	out["headers"] = recs
	return out
}

var v23SkewedOrder = []string{"tiny then 200 KB", "key heavy", "every record longer than a window", "alternating 1 B and 50 KB", "300 KB then tiny", "headers"}

// v23Read reads size bytes at at through v and checks them against want
// (all of them, up to want's end); then reads on 3000 bytes, as the next
// read of a handle would.
func v23Read(t *testing.T, v *View, want []byte, at int64, size int, what string) {
	t.Helper()
	if at < 0 || at >= int64(len(want)) || size <= 0 {
		return
	}
	for step, sz := range []int{size, 3000} {
		b := make([]byte, sz)
		n, err := v.ReadAt(b, at)
		if err != nil {
			require.ErrorIs(t, err, io.EOF, "%s: read %d: %d at %d", what, step, sz, at)
		}
		end := min(at+int64(sz), int64(len(want)))
		require.Equal(t, int(end-at), n, "%s: read %d: %d at %d: short", what, step, sz, at)
		if !bytes.Equal(want[at:end], b[:n]) {
			k := 0
			for k < n && want[at+int64(k)] == b[k] {
				k++
			}
			t.Fatalf("%s: read %d: %d at %d: byte %d (at %d) differs: got %q, want %q", what, step, sz, at, k, at+int64(k), b[k:min(k+40, n)], want[at+int64(k):min(at+int64(k)+40, end)])
		}
		at += int64(n)
		if at >= int64(len(want)) {
			return
		}
	}
}

// Big batches of very uneven records (tiny ones then one of 200 KB, big
// keys and tiny values, every record longer than a window, ...), in both
// formats: reads that start at each mark, a byte before and after it,
// and end exactly at the batch's end, a byte before or after it, or
// after a few bytes, with the batch's marks kept (a walk from the log,
// its first read sized by span) or dropped before every read (the read
// that makes them renders from the batch in memory), by a fresh view or
// one that read elsewhere last.
func TestView23SkewedBigBatches(t *testing.T) {
	t.Parallel() // its own folder and no package settings: runs beside the other slow ones
	l := openLog(t, t.TempDir(), Options{})
	top, _ := l.CreateTopic("t", 1, nil)
	p, _ := top.Partition(0)
	rng := rand.New(rand.NewSource(advSeed(2323)))
	_, err := p.Append([]Record{{Value: []byte("a small batch first")}})
	require.NoError(t, err)
	skewed := v23Skewed(rng)
	for k, name := range v23SkewedOrder {
		_, err := p.Append(skewed[name])
		require.NoError(t, err)
		_, err = p.Append([]Record{{Value: []byte(fmt.Sprint("small after ", k))}})
		require.NoError(t, err)
	}
	require.Len(t, p.segments(), 1)
	s := p.segments()[0]
	batches := batchesOf(t, s, false)
	for _, f := range []Format{Values, JSONL} {
		want := renderAll(t, p, f, 0)
		vi := s.views.get(s, f)
		// The marks, made by a sequential read.
		v, err := p.NewView(f, 0)
		require.NoError(t, err)
		got, err := readView(t, v, 64<<10)
		require.NoError(t, err)
		require.Equal(t, string(want), string(got))
		require.NoError(t, v.Close())
		// Append splits a big write into batches of at most a MiB or so:
		// every batch with marks.
		var ibs []*innerBatch
		var names []string
		for _, b := range batches {
			if ib := vi.innerAt(b.Pos); ib != nil {
				ibs = append(ibs, ib)
				names = append(names, fmt.Sprintf("batch at %d (offsets %d..%d)", b.Pos, b.BaseOffset, b.LastOffset()))
			} else {
				require.False(t, markableHeader(&b.BatchHeader), "%v: batch at %d has no marks", f, b.Pos)
			}
		}
		require.GreaterOrEqual(t, len(ibs), len(v23SkewedOrder), f)
		old, err := p.NewView(f, 0) // a view that read elsewhere last
		require.NoError(t, err)
		reads := 0
		for k, ib := range ibs {
			name := names[k]
			for _, dropped := range []bool{false, true} {
				for mi, m := range ib.marks {
					if raceEnabled && mi%8 != 3 {
						continue
					}
					type rd struct {
						at   int64
						size int64
					}
					rds := []rd{
						{m.at, ib.to - m.at}, {m.at, ib.to - m.at + 1}, {m.at, ib.to - m.at - 1},
						{m.at - 1, ib.to - m.at + 1}, {m.at + 1, ib.to - m.at - 1},
						{m.at, 1}, {m.at, 4096}, {m.at - 1, 2}, {m.at + rng.Int63n(ib.to-m.at), ib.to - m.at},
					}
					if mi+1 < len(ib.marks) { // to the next mark exactly
						rds = append(rds, rd{m.at, ib.marks[mi+1].at - m.at}, rd{m.at, ib.marks[mi+1].at - m.at + 1})
					}
					for ri, r := range rds {
						if r.size <= 0 || r.size > 4<<20 {
							continue
						}
						if dropped {
							vi.dropInner()
						}
						var v *View
						if ri%2 == 0 {
							v, err = p.NewView(f, 0)
							require.NoError(t, err)
						} else {
							v = old
							// Somewhere else first, in another batch.
							at := rng.Int63n(int64(len(want)))
							_, err := v.ReadAt(make([]byte, 100), at)
							if err != nil {
								require.ErrorIs(t, err, io.EOF)
							}
							if dropped {
								vi.dropInner()
							}
						}
						what := fmt.Sprintf("%v %s dropped=%v mark %d (at %d, batch %d..%d): read %d", f, name, dropped, mi, m.at, ib.from(), ib.to, ri)
						v23Read(t, v, want, r.at, int(r.size), what)
						reads++
						if v != old {
							require.NoError(t, v.Close())
						}
					}
				}
			}
		}
		require.NoError(t, old.Close())
		t.Logf("%v: %d reads", f, reads)

		// And at random, with marks dropped now and then, several views.
		views := make([]*View, 3)
		for k := range views {
			views[k], err = p.NewView(f, 0)
			require.NoError(t, err)
		}
		advWalk(t, p, views, want, rng, advSteps(2000), f.String())
		for _, v := range views {
			require.NoError(t, v.Close())
		}

		// Views from offsets inside the skewed batches: their rendering
		// starts inside a batch with marks.
		for k, b := range batches {
			if vi.innerAt(b.Pos) == nil || raceEnabled && k%3 != 1 {
				continue
			}
			for _, from := range []record.Offset{b.BaseOffset + 1, b.BaseOffset + record.Offset(rng.Int63n(int64(b.RecordCount))), b.LastOffset()} {
				want := renderAll(t, p, f, from)
				v1, err := p.NewView(f, from)
				require.NoError(t, err)
				v2, err := p.NewView(f, from)
				require.NoError(t, err)
				size, err := v1.Size()
				require.NoError(t, err)
				require.Equal(t, int64(len(want)), size)
				advWalk(t, p, []*View{v1, v2}, want, rng, advSteps(150), fmt.Sprintf("%v from %d", f, from))
				require.NoError(t, v1.Close())
				require.NoError(t, v2.Close())
			}
		}
	}
}

// v23Lie damages a copy of batch b (its bytes) as kind says, with the CRC
// made right again: record lengths or counts that lie. offs are where its
// records start in the bytes after its header.
func v23Lie(t *testing.T, b record.Batch, offs []int, kind string) []byte {
	t.Helper()
	raw := bytes.Clone(b.Bytes)
	data := raw[record.HeaderSize:]
	setVarint := func(at int, delta int64) {
		v, n := binary.Varint(data[at:])
		require.Greater(t, n, 0)
		var enc [binary.MaxVarintLen64]byte
		k := binary.PutVarint(enc[:], v+delta)
		require.Equal(t, n, k, "%s: the lie must keep the varint's width", kind)
		copy(data[at:], enc[:k])
	}
	// A record whose length varint has room for +-2: the one at from, or
	// the nearest after it, or else before it.
	pick := func(from int) int {
		ok := func(i int) bool {
			v, n := binary.Varint(data[offs[i]:])
			var enc [binary.MaxVarintLen64]byte
			return binary.PutVarint(enc[:], v+2) == n && binary.PutVarint(enc[:], v-2) == n && v > 4
		}
		for i := from; i < len(offs); i++ {
			if ok(i) {
				return i
			}
		}
		for i := from - 1; i >= 0; i-- {
			if ok(i) {
				return i
			}
		}
		t.Fatalf("%s: no record to lie about", kind)
		return 0
	}
	switch kind {
	case "count-1":
		binary.BigEndian.PutUint32(raw[57:], uint32(b.RecordCount-1))
	case "count+1":
		binary.BigEndian.PutUint32(raw[57:], uint32(b.RecordCount+1))
	case "middle length+1":
		setVarint(offs[pick(len(offs)/2)], 1)
	case "middle length-1":
		setVarint(offs[pick(len(offs)/2)], -1)
	case "last length-1":
		setVarint(offs[pick(len(offs)-1)], -1)
	case "last length+2":
		setVarint(offs[pick(len(offs)-1)], 2)
	case "first length huge":
		// A length past the batch's end, in the varint's width: the first
		// record with a 3-byte length (one longer than a window).
		for _, at := range offs {
			if _, n := binary.Varint(data[at:]); n >= 3 {
				enc := bytes.Repeat([]byte{0xfe}, n)
				enc[n-1] = 0x3e
				copy(data[at:], enc)
				v, _ := binary.Varint(data[at:])
				require.Greater(t, v, int64(len(data)), kind)
				break
			}
			require.NotEqual(t, offs[len(offs)-1], at, "%s: no record with a 3-byte length", kind)
		}
	case "middle value length":
		// The value's length of a record in the middle, a byte bigger: the
		// record's own length stays, its fields do not add up.
		at := offs[pick(len(offs)/2)]
		_, n := binary.Varint(data[at:])
		at += n + 1 // attributes
		_, n = binary.Varint(data[at:])
		at += n // timestamp delta
		_, n = binary.Varint(data[at:])
		at += n // offset delta
		kl, n := binary.Varint(data[at:])
		at += n + int(max(kl, 0)) // key
		v, n := binary.Varint(data[at:])
		var enc [binary.MaxVarintLen64]byte
		if binary.PutVarint(enc[:], v+1) != n {
			setVarint(at, -1)
		} else {
			setVarint(at, 1)
		}
	case "offset delta out of batch":
		at := offs[pick(len(offs)/2)]
		_, n := binary.Varint(data[at:])
		at += n + 1
		_, n = binary.Varint(data[at:])
		at += n // the offset delta
		old, n := binary.Varint(data[at:])
		done := false
		for _, d := range []int64{-1, -100, -10000, int64(b.LastOffsetDelta) + 1, int64(b.LastOffsetDelta) + 100} {
			var enc [binary.MaxVarintLen64]byte
			if binary.PutVarint(enc[:], d) == n {
				setVarint(at, d-old)
				done = true
				break
			}
		}
		require.True(t, done, kind)
	default:
		t.Fatalf("kind %q", kind)
	}
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	return raw
}

var v23Lies = []string{"count-1", "count+1", "middle length+1", "middle length-1", "last length-1", "last length+2", "first length huge", "middle value length", "offset delta out of batch"}

type v23Rec struct {
	off        record.Offset
	key, value string
}

// A walk of a big batch whose records lie (a record count, a record's
// length, a field's length; the CRC made right) reports the same: the
// same records, where it stopped, and corruption or not, whether it reads
// the records from the log, the first read sized by any need, or from
// the batch in memory (walkSource.mem), from every mark on, walking to
// the end or stopping early.
func TestView23WalkMemMatchesLog(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{})
	top, _ := l.CreateTopic("t", 1, nil)
	p, _ := top.Partition(0)
	rng := rand.New(rand.NewSource(advSeed(2324)))
	_, err := p.Append([]Record{{Value: []byte("before")}})
	require.NoError(t, err)
	var recs []Record
	for i := 0; i < 700; i++ {
		var v []byte
		switch {
		case i == 5 || i == 400:
			v = v23Text(rng, innerWindow+rng.Intn(innerWindow))
		case i%13 == 0:
			v = nil
		default:
			v = v23Text(rng, rng.Intn(300))
		}
		recs = append(recs, Record{Key: []byte(fmt.Sprint(i)), Value: v})
	}
	_, err = p.Append(recs)
	require.NoError(t, err)
	_, err = p.Append([]Record{{Value: []byte("after")}})
	require.NoError(t, err)
	s := p.segments()[0]
	good := batchesOf(t, s, true)[1]
	// The batch's marks, made by a read.
	v, err := p.NewView(Values, 0)
	require.NoError(t, err)
	_, err = readView(t, v, 8192)
	require.NoError(t, err)
	require.NoError(t, v.Close())
	ib := s.views.get(s, Values).innerAt(good.Pos)
	require.NotNil(t, ib)
	require.Greater(t, len(ib.marks), 4)
	// Where each record starts.
	offs := recordStarts(t, &good)
	require.Len(t, offs, int(good.RecordCount))

	data := int(good.Size()) - record.HeaderSize
	needs := []int{0, 1, 2, 5, 64, 700, 4096, innerWindow - 1, innerWindow + 1, data / 2, data}
	for _, kind := range append([]string{"none"}, v23Lies...) {
		raw := good.Bytes
		if kind != "none" {
			raw = v23Lie(t, good, offs, kind)
		}
		writeLog(t, s, raw, int64(good.Pos))
		h, err := record.ParseHeader(raw, good.Pos)
		require.NoError(t, err)
		lying := *ib
		lying.h = h
		mem := bytes.Clone(raw[record.HeaderSize:])
		corrupt := 0
		for _, m := range append([]innerMark{{}}, ib.marks...) {
			for _, stop := range []int{-1, 1, 3, 50} {
				walk := func(src walkSource) ([]v23Rec, int32, int, error) {
					var got []v23Rec
					index, off, err := lying.walk(s, src, m.index, int(m.off), func(r *record.Record) bool {
						got = append(got, v23Rec{r.Offset, string(r.Key), string(r.Value)})
						return stop < 0 || len(got) < stop
					}, nil)
					return got, index, off, err
				}
				what := fmt.Sprintf("%s: from record %d (byte %d), stopping after %d", kind, m.index, m.off, stop)
				mrecs, mindex, moff, merr := walk(walkSource{mem: mem, win: getWindow()})
				if merr != nil {
					require.ErrorIs(t, merr, record.ErrCorrupt, "%s: mem", what)
					corrupt++
				}
				for _, need := range needs {
					lrecs, lindex, loff, lerr := walk(walkSource{win: getWindow(), need: need})
					require.Equal(t, merr == nil, lerr == nil, "%s: need %d: mem says %v, the log %v", what, need, merr, lerr)
					if lerr != nil {
						require.ErrorIs(t, lerr, record.ErrCorrupt, "%s: need %d", what, need)
					}
					require.Equal(t, mrecs, lrecs, "%s: need %d: the records", what, need)
					if merr == nil { // on an error, where it stopped is the window's start: no caller uses it
						require.Equal(t, mindex, lindex, "%s: need %d: index", what, need)
						require.Equal(t, moff, loff, "%s: need %d: off", what, need)
					}
				}
			}
		}
		if kind == "none" {
			require.Zero(t, corrupt)
		} else {
			require.NotZero(t, corrupt, "%s: no walk found the lie", kind)
			// And a whole read of it does too (or the batch would get
			// marks and be served).
			b := record.Batch{BatchHeader: h, Pos: good.Pos, Bytes: raw}
			require.NoError(t, b.Verify(), kind)
			var dec record.Decoder
			it, err := dec.Records(&b)
			if err == nil {
				for it.Next() {
				}
				err = it.Err()
			}
			require.ErrorIs(t, err, record.ErrCorrupt, kind)
		}
	}
	writeLog(t, s, good.Bytes, int64(good.Pos))
}

// A big batch whose records lie (the CRC made right), after a good big
// one with marks or not, on a log just opened: nothing of it is served,
// in either format or isolation level, however a read gets there (a first
// read inside it, which reads it in the one pread startAfter sizes; from
// a mark of the good one to its end exactly and on; sequential reads);
// the read that reaches it fails.
func TestView23LyingBigBatchServesNothing(t *testing.T) {
	for _, kind := range v23Lies {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			l, err := Open(dir, Options{Logger: testLogger(t), RetentionCheckInterval: -1})
			require.NoError(t, err)
			top, _ := l.CreateTopic("t", 1, small("segment.bytes=2000000"))
			p, _ := top.Partition(0)
			rng := rand.New(rand.NewSource(advSeed(2325)))
			_, err = p.Append([]Record{{Value: []byte("first")}})
			require.NoError(t, err)
			for _, tag := range []string{"X", "Y", "Z"} {
				recs := make([]Record, 300)
				for k := range recs {
					recs[k] = Record{Value: []byte(fmt.Sprintf("%s%03d%s", tag, k, v23Text(rng, rng.Intn(500))))}
				}
				recs[7].Value = bytes.Repeat([]byte(tag), innerWindow+100)
				_, err := p.Append(recs)
				require.NoError(t, err)
			}
			seg := p.segments()[0]
			bad := batchesOf(t, seg, true)[2]
			prefix := map[Format][]byte{}
			for _, f := range []Format{Values, JSONL} {
				r, err := p.NewReader(0)
				require.NoError(t, err)
				for {
					rec, err := r.Next()
					require.NoError(t, err)
					if rec.Offset >= bad.BaseOffset {
						break
					}
					prefix[f] = f.Append(prefix[f], rec)
				}
				r.Close()
			}
			offs := recordStarts(t, &bad)
			require.NoError(t, l.Close())
			raw := v23Lie(t, bad, offs, kind)
			f, err := os.OpenFile(seg.logPath(), os.O_WRONLY, 0)
			require.NoError(t, err)
			_, err = f.WriteAt(raw, int64(bad.Pos))
			require.NoError(t, err)
			require.NoError(t, f.Close())

			for _, iso := range []Isolation{ReadUncommitted, ReadCommitted} {
				for _, f := range []Format{Values, JSONL} {
					want := prefix[f]
					for _, marked := range []bool{false, true} {
						what := fmt.Sprintf("%s %v %v marked=%v", kind, iso, f, marked)
						l, err := Open(dir, Options{ReadOnly: true, Isolation: iso, Logger: testLogger(t), RetentionCheckInterval: -1})
						require.NoError(t, err)
						p, err := l.Partition("t", 0)
						require.NoError(t, err)
						s := p.segments()[0]
						var ibX *innerBatch
						if marked { // X gets its marks first
							v, err := p.NewView(f, 0)
							require.NoError(t, err)
							_, err = v.ReadAt(make([]byte, 10), int64(len(want))-50000)
							require.NoError(t, err, what)
							require.NoError(t, v.Close())
							ibX = s.views.get(s, f).innerAt(batchesOf(t, s, false)[1].Pos)
							require.NotNil(t, ibX, what)
						}
						// First reads inside the bad batch, of every size.
						for _, at := range []int64{0, 1, 100, 20000, 60000, 200000} {
							for _, size := range []int{1, 4096, 100000, 1 << 20} {
								v, err := p.NewView(f, 0)
								require.NoError(t, err)
								b := make([]byte, size)
								n, err := v.ReadAt(b, int64(len(want))+at)
								require.True(t, badData(err), "%s: a read of %d at %d into the bad batch: %d bytes, %v", what, size, at, n, err)
								require.Zero(t, n, what)
								require.NoError(t, v.Close())
							}
						}
						// Reads that end in it or at its start.
						for _, back := range []int64{1, 2, 100, 5000, 40000} {
							for _, over := range []int64{0, 1, 5000, 300000} {
								v, err := p.NewView(f, 0)
								require.NoError(t, err)
								at := int64(len(want)) - back
								b := make([]byte, back+over)
								n, err := v.ReadAt(b, at)
								if over == 0 {
									require.NoError(t, err, what)
								}
								require.Equal(t, string(want[at:]), string(b[:n]), "%s: a read of %d at %d", what, len(b), at)
								n, err = v.ReadAt(b, int64(len(want)))
								require.True(t, badData(err), "%s: the next read: %d bytes, %v", what, n, err)
								require.Zero(t, n, what)
								require.NoError(t, v.Close())
							}
						}
						// From each mark of the good batch before it to its end,
						// and on.
						if ibX != nil {
							readFromMarksToBadBatch(t, p, f, ibX, want, what)
						}
						for _, size := range []int{1000, 70000, 1 << 20} {
							v, err := p.NewView(f, 0)
							require.NoError(t, err)
							got, rerr := readView(t, v, size)
							require.True(t, badData(rerr), "%s: reads of %d: %v", what, size, rerr)
							require.Equal(t, string(want), string(got), "%s: reads of %d", what, size)
							require.NoError(t, v.Close())
						}
						require.NoError(t, l.Close())
					}
				}
			}
		})
	}
}

// ReadCommitted views of a segment with many aborted (hidden)
// transactional batches before the wanted bytes, small and big ones, with
// view index entries dense or sparse: startAfter gets a position in the
// index's coordinates from a view's (plus the hidden bytes before where
// the render starts only), so its first read may fall short. Every read
// at a new place, of any size, by a fresh view, serves the model's bytes;
// the preads a read takes are logged.
func TestView23TxnHiddenBeforeWanted(t *testing.T) {
	dir := t.TempDir()
	w := newTxnWriter(t, dir, broker.Options{SegmentBytes: 8 << 20})
	rng := rand.New(rand.NewSource(advSeed(2326)))
	vals := func(tag string, n, size int) []string { return v23Vals(rng, tag, n, size) }
	for round := 0; round < 12; round++ {
		// A run of aborted transactions, small and (now and then) big,
		// then committed and plain records.
		for k := 0; k < 30+rng.Intn(60); k++ {
			if rng.Intn(10) == 0 {
				w.write(1, true, vals(fmt.Sprint("abortedbig", round, k), 200, 800)...)
			} else {
				w.write(1, true, vals(fmt.Sprint("aborted", round, k), 1+rng.Intn(5), 300)...)
			}
		}
		w.marker(1, true)
		for k := 0; k < 5+rng.Intn(20); k++ {
			switch rng.Intn(4) {
			case 0:
				w.write(2, true, vals(fmt.Sprint("committed", round, k), 1+rng.Intn(5), 300)...)
			case 1:
				w.write(-1, false, vals(fmt.Sprint("plainbig", round, k), 150+rng.Intn(200), 900)...)
			default:
				w.write(-1, false, vals(fmt.Sprint("plain", round, k), 1+rng.Intn(5), 300)...)
			}
		}
		w.marker(2, false)
	}
	w.write(3, true, "left-open") // the stable end stops before it
	w.write(-1, false, "after-the-open-one")
	require.NoError(t, w.p.Close())

	defer func(i int64) { viewInterval = i }(viewInterval)
	for _, interval := range []int64{512, 8 << 10, 1 << 20} {
		viewInterval = interval
		for _, iso := range []Isolation{ReadCommitted, ReadUncommitted} {
			fs := &countingFS{FS: vfs.Default}
			l := openLog(t, dir, Options{ReadOnly: true, Isolation: iso, FS: fs})
			p, err := l.Partition("tx", 0)
			require.NoError(t, err)
			for _, f := range []Format{Values, JSONL} {
				want := w.expected(t, p, f, iso, 0)
				what := fmt.Sprintf("interval %d %v %v", interval, iso, f)
				v, err := p.NewView(f, 0)
				require.NoError(t, err)
				size, err := v.Size()
				require.NoError(t, err)
				require.Equal(t, int64(len(want)), size, what)
				require.NoError(t, v.Close())
				reads := advSteps(400)
				calls := fs.logReads.Load()
				for k := 0; k < reads; k++ {
					at := rng.Int63n(int64(len(want)))
					sz := []int{1, 100, 4096, 8192, 40000, 128 << 10, 1 << 20}[rng.Intn(7)]
					if rng.Intn(8) == 0 {
						for _, s := range p.segments() {
							s.views.dropInner()
						}
					}
					v, err := p.NewView(f, 0)
					require.NoError(t, err)
					v23Read(t, v, want, at, sz, what)
					require.NoError(t, v.Close())
				}
				t.Logf("%s: %.2f preads a read (and one on)", what, float64(fs.logReads.Load()-calls)/float64(reads))
				views := []*View{}
				for range 2 {
					v, err := p.NewView(f, 0)
					require.NoError(t, err)
					views = append(views, v)
				}
				advWalk(t, p, views, want, rng, advSteps(600), what)
				for _, v := range views {
					require.NoError(t, v.Close())
				}
			}
		}
	}
}

// v23BoundFS checks that no read of a .log reaches past the size of its
// segment that readers are told of (segment.size): a view renders only
// what sh.end covers, and its scanner's first read, sized by startAfter,
// or a walk's, sized by span, must stay below it too.
type v23BoundFS struct {
	vfs.FS
	p    *atomic.Pointer[Partition]
	past *atomic.Int64 // reads that reached past
	msg  *atomic.Value
}

type v23BoundFile struct {
	vfs.File
	fs   v23BoundFS
	name string
}

func (fs v23BoundFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	f, err := fs.FS.OpenFile(name, flag, perm)
	if err != nil || !strings.HasSuffix(name, ".log") {
		return f, err
	}
	return v23BoundFile{f, fs, name}, nil
}

func (f v23BoundFile) ReadAt(b []byte, off int64) (int, error) {
	if p := f.fs.p.Load(); p != nil {
		for _, s := range p.segments() {
			if s.logPath() == f.name {
				if size := s.size.Load(); off+int64(len(b)) > size {
					f.fs.past.Add(1)
					f.fs.msg.Store(fmt.Sprintf("a read of %d at %d of %s, published %d", len(b), off, f.name, size))
				}
			}
		}
	}
	return f.File.ReadAt(b, off)
}

// v23Piece is what a racing reader read: n bytes at at, kept whole while
// the reader has kept little (for a readable diff), else as a CRC: the
// reads of one run come to gigabytes, and under -race to several times
// that in memory.
type v23Piece struct {
	f    Format
	at   int64
	n    int
	got  []byte // nil when only sum is kept
	sum  uint32
	size int64 // the view's size before the read
}

// v23Keep makes the piece of b, read at at, counting what it keeps in
// *kept.
func v23Keep(kept *int, f Format, at int64, b []byte, size int64) v23Piece {
	pc := v23Piece{f: f, at: at, n: len(b), size: size}
	if *kept+len(b) <= 16<<20 {
		pc.got = bytes.Clone(b)
		*kept += len(b)
	} else {
		pc.sum = crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli))
	}
	return pc
}

// v23Check returns what is wrong with pc against want, the final
// rendering of its format, or "".
func v23Check(pc v23Piece, want []byte) string {
	if pc.at+int64(pc.n) > int64(len(want)) {
		return fmt.Sprintf("%v read of %d at %d (view size %d then): past the end %d", pc.f, pc.n, pc.at, pc.size, len(want))
	}
	exp := want[pc.at : pc.at+int64(pc.n)]
	if pc.got == nil {
		if crc32.Checksum(exp, crc32.MakeTable(crc32.Castagnoli)) != pc.sum {
			return fmt.Sprintf("%v read of %d at %d (view size %d then): its CRC differs", pc.f, pc.n, pc.at, pc.size)
		}
		return ""
	}
	if bytes.Equal(exp, pc.got) {
		return ""
	}
	k := 0
	for exp[k] == pc.got[k] {
		k++
	}
	return fmt.Sprintf("%v read of %d at %d (view size %d then): byte %d (at %d) differs:\ngot  %q\nwant %q", pc.f, pc.n, pc.at, pc.size, k, pc.at+int64(k), pc.got[max(k-60, 0):min(k+100, len(pc.got))], exp[max(k-60, 0):min(k+100, len(exp))])
}

// Views of both formats read at random and on, their first reads sized by
// startAfter and span, while big and small batches are appended to the
// active segment and it rolls, and marks are dropped by another goroutine
// at any time: no read of the log reaches past the published size, and
// every read is a piece of the final rendering. Run with -race.
func TestView23ReadsRacingAppendsStayInPublishedSize(t *testing.T) {
	var pp atomic.Pointer[Partition]
	var past atomic.Int64
	var msg atomic.Value
	dir := t.TempDir()
	l := openLog(t, dir, Options{FS: v23BoundFS{vfs.Default, &pp, &past, &msg}})
	top, _ := l.CreateTopic("t", 1, small("segment.bytes=1500000"))
	p, _ := top.Partition(0)
	rng := rand.New(rand.NewSource(advSeed(2327)))
	plan := make([][]Record, 50)
	skewed := v23Skewed(rng)
	for i := range plan {
		switch {
		case i%9 == 4:
			plan[i] = skewed[v23SkewedOrder[(i/9)%len(v23SkewedOrder)]]
		default:
			plan[i] = advValues(rng, i, rng.Intn(3) != 0)
		}
	}
	_, err := p.Append(plan[0])
	require.NoError(t, err)
	pp.Store(p)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // marks go at any time
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			for _, s := range p.segments() {
				s.views.dropInner()
			}
		}
	}()
	results := make(chan []v23Piece, 4)
	var reads atomic.Int64
	for g := 0; g < 4; g++ {
		f := Format(g % 2)
		go func(g int) {
			rng := rand.New(rand.NewSource(int64(100 + g)))
			var out []v23Piece
			kept, buf := 0, make([]byte, 1<<20)
			defer func() { results <- out }()
			vs := [2]*View{}
			for k := range vs {
				v, err := p.NewView(f, 0)
				if err != nil {
					t.Error(err)
					return
				}
				vs[k] = v
				defer v.Close()
			}
			at := int64(0)
			for k := 0; ; k++ {
				select {
				case <-done:
					if k%50 == 0 {
						return
					}
				default:
				}
				if k > 20000 {
					return
				}
				size, err := vs[k%2].Size()
				if err != nil {
					t.Error(err)
					return
				}
				if size == 0 {
					continue
				}
				if rng.Intn(3) == 0 || at >= size {
					at = rng.Int63n(size)
					if rng.Intn(3) == 0 {
						at = max(size-int64(rng.Intn(3000)), 0) // near the end: the active segment
					}
				}
				b := buf[:[]int{1, 100, 4096, 8192, 70000, 300000, 1 << 20}[rng.Intn(7)]]
				n, err := vs[k%2].ReadAt(b, at)
				if err != nil && err != io.EOF {
					t.Error(err)
					return
				}
				out = append(out, v23Keep(&kept, f, at, b[:n], size))
				at += int64(n)
				reads.Add(1)
			}
		}(g)
	}
	for _, recs := range plan[1:] {
		_, err := p.Append(recs)
		require.NoError(t, err)
		// Let the readers read a while at this size.
		for r, deadline := reads.Load(), time.Now().Add(2*time.Second); reads.Load() < r+30 && time.Now().Before(deadline); {
			time.Sleep(100 * time.Microsecond)
		}
	}
	close(done)
	wg.Wait()
	want := map[Format][]byte{Values: renderAll(t, p, Values, 0), JSONL: renderAll(t, p, JSONL, 0)}
	pieces := 0
	for g := 0; g < 4; g++ {
		for _, pc := range <-results {
			if bad := v23Check(pc, want[pc.f]); bad != "" {
				t.Fatal(bad)
			}
			pieces++
		}
	}
	pp.Store(nil)
	require.Greater(t, len(p.segments()), 2)
	t.Logf("%d reads checked", pieces)
	if n := past.Load(); n > 0 {
		t.Fatalf("%d reads of the log past its published size, e.g. %v", n, msg.Load())
	}
}

// ReadCommitted and ReadUncommitted views of a followed log, read at
// random and on while a broker appends big and small batches, committed
// and aborted transactions among plain records, rolling segments: the
// stable end stops short of the published size while a transaction is
// open, and reads elsewhere get a first read sized by startAfter over
// hidden batches. Every piece read is a piece of the final rendering.
//
// It found a wrong read, in ReadCommitted only, about one run in 60 here:
// a read that crossed the end the view had a moment before served, where
// the rest of a segment belongs whose shown part ended at a transaction
// open then and decided during the read, the next segment's first batch.
// View.ReadAt had gone on to segs[i+1] once it had rendered the shown
// part of segs[i]; it goes on only once segs[i] is whole (View.whole).
// One run here; a longer sweep:
//
//	go test ./storage/ -run 'View23Followed/read_committed' -count 100
func TestView23FollowedTxnsWhileReading(t *testing.T) {
	for _, iso := range []Isolation{ReadCommitted, ReadUncommitted} {
		t.Run(iso.String(), func(t *testing.T) {
			dir := t.TempDir()
			w := newTxnWriter(t, dir, broker.Options{SegmentBytes: 1 << 20})
			rng := rand.New(rand.NewSource(advSeed(2328)))
			vals := func(tag string, n, size int) []string { return v23Vals(rng, tag, n, size) }
			w.write(-1, false, "first")
			require.NoError(t, w.p.Checkpoint(w.p.End()))
			l := openLog(t, dir, Options{ReadOnly: true, Follow: true, Isolation: iso})
			p, err := l.Partition("tx", 0)
			require.NoError(t, err)
			done := make(chan struct{})
			results := make(chan []v23Piece, 4)
			var reads atomic.Int64
			for g := 0; g < 4; g++ {
				f := Format(g % 2)
				go func(g int) {
					rng := rand.New(rand.NewSource(int64(200 + g)))
					var out []v23Piece
					kept, buf := 0, make([]byte, 300000)
					defer func() { results <- out }()
					v, err := p.NewView(f, 0)
					if err != nil {
						t.Error(err)
						return
					}
					defer v.Close()
					at := int64(0)
					for k := 0; ; k++ {
						select {
						case <-done:
							return
						default:
						}
						size, err := v.Size()
						if err != nil {
							t.Error(err)
							return
						}
						if size == 0 {
							time.Sleep(time.Millisecond)
							continue
						}
						if rng.Intn(3) == 0 || at >= size {
							at = rng.Int63n(size)
						}
						b := buf[:[]int{1, 100, 4096, 8192, 70000, 300000}[rng.Intn(6)]]
						n, err := v.ReadAt(b, at)
						if err != nil && err != io.EOF {
							t.Error(err)
							return
						}
						out = append(out, v23Keep(&kept, f, at, b[:n], size))
						at += int64(n)
						reads.Add(1)
					}
				}(g)
			}
			open := map[int64]bool{}
			for i := 0; i < 120; i++ {
				pid := int64(rng.Intn(3))
				switch {
				case pid == 0 && rng.Intn(4) == 0:
					w.write(-1, false, vals(fmt.Sprint("plainbig", i), 150+rng.Intn(150), 900)...)
				case pid == 0:
					w.write(-1, false, vals(fmt.Sprint("plain", i), 1+rng.Intn(4), 300)...)
				case open[pid] && rng.Intn(3) == 0:
					w.marker(pid, rng.Intn(2) == 0)
					open[pid] = false
				case rng.Intn(5) == 0:
					w.write(pid, true, vals(fmt.Sprint("txnbig", pid, "-", i), 150+rng.Intn(150), 900)...)
					open[pid] = true
				default:
					w.write(pid, true, vals(fmt.Sprint("txn", pid, "-", i), 1+rng.Intn(4), 300)...)
					open[pid] = true
				}
				if i%3 == 0 {
					require.NoError(t, w.p.Checkpoint(w.p.End()))
					for r, deadline := reads.Load(), time.Now().Add(2*time.Second); reads.Load() < r+20 && time.Now().Before(deadline); {
						time.Sleep(200 * time.Microsecond)
					}
				}
			}
			for pid := int64(1); pid <= 2; pid++ {
				if open[pid] {
					w.marker(pid, pid == 1)
				}
			}
			w.write(-1, false, "last")
			require.NoError(t, w.p.Checkpoint(w.p.End()))
			eventually(t, "the follower", func() bool { return p.LatestOffset() == w.p.End() && p.HighWatermark() == w.p.End() })
			close(done)
			want := map[Format][]byte{Values: w.expected(t, p, Values, iso, 0), JSONL: w.expected(t, p, JSONL, iso, 0)}
			pieces := 0
			var bad []string
			for g := 0; g < 4; g++ {
				for _, pc := range <-results {
					if msg := v23Check(pc, want[pc.f]); msg != "" {
						bad = append(bad, msg)
					}
					pieces++
				}
			}
			require.Greater(t, len(p.segments()), 2)
			t.Logf("%d reads checked", pieces)
			// Then views read now, with what the earlier ones left behind
			// (fates of transactions decided, marks).
			for _, f := range []Format{Values, JSONL} {
				v, err := p.NewView(f, 0)
				require.NoError(t, err)
				got, err := readView(t, v, 50000)
				require.NoError(t, err)
				if !bytes.Equal(want[f], got) {
					k := 0
					for k < min(len(got), len(want[f])) && want[f][k] == got[k] {
						k++
					}
					bad = append(bad, fmt.Sprintf("%v: a view read after the appends: %d bytes, want %d: byte %d differs:\ngot  %q\nwant %q", f, len(got), len(want[f]), k, got[max(k-60, 0):min(k+100, len(got))], want[f][max(k-60, 0):min(k+100, len(want[f]))]))
				}
				require.NoError(t, v.Close())
			}
			if len(bad) > 0 {
				t.Fatalf("%d bad reads:\n%s", len(bad), strings.Join(bad[:min(len(bad), 6)], "\n"))
			}
			require.NoError(t, w.p.Close())
		})
	}
}

var _ = errors.Is

// readFromMarksToBadBatch reads, on a new view of p in format f, from each
// mark of ib to its end, which must render as want does there, and then
// past it, where a bad batch follows: that read must fail with nothing.
func readFromMarksToBadBatch(t *testing.T, p *Partition, f Format, ib *innerBatch, want []byte, what string) {
	t.Helper()
	for _, m := range ib.marks {
		v, err := p.NewView(f, 0)
		require.NoError(t, err)
		b := make([]byte, ib.to-m.at)
		n, err := v.ReadAt(b, m.at)
		require.NoError(t, err, what)
		require.Equal(t, string(want[m.at:]), string(b[:n]), "%s: from mark at %d", what, m.at)
		n, err = v.ReadAt(make([]byte, 10), ib.to)
		require.True(t, badData(err), "%s: after mark at %d: %d bytes, %v", what, m.at, n, err)
		require.Zero(t, n)
		require.NoError(t, v.Close())
	}
}

// recordStarts returns where each record of the good batch b begins in its
// records bytes.
func recordStarts(t *testing.T, b *record.Batch) []int {
	t.Helper()
	var offs []int
	it := record.RecordsIn(&b.BatchHeader, b.Pos, b.Bytes[record.HeaderSize:], 0)
	for {
		offs = append(offs, it.Off())
		if !it.Next() {
			break
		}
	}
	require.NoError(t, it.Err())
	return offs[:len(offs)-1]
}
