package storage

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/internal/broker"
	"github.com/logfs/logfs/record"
)

// Adversarial tests of a view marking a big batch that renders only what
// its read takes of it (5b1beca): a read that starts inside a batch
// without marks renders the record holding its first byte into the chunk
// and the rest straight from the batch still in memory (the cut's mem);
// a read that ends inside a batch it marks leaves the rest unrendered,
// the chunk ending at the record that did not fit.

// v25Recs returns records of values about size bytes long (half to one
// and a half times), now and then empty, null or longer than a window,
// about total bytes of them.
func v25Recs(rng *rand.Rand, tag string, size, total int) []Record {
	var recs []Record
	for n, i := 0, 0; n < total; i++ {
		var v []byte
		switch rng.Intn(200) {
		case 0:
			v = nil
		case 1:
			v = []byte{}
		case 2:
			v = bytes.Repeat(append([]byte(tag), '-')[:1], innerWindow+rng.Intn(innerWindow/2))
		default:
			v = []byte(fmt.Sprintf("%s-%06d-%s", tag, i, strings.Repeat(string(rune('a'+rng.Intn(26))), size/2+rng.Intn(size))))
		}
		recs = append(recs, Record{Value: v})
		n += len(v) + 20
	}
	return recs
}

// v25ChunkMax is the most a Values view's chunk may hold after a read
// while big batches get marks: the record that did not fit (the longest
// here is under two windows), or the rest of a small batch.
const v25ChunkMax = innerMin + 2*innerWindow

// v25Mem is the batch in memory v's cut holds (v.mu held).
func v25Mem(v *View) []byte { return v.cut.mem }

// v25Check checks what a Values or JSONL view holds after a ReadAt: never
// the batch in memory (the scanner's buffer), a cut consistent with the
// chunk's end, and, when chunkMax is set, no more than it in the chunk.
func v25Check(t testing.TB, v *View, chunkMax int, what string) {
	t.Helper()
	v.mu.Lock()
	defer v.mu.Unlock()
	if mem := v25Mem(v); mem != nil {
		t.Fatalf("%s: the batch in memory (%d bytes) kept past the read", what, len(mem))
	}
	if c := v.cut; c.ib != nil && v.chunkSeg >= 0 {
		if c.index <= 0 || c.index >= c.ib.h.RecordCount {
			t.Fatalf("%s: cut at record %d of %d", what, c.index, c.ib.h.RecordCount)
		}
		if v.chunkEnd != c.ib.end() || v.chunkEnded != c.ib.h.NextOffset() {
			t.Fatalf("%s: the chunk ends at %d (%d), its cut's batch at %d (%d)", what, v.chunkEnd, v.chunkEnded, c.ib.end(), c.ib.h.NextOffset())
		}
	}
	if chunkMax > 0 && v.format == Values && len(v.chunk) > chunkMax {
		t.Fatalf("%s: %d bytes in the chunk", what, len(v.chunk))
	}
}

// v25Read reads size bytes at at from v, checks them against want and
// what v holds after the read, and returns where the read ended.
func v25Read(t testing.TB, v *View, want []byte, at int64, size int, chunkMax int, what string) int64 {
	t.Helper()
	b := make([]byte, size)
	n, err := v.ReadAt(b, at)
	if err != nil && !errors.Is(err, io.EOF) {
		t.Fatalf("%s: read %d at %d: %v", what, size, at, err)
	}
	end := min(at+int64(size), int64(len(want)))
	if at > int64(len(want)) {
		end = at
	}
	if int64(n) != end-at {
		t.Fatalf("%s: read %d at %d: %d bytes, want %d (err %v)", what, size, at, n, end-at, err)
	}
	if err != nil && end-at == int64(size) {
		t.Fatalf("%s: read %d at %d: a full read with %v", what, size, at, err)
	}
	v24RequireBytes(t, what, size, at, want[at:end], b[:n])
	v25Check(t, v, chunkMax, what)
	return at + int64(n)
}

// v25Partition makes a log of big batches of every kind (1 MiB of 100 B
// and of 1 KiB records, odd ones of v24Big, 300 KiB ones), small batches
// between some, in segments of segBytes that roll after a big batch; the
// last batch of the log is big.
func v25Partition(t *testing.T, rng *rand.Rand, segBytes int) *Partition {
	l := openLog(t, t.TempDir(), Options{})
	top, err := l.CreateTopic("t", 1, small(fmt.Sprint("segment.bytes=", segBytes)))
	require.NoError(t, err)
	p, _ := top.Partition(0)
	for _, recs := range [][]Record{
		v24Records([]string{"first"}),
		v25Recs(rng, "a", 100, 950<<10),
		v24Records(v24Big(rng, "b", 400)),
		v24Records([]string{"small-1", ""}),
		v25Recs(rng, "c", 1000, 950<<10),
		v24Records(v24Big(rng, "d", 500)),
		v25Recs(rng, "e", 100, 950<<10),
		v25Recs(rng, "f", 300, 300<<10),
		v24Records([]string{"small-2"}),
		v25Recs(rng, "g", 60, 700<<10),
	} {
		_, err := p.Append(recs)
		require.NoError(t, err)
	}
	segs := p.segments()
	require.Greater(t, len(segs), 1)
	bigLast := false // a segment that ends with a big batch, another after it
	for _, s := range segs[:len(segs)-1] {
		bs := batchesOf(t, s, false)
		bigLast = bigLast || markable(&bs[len(bs)-1])
	}
	require.True(t, bigLast, "a big batch last in its segment")
	return p
}

// v25Starts returns places inside span sp of want to start reads at: its
// first bytes, a record's start and middle, the last record's start and
// middle, a byte before the end and the last byte.
func v25Starts(rng *rand.Rand, want []byte, sp v24Span) []int64 {
	s, e := sp.start, sp.end
	second := s + int64(bytes.IndexByte(want[s:e], '\n')) + 1
	last := int64(bytes.LastIndexByte(want[s:e-1], '\n')) + 1 + s
	mid := s + (e-s)/2
	midStart := int64(bytes.IndexByte(want[mid:e], '\n')) + 1 + mid // a record's start
	starts := []int64{s, s + 1, second, mid, midStart, s + rng.Int63n(e-s), last, last + (e-last)/2, e - 2, e - 1}
	out := starts[:0]
	for _, at := range starts {
		if at >= s && at < e {
			out = append(out, at)
		}
	}
	return out
}

// v25Sizes returns read sizes for a read at at in span sp of want: one
// byte, what fills the read with the rest of the record holding at, a
// byte more, a page, the rest of the batch and a byte either side, and
// large ones.
func v25Sizes(rng *rand.Rand, want []byte, sp v24Span, at int64) []int {
	recEnd := at + int64(bytes.IndexByte(want[at:], '\n')) + 1
	sizes := []int{1, int(recEnd - at), int(recEnd-at) + 1, 4096, 128<<10 + 1, int(sp.end-at) - 1, int(sp.end - at), int(sp.end-at) + 1, 1 << 20, 1 + rng.Intn(400000)}
	out := sizes[:0]
	for _, n := range sizes {
		if n > 0 {
			out = append(out, n)
		}
	}
	return out
}

// A first read that starts anywhere inside a big batch without marks, of
// any size, on a fresh view: it serves the rendering, leaves neither the
// batch's bytes nor more than a record in the view, and the view reads
// on right: sequentially (the cut), inside the batch elsewhere (its new
// marks), and across the next batch, the segment's end and the roll.
func TestView25FreshBatchFirstRead(t *testing.T) {
	rng := rand.New(rand.NewSource(advSeed(2501)))
	p := v25Partition(t, rng, 2400000)
	want, spans := v24Spans(t, p, func(record.Offset) bool { return true })
	if !raceEnabled {
		require.Equal(t, string(renderAll(t, p, Values, 0)), string(want))
	}
	cases := 0
	for si, sp := range spans {
		if !sp.big {
			continue
		}
		for pi, at := range v25Starts(rng, want, sp) {
			for zi, size := range v25Sizes(rng, want, sp, at) {
				if raceEnabled && (pi+zi+si)%12 != 0 {
					continue
				}
				cases++
				what := fmt.Sprintf("batch %d [%d,%d) read %d at %d", si, sp.start, sp.end, size, at)
				v24DropMarks(p)
				v, err := p.NewView(Values, 0)
				require.NoError(t, err)
				end := v25Read(t, v, want, at, size, v25ChunkMax, what)
				// On: sequentially, a piece of each kind.
				for k, n := range []int{1 + rng.Intn(3), 100, 4096, 70000 + rng.Intn(100000), 1 << 20} {
					if end >= int64(len(want)) {
						break
					}
					if k == 0 && rng.Intn(2) == 0 {
						continue
					}
					end = v25Read(t, v, want, end, n, v25ChunkMax, what+": on")
				}
				// Elsewhere in the batch, then on from there.
				at2 := sp.start + rng.Int63n(sp.end-sp.start)
				at2 = v25Read(t, v, want, at2, 1+rng.Intn(200000), v25ChunkMax, what+": elsewhere in it")
				if at2 < int64(len(want)) {
					v25Read(t, v, want, at2, 1+rng.Intn(300000), v25ChunkMax, what+": on from elsewhere")
				}
				require.NoError(t, v.Close())
			}
		}
	}
	t.Logf("%d cases", cases)
	require.Greater(t, cases, 20)
}

// A read that ends exactly at the end of the record holding its first
// byte, inside a batch without marks: the cut (with the batch in memory,
// while the read lasted) outlives the read, without the batch's bytes; a
// read that carries on gets the rest from the log, and one elsewhere,
// then back, too.
func TestView25FreshBatchExactFill(t *testing.T) {
	rng := rand.New(rand.NewSource(advSeed(2502)))
	p := v25Partition(t, rng, 2400000)
	want, spans := v24Spans(t, p, func(record.Offset) bool { return true })
	cuts := 0
	for si, sp := range spans {
		if !sp.big {
			continue
		}
		for pi, at := range v25Starts(rng, want, sp) {
			if raceEnabled && (si+pi)%3 != 0 {
				continue
			}
			recEnd := at + int64(bytes.IndexByte(want[at:], '\n')) + 1
			what := fmt.Sprintf("batch %d [%d,%d) at %d to %d", si, sp.start, sp.end, at, recEnd)
			v24DropMarks(p)
			v, err := p.NewView(Values, 0)
			require.NoError(t, err)
			end := v25Read(t, v, want, at, int(recEnd-at), v25ChunkMax, what)
			require.Equal(t, recEnd, end, what)
			v.mu.Lock()
			cut := v.cut.ib != nil
			v.mu.Unlock()
			if recEnd < sp.end {
				require.True(t, cut, "%s: the chunk ends inside the batch", what)
				cuts++
			}
			switch rng.Intn(3) {
			case 0: // a read elsewhere (a batch before, with no marks) and back
				v24DropMarks(p)
				o := spans[max(si-1, 0)]
				v25Read(t, v, want, o.start+rng.Int63n(o.end-o.start), 1+rng.Intn(5000), v25ChunkMax, what+": elsewhere")
			case 1: // a byte of the record just read, from the chunk
				v25Read(t, v, want, recEnd-1, 1, v25ChunkMax, what+": its last byte again")
			}
			for k := 0; k < 3 && end < int64(len(want)); k++ {
				end = v25Read(t, v, want, end, []int{1, int(recEnd - at), 4096, 1 << 20}[rng.Intn(4)], v25ChunkMax, what+": on")
			}
			require.NoError(t, v.Close())
		}
	}
	require.Greater(t, cuts, 5)
}

// Sequential reads of every size, on one view and on views in turn (the
// second request of a pair first, as two requests in flight are), marks
// dropped before each pass: every read ending inside a batch it marks
// leaves the rest unrendered; with the marks' budget or innerMax so small
// that no marks, or few, are kept, the view carries on from the cut all
// the same.
func TestView25SequentialSizes(t *testing.T) {
	for _, c := range []struct {
		name   string
		budget int64 // 0: as it is; -1: nothing kept
		max    int
	}{{"marks kept", 0, 0}, {"budget spent", -1, 0}, {"innerMax=1", 0, 1}} {
		t.Run(c.name, func(t *testing.T) {
			defer func(b int64, m int) { innerBudget, innerMax = b, m }(innerBudget, innerMax)
			rng := rand.New(rand.NewSource(advSeed(2503)))
			p := v25Partition(t, rng, 2400000)
			want := renderAll(t, p, Values, 0)
			chunkMax := v25ChunkMax
			switch {
			case c.budget < 0:
				innerBudget = 0
				chunkMax = 0 // reads inside a batch render it whole, as before
			case c.max > 0:
				innerMax = c.max
			}
			sizes := []int{997, 4096, 65536, 131071, 131073, 300001, 1 << 20, 3 << 20, -1}
			for zi, size := range sizes {
				if raceEnabled && zi != 3 && zi != 6 && zi != 8 {
					continue // a 128 KiB read, a 1 MiB one and random ones
				}
				what := fmt.Sprintf("%s size %d", c.name, size)
				pick := func() int {
					if size > 0 {
						return size
					}
					return 1 + rng.Intn(600000)
				}
				// One view.
				v24DropMarks(p)
				v, err := p.NewView(Values, 0)
				require.NoError(t, err)
				cuts := 0
				for at := int64(0); at < int64(len(want)); {
					at = v25Read(t, v, want, at, pick(), chunkMax, what+": one view")
					v.mu.Lock()
					if v.cut.ib != nil {
						cuts++
					}
					v.mu.Unlock()
				}
				v25Read(t, v, want, int64(len(want)), 10, chunkMax, what+": at the end")
				require.NoError(t, v.Close())
				if size > 0 && size < 1<<20 {
					require.Positive(t, cuts, "%s: reads that end inside a batch", what)
				}
				if c.budget < 0 {
					for _, s := range p.segments() {
						vi := s.views.get(s, Values)
						vi.mu.Lock()
						require.Empty(t, vi.inner, what)
						vi.mu.Unlock()
					}
				}
				// Two views in turn.
				v24DropMarks(p)
				var vs [2]*View
				for k := range vs {
					vs[k], err = p.NewView(Values, 0)
					require.NoError(t, err)
				}
				req := pick()
				for off := int64(0); off < int64(len(want)); off += 2 * int64(req) {
					if off+int64(req) < int64(len(want)) {
						v25Read(t, vs[1], want, off+int64(req), req, chunkMax, what+": second of a pair")
					}
					v25Read(t, vs[0], want, off, req, chunkMax, what+": first of a pair")
					if rng.Intn(2) == 0 {
						vs[0], vs[1] = vs[1], vs[0]
					}
				}
				for _, v := range vs {
					require.NoError(t, v.Close())
				}
			}
		})
	}
}

// JSONL views are as they were: reads anywhere in big batches without
// marks, of any size, and sequential ones, serve the rendering.
func TestView25JSONL(t *testing.T) {
	rng := rand.New(rand.NewSource(advSeed(2504)))
	p := v25Partition(t, rng, 2400000)
	want := renderAll(t, p, JSONL, 0)
	nl := []int64{}
	for i, c := range want {
		if c == '\n' {
			nl = append(nl, int64(i))
		}
	}
	cases := 60
	if raceEnabled {
		cases = 9
	}
	for k := 0; k < cases; k++ {
		v24DropMarks(p)
		v, err := p.NewView(JSONL, 0)
		require.NoError(t, err)
		at := rng.Int63n(int64(len(want)))
		switch k % 3 {
		case 0:
			at = nl[rng.Intn(len(nl))] + 1
		case 1:
			at = nl[rng.Intn(len(nl))]
		}
		at = min(at, int64(len(want))-1)
		what := fmt.Sprintf("JSONL case %d at %d", k, at)
		for j := 0; j < 4 && at < int64(len(want)); j++ {
			at = v25Read(t, v, want, at, []int{1, 4096, 131073, 1 << 20, 1 + rng.Intn(400000)}[rng.Intn(5)], 0, what)
		}
		require.NoError(t, v.Close())
	}
	v24DropMarks(p)
	v, err := p.NewView(JSONL, 0)
	require.NoError(t, err)
	for at := int64(0); at < int64(len(want)); {
		at = v25Read(t, v, want, at, 1+rng.Intn(300000), 0, "JSONL sequential")
	}
	require.NoError(t, v.Close())
}

// Big batches in transactions, committed, aborted and open, next to plain
// ones, with control batches between, in both isolation levels: reads
// starting anywhere in a shown big batch without marks, of any size
// (hidden batches before or inside their range), and sequential reads
// ending inside them, on one view and on views in turn.
func TestView25Txn(t *testing.T) {
	dir := t.TempDir()
	w := newTxnWriter(t, dir, broker.Options{SegmentBytes: 3 << 20})
	rng := rand.New(rand.NewSource(advSeed(2505)))
	vals := func(tag string, size, total int) []string {
		var out []string
		for _, r := range v25Recs(rng, tag, size, total) {
			out = append(out, string(r.Value))
		}
		return out
	}
	big := func(tag string) []string { return v24Big(rng, tag, 200+rng.Intn(300)) }
	w.write(-1, false, "first")
	w.write(1, true, vals("t1a", 100, 600<<10)...) // aborted, before a plain big batch
	w.write(-1, false, vals("p1", 100, 900<<10)...)
	w.write(2, true, vals("t2a", 200, 500<<10)...) // committed
	w.marker(1, true)
	w.write(-1, false, big("p2")...) // after a control batch
	w.write(1, true, big("t1b")...)  // aborted, inside a committed txn's range
	w.write(2, true, vals("t2b", 100, 800<<10)...)
	w.marker(2, false)
	w.marker(1, true)
	w.write(-1, false, vals("p3", 300, 900<<10)...)
	w.write(-1, false, "small")
	w.write(1, true, vals("t1c", 100, 400<<10)...) // committed
	w.marker(1, false)
	w.write(2, true, big("t2c")...) // aborted
	w.marker(2, true)
	w.write(-1, false, vals("p4", 100, 700<<10)...)
	w.write(3, true, vals("t3", 100, 300<<10)...) // open: the LSO
	w.write(-1, false, big("p5")...)
	require.NoError(t, w.p.Close())
	for _, iso := range []Isolation{ReadCommitted, ReadUncommitted} {
		t.Run(iso.String(), func(t *testing.T) {
			l, p, want, spans := v24OpenTxn(t, w, dir, iso)
			if !raceEnabled {
				require.Equal(t, string(w.expected(t, p, Values, iso, 0)), string(want))
			}
			// A ReadCommitted view renders a transactional batch whole
			// into the chunk when it hides batches (no marks for it).
			chunkMax := v25ChunkMax
			if iso == ReadCommitted {
				chunkMax = 0
			}
			cases := 0
			for si, sp := range spans {
				if !sp.big {
					continue
				}
				for pi, at := range v25Starts(rng, want, sp) {
					for zi, size := range v25Sizes(rng, want, sp, at) {
						if (pi+zi+si)%2 != 0 || raceEnabled && (pi+zi+si)%24 != 0 {
							continue
						}
						cases++
						what := fmt.Sprintf("%v batch %d [%d,%d) read %d at %d", iso, si, sp.start, sp.end, size, at)
						v24DropMarks(p)
						v, err := p.NewView(Values, 0)
						require.NoError(t, err)
						end := v25Read(t, v, want, at, size, chunkMax, what)
						for k := 0; k < 2 && end < int64(len(want)); k++ {
							end = v25Read(t, v, want, end, []int{100, 4096, 200000, 1 << 20}[rng.Intn(4)], chunkMax, what+": on")
						}
						require.NoError(t, v.Close())
					}
				}
			}
			require.Greater(t, cases, 3)
			for _, req := range []int{4096, 131073, 1 << 20, 1 + rng.Intn(500000)} {
				if raceEnabled && req != 131073 {
					continue
				}
				what := fmt.Sprintf("%v sequential %d", iso, req)
				v24DropMarks(p)
				var vs [2]*View
				for k := range vs {
					v, err := p.NewView(Values, 0)
					require.NoError(t, err)
					vs[k] = v
				}
				for off := int64(0); off < int64(len(want)); off += 2 * int64(req) {
					if off+int64(req) < int64(len(want)) {
						v25Read(t, vs[1], want, off+int64(req), req, chunkMax, what+": second of a pair")
					}
					v25Read(t, vs[0], want, off, req, chunkMax, what+": first of a pair")
				}
				for _, v := range vs {
					require.NoError(t, v.Close())
				}
			}
			require.NoError(t, l.Close())
		})
	}
}

// v25Trace writes a line to the file LOGFS_V25_TRACE names, if any: the
// reads of TestView25BadBatchAfterFresh with what they returned, to
// compare this code's errors with another's.
func v25Trace(format string, args ...any) {
	name := os.Getenv("LOGFS_V25_TRACE")
	if name == "" {
		return
	}
	f, err := os.OpenFile(name, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, format+"\n", args...)
}

// A bad batch right after a big batch without marks: a read that starts
// inside the fresh batch, or one that ends inside it and the read after,
// serves the fresh batch's rendering and nothing of the bad one, and the
// read that reaches the bad bytes fails with their error; the size stops
// there.
func TestView25BadBatchAfterFresh(t *testing.T) {
	for _, kind := range []string{"flipped byte", "count-1", "count+1", "length-1000", "truncated"} {
		t.Run(kind, func(t *testing.T) {
			dir, prefix := advDamaged(t, kind)
			rng := rand.New(rand.NewSource(advSeed(2506)))
			for _, iso := range []Isolation{ReadUncommitted, ReadCommitted} {
				want := prefix[Values]
				xs, xe := int64(len("first\n")), int64(len(want))
				sp := v24Span{start: xs, end: xe, big: true}
				l, err := Open(dir, Options{ReadOnly: true, Isolation: iso, Logger: testLogger(t), RetentionCheckInterval: -1})
				require.NoError(t, err)
				p, err := l.Partition("t", 0)
				require.NoError(t, err)
				read := func(v *View, at int64, size int, what string) (int, error) {
					b := make([]byte, size)
					n, err := v.ReadAt(b, at)
					v25Trace("%s %v: read %d at %d: %d %v", kind, iso, size, at, n, err)
					end := min(at+int64(size), xe)
					require.LessOrEqual(t, at+int64(n), xe, what)
					require.True(t, bytes.Equal(want[at:at+int64(n)], b[:n]), "%s: read %d at %d", what, size, at)
					switch {
					case at+int64(size) <= xe:
						require.NoError(t, err, what)
						require.Equal(t, size, n, what)
					case at < xe:
						require.Equal(t, int(end-at), n, what)
						if err != nil {
							require.True(t, advBadData(kind, err), "%s: %v", what, err)
						}
					default:
						require.Zero(t, n, what)
						require.True(t, advBadData(kind, err), "%s: %v", what, err)
					}
					v25Check(t, v, v25ChunkMax, what)
					return n, err
				}
				// to the bad bytes: the read that reaches them fails
				toBad := func(v *View, at int64, what string) {
					for k := 0; ; k++ {
						require.Less(t, k, 100, what)
						n, err := read(v, at, []int{1, 4096, 1 << 20}[rng.Intn(3)], what+": to the bad bytes")
						at += int64(n)
						if err != nil {
							break
						}
					}
					require.Equal(t, xe, at, what)
					_, err := read(v, xe, 10, what+": at the bad bytes")
					require.Error(t, err)
				}
				for pi, at := range v25Starts(rng, want, sp) {
					for zi, size := range v25Sizes(rng, want, sp, at) {
						if (pi+zi)%3 != 0 || raceEnabled && (pi+zi)%9 != 0 {
							continue
						}
						what := fmt.Sprintf("%s %v read %d at %d", kind, iso, size, at)
						v24DropMarks(p)
						v, err := p.NewView(Values, 0)
						require.NoError(t, err)
						n, err := read(v, at, size, what)
						if err == nil {
							toBad(v, at+int64(n), what)
						}
						sz, err := v.Size()
						require.NoError(t, err)
						require.Equal(t, xe, sz, what)
						require.NoError(t, v.Close())
					}
				}
				// Sequential reads that end inside the fresh batch.
				for _, size := range []int{3000, 4096, 65536, 131073} {
					what := fmt.Sprintf("%s %v sequential %d", kind, iso, size)
					v24DropMarks(p)
					v, err := p.NewView(Values, 0)
					require.NoError(t, err)
					at := int64(0)
					for {
						n, err := read(v, at, size, what)
						at += int64(n)
						if err != nil || n < size {
							break
						}
					}
					if at < xe || at == xe && rng.Intn(2) == 0 {
						toBad(v, at, what)
					} else {
						_, err := read(v, at, size, what+": again")
						require.Error(t, err)
					}
					require.NoError(t, v.Close())
				}
				require.NoError(t, l.Close())
			}
		})
	}
}

// Views marking the same batches at once, each from its own goroutine:
// first reads inside the same fresh big batch, and sequential reads in
// odd sizes, in turn on shared views (run with -race).
func TestView25Concurrent(t *testing.T) {
	rng := rand.New(rand.NewSource(advSeed(2507)))
	p := v25Partition(t, rng, 2400000)
	want, spans := v24Spans(t, p, func(record.Offset) bool { return true })
	var bigs []v24Span
	for _, sp := range spans {
		if sp.big {
			bigs = append(bigs, sp)
		}
	}
	rounds := 24
	if raceEnabled {
		rounds = 8
	}
	for round := 0; round < rounds; round++ {
		v24DropMarks(p)
		sp := bigs[round%len(bigs)]
		const g = 4
		var wg sync.WaitGroup
		errs := make(chan error, g)
		seeds := make([]int64, g)
		for k := range seeds {
			seeds[k] = rng.Int63()
		}
		for k := 0; k < g; k++ {
			wg.Add(1)
			go func(seed int64) {
				defer wg.Done()
				rng := rand.New(rand.NewSource(seed))
				v, err := p.NewView(Values, 0)
				if err != nil {
					errs <- err
					return
				}
				defer v.Close()
				at := sp.start + rng.Int63n(sp.end-sp.start)
				for j := 0; j < 4 && at < int64(len(want)); j++ {
					size := []int{1, 4096, 131073, 1 << 20, 1 + rng.Intn(300000)}[rng.Intn(5)]
					end, err := v24ReadRight(v, want, at, size)
					if err != nil {
						errs <- fmt.Errorf("round %d: %w", round, err)
						return
					}
					v.mu.Lock()
					mem := v25Mem(v)
					v.mu.Unlock()
					if mem != nil {
						errs <- fmt.Errorf("round %d: read %d at %d: the batch in memory kept", round, size, at)
						return
					}
					at = end
				}
			}(seeds[k])
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
	}
	// Sequential reads on shared views from goroutines, requests in
	// flight together, each on the view that ended where it starts.
	for round := 0; round < rounds/4; round++ {
		v24DropMarks(p)
		req := []int{65536, 131073, 1 << 20, 1 + rng.Intn(300000)}[round%4]
		inFlight := 3
		views := make([]*View, inFlight)
		ends := make([]int64, inFlight)
		for k := range views {
			var err error
			views[k], err = p.NewView(Values, 0)
			require.NoError(t, err)
			ends[k] = -1
		}
		for off := int64(0); off < int64(len(want)); off += int64(inFlight * req) {
			perm := v24Assign(rng, ends, off, req)
			var wg sync.WaitGroup
			errs := make(chan error, inFlight)
			for k := 0; k < inFlight; k++ {
				at := off + int64(k*req)
				if at >= int64(len(want)) {
					continue
				}
				wg.Add(1)
				go func(k int, at int64) {
					defer wg.Done()
					v := views[perm[k]]
					end, err := v24ReadRight(v, want, at, req)
					if err != nil {
						errs <- fmt.Errorf("round %d: %w", round, err)
						return
					}
					ends[perm[k]] = end
				}(k, at)
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}
		}
		for _, v := range views {
			v25Check(t, v, v25ChunkMax, "after the round")
			require.NoError(t, v.Close())
		}
	}
}

// Retention deletes segments while view A holds a cut inside a big batch
// it marked (a read that ended inside it, or one that started inside it
// and ended at its record's end): A reads on right, to the end or to
// ErrDeleted.
func TestView25CutThenRetention(t *testing.T) {
	rng := rand.New(rand.NewSource(advSeed(2508)))
	for round := 0; round < 4; round++ {
		l, p, want, spans := v24Condemned(t, 8, func(i int) []Record {
			return v25Recs(rng, fmt.Sprint("r", round, "b", i), 100+rng.Intn(300), 200<<10+rng.Intn(300<<10))
		})
		sp := spans[1+rng.Intn(len(spans)-2)]
		require.True(t, sp.big)
		a, err := p.NewView(Values, 0)
		require.NoError(t, err)
		var at int64
		what := fmt.Sprintf("round %d batch [%d,%d)", round, sp.start, sp.end)
		if round%2 == 0 {
			// Sequentially, to a read that ends inside the batch.
			for at < sp.start {
				at = v25Read(t, a, want, at, int(min(sp.start-at, int64(1+rng.Intn(200000)))), v25ChunkMax, what+": A up to it")
			}
			at = v25Read(t, a, want, at, int(1+rng.Int63n(sp.end-sp.start-1)), v25ChunkMax, what+": A into it")
		} else {
			// A first read inside it, to its record's end.
			at = sp.start + rng.Int63n(sp.end-sp.start)
			at = v25Read(t, a, want, at, bytes.IndexByte(want[at:], '\n')+1, v25ChunkMax, what+": A inside it")
		}
		_, err = l.EnforceRetention()
		require.NoError(t, err)
		at = v24ReadToEnd(t, a, want, at, rng, what, func() { v25Check(t, a, v25ChunkMax, what) })
		require.GreaterOrEqual(t, at, sp.end, "%s: A read on through the batch", what)
		require.NoError(t, a.Close())
	}
}

// The last batch of the log, big and without marks, read with a cut
// inside it both ways, then the log grows (a big batch, a small one, a
// roll): the view reads on through what came.
func TestView25LastBatchThenGrows(t *testing.T) {
	rng := rand.New(rand.NewSource(advSeed(2509)))
	for round := 0; round < 6; round++ {
		l := openLog(t, t.TempDir(), Options{})
		top, err := l.CreateTopic("t", 1, small("segment.bytes=1500000"))
		require.NoError(t, err)
		p, _ := top.Partition(0)
		_, err = p.Append(v24Records([]string{"first"}))
		require.NoError(t, err)
		_, err = p.Append(v25Recs(rng, "x", 100, 500<<10))
		require.NoError(t, err)
		want := renderAll(t, p, Values, 0)
		xs := int64(len("first\n"))
		v, err := p.NewView(Values, 0)
		require.NoError(t, err)
		var at int64
		what := fmt.Sprint("round ", round)
		if round%2 == 0 {
			at = v25Read(t, v, want, 0, int(xs)+1+rng.Intn(300000), v25ChunkMax, what+": into it")
		} else {
			at = xs + rng.Int63n(int64(len(want))-xs)
			at = v25Read(t, v, want, at, bytes.IndexByte(want[at:], '\n')+1, v25ChunkMax, what+": inside it")
		}
		for k := 0; k < 3; k++ {
			_, err = p.Append(v25Recs(rng, fmt.Sprint("y", k), 100, 400<<10))
			require.NoError(t, err)
			_, err = p.Append(v24Records([]string{fmt.Sprint("small", k)}))
			require.NoError(t, err)
		}
		want = renderAll(t, p, Values, 0)
		require.Greater(t, len(p.segments()), 1)
		for at < int64(len(want)) {
			at = v25Read(t, v, want, at, 1+rng.Intn(300000), v25ChunkMax, what+": on")
		}
		v25Read(t, v, want, at, 10, v25ChunkMax, what+": at the end")
		require.NoError(t, v.Close())
	}
}
