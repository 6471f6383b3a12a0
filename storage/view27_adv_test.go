package storage

import (
	"fmt"
	"math/rand"
	"os"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/record"
)

// Adversarial tests of the Values rendering through
// record.RecordIter.AppendValues and SkipValues (cc8338b): renderValues
// rendering and marking a fresh batch, markBatch, and renderMarkInto
// reading from marks through walk's fast hook. The rendering is checked
// against one made from the records appended (each value and '\n'), and
// every batch's marks against those a plain marker.note loop over Next
// makes for it.

// v27Shapes are the kinds of batch v27Batch makes.
var v27Shapes = []string{
	"one", "one-empty", "one-null", "100B", "1K", "mixed", "step1024", "step4096",
	"headers", "keys", "alternate", "tiny", "70K", "edge8K", "bigts", "smallmix", "smallmix", "period16K",
}

// v27Batch returns the records of a batch of the given shape: records of
// the common shape (decodeCommon's) or not (keys of 3-byte lengths,
// headers, values over 8 KiB, large timestamp deltas), mixed or alone;
// values that render as exactly 1 KiB or 4 KiB, so that records end
// right at each mark's place; empty and null values.
func v27Batch(rng *rand.Rand, shape, tag string) []Record {
	val := func(n int) []byte {
		b := []byte(fmt.Sprintf("%s-%d-", tag, rng.Intn(1000)))
		for len(b) < n {
			b = append(b, byte('a'+rng.Intn(26)))
		}
		return b[:n]
	}
	var recs []Record
	add := func(n int, mk func(i int) Record) {
		for i := 0; i < n; i++ {
			recs = append(recs, mk(i))
		}
	}
	switch shape {
	case "smallmix": // under innerMin: no marks, and records of every size
		add(10+rng.Intn(40), func(int) Record {
			r := Record{Value: val(rng.Intn(1500))}
			switch rng.Intn(8) {
			case 0:
				r.Value = nil
			case 1:
				r.Value = val(2000 + rng.Intn(9000))
			case 2:
				r.Headers = []record.Header{{Key: []byte("h"), Value: nil}}
			}
			return r
		})
	case "one":
		add(1, func(int) Record { return Record{Value: val(10)} })
	case "one-empty":
		add(1, func(int) Record { return Record{Value: []byte{}} })
	case "one-null":
		add(1, func(int) Record { return Record{} })
	case "100B":
		add(9000+rng.Intn(1000), func(int) Record { return Record{Value: val(90 + rng.Intn(20))} })
	case "1K":
		add(900, func(int) Record { return Record{Value: val(900 + rng.Intn(200))} })
	case "mixed":
		add(600+rng.Intn(400), func(int) Record {
			r := Record{}
			switch k := rng.Intn(100); {
			case k < 3:
				r.Value = nil
			case k < 6:
				r.Value = []byte{}
			case k < 8:
				r.Value = val(8100 + rng.Intn(200)) // around decodeCommon's 2-byte lengths
			case k < 9:
				r.Value = val(70 << 10)
			default:
				r.Value = val(rng.Intn(400))
			}
			switch k := rng.Intn(100); {
			case k < 5:
				r.Key = val(1 + rng.Intn(30))
			case k < 7:
				r.Key = val(9000) // a 3-byte key length
			case k < 12:
				r.Headers = []record.Header{{Key: []byte("h"), Value: val(rng.Intn(5))}}
			}
			return r
		})
	case "step1024":
		add(300, func(int) Record { return Record{Value: val(1023)} })
	case "period16K":
		// An empty value at every mark's place, exactly: a unit of an
		// empty value, 15 that render as 1 KiB and one as a byte less.
		add(17*20, func(i int) Record {
			switch i % 17 {
			case 0:
				return Record{Value: []byte{}}
			case 16:
				return Record{Value: val(1022)}
			}
			return Record{Value: val(1023)}
		})
	case "step4096":
		add(60, func(int) Record { return Record{Value: val(4095)} })
	case "headers":
		add(800, func(int) Record {
			return Record{Value: val(rng.Intn(200)), Headers: []record.Header{{Key: []byte("k"), Value: nil}}}
		})
	case "keys":
		add(2000, func(i int) Record { return Record{Key: []byte(fmt.Sprint(i)), Value: val(rng.Intn(100))} })
	case "alternate":
		add(3000, func(i int) Record {
			r := Record{Value: val(rng.Intn(60))}
			if i%2 == 1 {
				r.Headers = []record.Header{{Key: []byte("x"), Value: []byte("y")}}
			}
			return r
		})
	case "tiny":
		add(20000, func(int) Record {
			if rng.Intn(4) == 0 {
				return Record{}
			}
			return Record{Value: val(rng.Intn(4))}
		})
	case "70K":
		add(2+rng.Intn(3), func(int) Record { return Record{Value: val(70<<10 + rng.Intn(100))} })
	case "edge8K":
		add(40, func(int) Record { return Record{Value: val(8170 + rng.Intn(30))} })
	case "bigts":
		add(1500, func(int) Record {
			r := Record{Value: val(rng.Intn(120))}
			if rng.Intn(3) == 0 {
				r.Timestamp = 1_700_000_000_000 + rng.Int63n(1<<36)
			}
			return r
		})
	default:
		panic(shape)
	}
	return recs
}

// v27Log is a partition of v27Batch batches with what they render as.
type v27Log struct {
	p      *Partition
	want   []byte  // the Values rendering, from the records appended
	starts []int64 // where the record of each offset starts in want
	small  []int64 // where the records of small batches start in want
}

// append appends the batches of the given shapes to l, the first record
// of each with timestamp 1_700_000_000_000, and adds their rendering.
func (l *v27Log) append(t *testing.T, rng *rand.Rand, shapes []string) {
	t.Helper()
	for i, shape := range shapes {
		recs := v27Batch(rng, shape, fmt.Sprintf("%s%d", shape, i))
		for j := range recs {
			if recs[j].Timestamp == 0 {
				recs[j].Timestamp = 1_700_000_000_000 + int64(j)
			}
		}
		_, err := l.p.Append(recs)
		require.NoError(t, err)
		for _, r := range recs {
			if shape == "smallmix" {
				l.small = append(l.small, int64(len(l.want)))
			}
			l.starts = append(l.starts, int64(len(l.want)))
			l.want = append(append(l.want, r.Value...), '\n')
		}
	}
}

func v27Open(t *testing.T, segBytes int) *v27Log {
	lg := openLog(t, t.TempDir(), Options{})
	top, err := lg.CreateTopic("t", 1, small(fmt.Sprint("segment.bytes=", segBytes)))
	require.NoError(t, err)
	p, _ := top.Partition(0)
	return &v27Log{p: p}
}

// v27RefMarks makes the marks of b, whose rendering starts at from of its
// segment, as the per-record code did: Next and note for every record.
func v27RefMarks(t *testing.T, b *record.Batch, from int64) *innerBatch {
	t.Helper()
	var dec record.Decoder
	it, err := dec.Records(b)
	require.NoError(t, err)
	m := newMarker(b, from)
	for {
		off, index := it.Off(), it.Index()
		if !it.Next() {
			break
		}
		m.note(off, index, it.Record().Offset, int64(len(it.Record().Value))+1)
	}
	require.NoError(t, it.Err())
	return m.done()
}

// v27Marked is a markable batch of l with its reference marks, and where
// its segment's rendering starts in want.
type v27Marked struct {
	seg    *segment
	b      record.Batch
	ref    *innerBatch
	segAt  int64
	global []int64 // the marks' places in want
}

func (l *v27Log) marked(t *testing.T) []v27Marked {
	t.Helper()
	var out []v27Marked
	var segAt int64
	for _, s := range l.p.segments() {
		var at int64 // in the segment's rendering
		var dec record.Decoder
		for _, b := range batchesOf(t, s, true) {
			it, err := dec.Records(&b)
			require.NoError(t, err)
			from := at
			for it.Next() {
				at += int64(len(it.Record().Value)) + 1
			}
			require.NoError(t, it.Err())
			if markable(&b) {
				ref := v27RefMarks(t, &b, from)
				require.Equal(t, at, ref.to)
				mk := v27Marked{seg: s, b: b, ref: ref, segAt: segAt}
				for _, m := range ref.marks {
					mk.global = append(mk.global, segAt+m.at)
				}
				out = append(out, mk)
			}
		}
		segAt += at
	}
	require.Equal(t, int64(len(l.want)), segAt, "the log renders as the records appended")
	return out
}

// checkMarks fails unless every batch of l with marks has those of
// v27RefMarks, and returns how many have marks.
func (l *v27Log) checkMarks(t *testing.T, marked []v27Marked, what string) int {
	t.Helper()
	n := 0
	for _, mk := range marked {
		ib := mk.seg.views.get(mk.seg, Values).innerAt(mk.b.Pos)
		if ib == nil {
			continue
		}
		n++
		require.Equal(t, len(mk.ref.marks), len(ib.marks), "%s: batch at %d: marks", what, mk.b.Pos)
		for i := range ib.marks {
			require.Equal(t, mk.ref.marks[i], ib.marks[i], "%s: batch at %d: mark %d", what, mk.b.Pos, i)
		}
		require.Equal(t, mk.ref.to, ib.to, "%s: batch at %d: end", what, mk.b.Pos)
	}
	return n
}

// edges returns places in want around which a read may go wrong: each
// mark and a byte either side, each record end near a mark, and some
// record ends and a byte either side.
func (l *v27Log) edges(rng *rand.Rand, marked []v27Marked) []int64 {
	var ps []int64
	for _, mk := range marked {
		for _, g := range mk.global {
			ps = append(ps, g-1, g, g+1)
			// The record ends just before and after the mark.
			i := sort.Search(len(l.starts), func(i int) bool { return l.starts[i] >= g })
			for _, k := range []int{i - 2, i - 1, i + 1} {
				if k >= 0 && k < len(l.starts) {
					ps = append(ps, l.starts[k]-1, l.starts[k], l.starts[k]+1)
				}
			}
		}
	}
	for k := 0; k < 400; k++ {
		s := l.starts[rng.Intn(len(l.starts))]
		ps = append(ps, s-1, s, s+1)
	}
	for _, s := range l.small {
		ps = append(ps, s-1, s, s+1)
	}
	out := ps[:0]
	for _, p := range ps {
		if p >= 0 && p < int64(len(l.want)) {
			out = append(out, p)
		}
	}
	return out
}

// v27Size returns a read size for a read at at: to an edge, a byte
// either side, or of a size that matters to the render.
func v27Size(rng *rand.Rand, edges []int64, at int64) int {
	if rng.Intn(2) == 0 {
		i := sort.Search(len(edges), func(i int) bool { return edges[i] > at })
		if i < len(edges) {
			e := edges[min(i+rng.Intn(4), len(edges)-1)]
			if n := int(e-at) + rng.Intn(3) - 1; n > 0 {
				return n
			}
		}
	}
	sizes := []int{1, 2, 100, 4095, 4096, innerStep - 1, innerStep, innerStep + 1, 65536, 128 << 10, 1 << 20}
	if rng.Intn(4) == 0 {
		return 1 + rng.Intn(300000)
	}
	return sizes[rng.Intn(len(sizes))]
}

// v27Shapes order, shuffled, big batches next to each other and to small
// ones; the log ends with a big batch.
func v27Order(rng *rand.Rand) []string {
	s := append([]string(nil), v27Shapes...)
	rng.Shuffle(len(s), func(i, j int) { s[i], s[j] = s[j], s[i] })
	return append(s, "1K")
}

// Views read a log of batches of every shape: sequentially in pieces of
// sizes that end at marks, records' ends and a byte either side, one to
// three views in turn, with the batches' marks dropped first or not; and
// at random places and edges, on fresh views and on views that read
// before. Every byte read is the records' values, and every batch's
// marks, however made (renderValues on a first read, markBatch on a read
// inside a batch or a view opened at an offset in it), are those
// marker.note makes record by record. Then the log grows and the views
// read on into what it gained.
func TestView27ReadsMatchValuesAndMarks(t *testing.T) {
	rng := rand.New(rand.NewSource(advSeed(2701)))
	l := v27Open(t, 3<<20)
	l.append(t, rng, v27Order(rng))
	if !raceEnabled {
		require.Equal(t, string(l.want), string(renderAll(t, l.p, Values, 0)))
	}
	marked := l.marked(t)
	require.Greater(t, len(marked), 8)
	edges := l.edges(rng, marked)
	sort.Slice(edges, func(i, j int) bool { return edges[i] < edges[j] })

	var views []*View
	defer func() {
		for _, v := range views {
			require.NoError(t, v.Close())
		}
	}()
	newView := func() *View {
		v, err := l.p.NewView(Values, 0)
		require.NoError(t, err)
		views = append(views, v)
		return v
	}
	seen := 0
	rounds := 6
	if raceEnabled {
		rounds = 3
	}
	for round := 0; round < rounds; round++ {
		what := fmt.Sprintf("round %d", round)
		if round%2 == 0 {
			v24DropMarks(l.p)
		}
		// Sequentially, k views in turn.
		k := 1 + round%3
		vs := make([]*View, k)
		for i := range vs {
			vs[i] = newView()
		}
		at := int64(0)
		if round >= 3 {
			at = edges[rng.Intn(len(edges))]
		}
		for step := 0; at < int64(len(l.want)); step++ {
			at = v24Read(t, vs[step%k], l.want, at, v27Size(rng, edges, at), fmt.Sprintf("%s: sequential, step %d", what, step))
		}
		seen = max(seen, l.checkMarks(t, marked, what+": sequential"))

		// At random, on fresh views and old ones, marks dropped now and then.
		for step := 0; step < advSteps(300); step++ {
			if rng.Intn(40) == 0 {
				v24DropMarks(l.p)
			}
			v := views[rng.Intn(len(views))]
			if rng.Intn(3) == 0 {
				v = newView()
			}
			at := edges[rng.Intn(len(edges))]
			if rng.Intn(4) == 0 {
				at = rng.Int63n(int64(len(l.want)))
			}
			end := v24Read(t, v, l.want, at, v27Size(rng, edges, at), fmt.Sprintf("%s: random, step %d", what, step))
			if end < int64(len(l.want)) && rng.Intn(2) == 0 {
				v24Read(t, v, l.want, end, v27Size(rng, edges, end), fmt.Sprintf("%s: random, step %d, on", what, step))
			}
		}
		l.checkMarks(t, marked, what+": random")
	}
	require.Equal(t, len(marked), seen, "every big batch marked by a sequential read")

	// Views opened at offsets inside big batches (markBatch through the
	// view index).
	for step := 0; step < advSteps(60); step++ {
		v24DropMarks(l.p)
		mk := marked[rng.Intn(len(marked))]
		off := mk.b.BaseOffset + record.Offset(rng.Int63n(int64(mk.b.LastOffsetDelta)+1))
		v, err := l.p.NewView(Values, off)
		require.NoError(t, err)
		want := l.want[l.starts[off]:]
		at := int64(0)
		for i := 0; i < 3 && at < int64(len(want)); i++ {
			at = v24Read(t, v, want, at, v27Size(rng, nil, at), fmt.Sprintf("view at offset %d, read %d", off, i))
		}
		require.NoError(t, v.Close())
		require.Positive(t, l.checkMarks(t, marked, fmt.Sprintf("view at offset %d", off)))
	}

	// The log grows; the views read on into what it gained.
	end := int64(len(l.want))
	l.append(t, rng, []string{"100B", "one", "mixed", "step1024"})
	marked = l.marked(t)
	for i, v := range views[:3] {
		at := end - int64(i)
		for step := 0; at < int64(len(l.want)); step++ {
			at = v24Read(t, v, l.want, at, v27Size(rng, nil, at), fmt.Sprintf("grown, view %d, step %d", i, step))
		}
	}
	l.checkMarks(t, marked, "grown")
}

// Every big batch, with no marks anywhere, is marked by a first read that
// ends before, at and after each of its first marks' places and the
// records' ends around them, starting at the batch's start, a byte
// before it (so that the read enters the batch with bytes in its buffer
// already) or inside it; the marks are marker.note's, and a second view
// reading the batch from those marks at each mark's place and a byte
// either side reads the records' values.
func TestView27FirstReadMarksEveryEdge(t *testing.T) {
	rng := rand.New(rand.NewSource(advSeed(2702)))
	l := v27Open(t, 8<<20)
	l.append(t, rng, []string{"one", "100B", "step1024", "one", "mixed", "step4096", "alternate", "tiny", "edge8K", "bigts", "headers", "period16K"})
	marked := l.marked(t)
	cases := 0
	for bi, mk := range marked {
		start := mk.segAt + mk.ref.from()
		end := mk.segAt + mk.ref.to
		var stops []int64
		for i, g := range mk.global {
			if i > 3 && i < len(mk.global)-2 && rng.Intn(len(mk.global)) > 3 {
				continue
			}
			stops = append(stops, g-1, g, g+1)
			j := sort.Search(len(l.starts), func(i int) bool { return l.starts[i] > g })
			if j < len(l.starts) {
				stops = append(stops, l.starts[j]-1, l.starts[j], l.starts[j]+1)
			}
		}
		stops = append(stops, end-1, end, end+1)
		for _, from := range []int64{start, start - 1, start + 1, start + (end-start)/3} {
			if from < 0 {
				continue
			}
			for _, stop := range stops {
				if stop <= from || stop > int64(len(l.want)) || raceEnabled && rng.Intn(12) != 0 {
					continue
				}
				cases++
				what := fmt.Sprintf("batch %d [%d,%d): first read [%d,%d)", bi, start, end, from, stop)
				v24DropMarks(l.p)
				v, err := l.p.NewView(Values, 0)
				require.NoError(t, err)
				at := v24Read(t, v, l.want, from, int(stop-from), what)
				if at < int64(len(l.want)) {
					v24Read(t, v, l.want, at, v27Size(rng, nil, at), what+": on")
				}
				require.NoError(t, v.Close())
				require.Equal(t, 1, l.checkMarksOf(t, mk, what))
			}
		}
		// From the marks, in a second view.
		v, err := l.p.NewView(Values, 0)
		require.NoError(t, err)
		for _, g := range mk.global {
			for _, at := range []int64{g - 1, g, g + 1} {
				if at < 0 || at >= int64(len(l.want)) {
					continue
				}
				n := v27Size(rng, stops, at)
				v24Read(t, v, l.want, at, n, fmt.Sprintf("batch %d: from mark at %d, read %d at %d", bi, g, n, at))
			}
		}
		require.NoError(t, v.Close())
	}
	t.Logf("%d first reads", cases)
	require.Greater(t, cases, 50)
}

// checkMarksOf checks mk's marks (which it must have) and returns 1.
func (l *v27Log) checkMarksOf(t *testing.T, mk v27Marked, what string) int {
	t.Helper()
	require.NotNil(t, mk.seg.views.get(mk.seg, Values).innerAt(mk.b.Pos), "%s: no marks", what)
	return l.checkMarks(t, []v27Marked{mk}, what)
}

// A view reading a marked batch from its marks, in buffers of every size
// from 1 byte to past a mark's step, each read going on from where the
// last stopped: the fast hook of walk renders records from a record
// boundary on only, and never more than the buffer takes.
func TestView27FromMarksEveryBufferSize(t *testing.T) {
	rng := rand.New(rand.NewSource(advSeed(2703)))
	l := v27Open(t, 8<<20)
	l.append(t, rng, []string{"one", "mixed", "step1024", "smallmix", "alternate", "period16K"})
	marked := l.marked(t)
	// Mark them all.
	v, err := l.p.NewView(Values, 0)
	require.NoError(t, err)
	v24Read(t, v, l.want, 0, len(l.want)+1, "marking")
	require.NoError(t, v.Close())
	require.Equal(t, len(marked), l.checkMarks(t, marked, "marked"))
	sizes := []int{1, 2, 3, 7, 64, 99, 100, 101, 1023, 1024, 1025, 4097, innerStep - 1, innerStep + 1, innerWindow + 1}
	for _, mk := range marked {
		for _, size := range sizes {
			what := fmt.Sprintf("batch at %d, reads of %d", mk.b.Pos, size)
			// A fresh view per read: each starts from the mark before it.
			v, err := l.p.NewView(Values, 0)
			require.NoError(t, err)
			at, end := mk.segAt+mk.ref.from()+int64(rng.Intn(100)), mk.segAt+mk.ref.to
			for k := 0; k < advSteps(40) && at < end; k++ {
				if k%5 == 4 {
					at = mk.global[rng.Intn(len(mk.global))] + int64(rng.Intn(3)) - 1
				}
				at = v24Read(t, v, l.want, at, size, what)
			}
			require.NoError(t, v.Close())
		}
	}
	require.Equal(t, len(marked), l.checkMarks(t, marked, "after"))
}

// A big batch of records AppendValues renders in long runs (tiny values,
// an empty value at every mark's place, 100 B ones; 70 KiB ones, for a
// record length past the batch), whose records lie (v23Lie, the CRC made
// right), after a good big batch: nothing of it is served, on a log just
// opened, to sequential reads of sizes that stop at and around marks,
// to first reads inside it, and to reads from each mark of the good
// batch to its end; the read that reaches it fails.
func TestView27LyingBatchAfterFastRuns(t *testing.T) {
	type lie struct{ target, kind string }
	var lies []lie
	for _, target := range []string{"tiny", "period16K", "100B"} {
		for _, kind := range v23Lies {
			if kind != "first length huge" {
				lies = append(lies, lie{target, kind})
			}
		}
	}
	lies = append(lies, lie{"70K", "first length huge"})
	for li, lc := range lies {
		if raceEnabled && li%9 != 0 {
			continue
		}
		what := fmt.Sprintf("%s batch, %s", lc.target, lc.kind)
		dir := t.TempDir()
		lg, err := Open(dir, Options{Logger: testLogger(t), RetentionCheckInterval: -1})
		require.NoError(t, err)
		top, err := lg.CreateTopic("t", 1, small("segment.bytes=8000000"))
		require.NoError(t, err)
		p, _ := top.Partition(0)
		rng := rand.New(rand.NewSource(advSeed(2704)))
		l := &v27Log{p: p}
		l.append(t, rng, []string{"smallmix", "1K"})
		prefix := len(l.want)
		l.append(t, rng, []string{lc.target, "1K"})
		seg := p.segments()[0]
		bs := batchesOf(t, seg, true)
		bad := bs[2]
		require.Equal(t, l.starts[bad.BaseOffset], int64(prefix), what)
		offs := recordStarts(t, &bad)
		require.NoError(t, lg.Close())
		raw := v23Lie(t, bad, offs, lc.kind)
		f, err := os.OpenFile(seg.logPath(), os.O_WRONLY, 0)
		require.NoError(t, err)
		_, err = f.WriteAt(raw, int64(bad.Pos))
		require.NoError(t, err)
		require.NoError(t, f.Close())

		lg, err = Open(dir, Options{ReadOnly: true, Logger: testLogger(t), RetentionCheckInterval: -1})
		require.NoError(t, err)
		p, err = lg.Partition("t", 0)
		require.NoError(t, err)
		want := l.want[:prefix]
		edges := []int64{int64(prefix) - 1, int64(prefix), int64(prefix) + 1}
		for at := int64(prefix) + innerStep; at < int64(len(l.want)); at += innerStep {
			edges = append(edges, at-1, at, at+1)
		}
		// Sequential reads, one or two views in turn.
		for k := 1; k <= 2; k++ {
			vs := make([]*View, k)
			for i := range vs {
				vs[i], err = p.NewView(Values, 0)
				require.NoError(t, err)
			}
			var got []byte
			var rerr error
			for step := 0; rerr == nil; step++ {
				b := make([]byte, v27Size(rng, edges, int64(len(got))))
				var n int
				n, rerr = vs[step%k].ReadAt(b, int64(len(got)))
				got = append(got, b[:n]...)
				require.LessOrEqual(t, len(got), prefix, "%s: %d views: served past the good batches", what, k)
			}
			require.True(t, badData(rerr), "%s: %d views: reads end with %v", what, k, rerr)
			require.Equal(t, string(want), string(got), "%s: %d views", what, k)
			for _, v := range vs {
				require.NoError(t, v.Close())
			}
		}
		// First reads inside the bad batch.
		for _, at := range []int64{0, 1, innerStep - 1, innerStep, innerStep + 1, 100000} {
			for _, size := range []int{1, 4096, 1 << 20} {
				v, err := p.NewView(Values, 0)
				require.NoError(t, err)
				n, err := v.ReadAt(make([]byte, size), int64(prefix)+at)
				require.True(t, badData(err), "%s: a read of %d at %d into the bad batch: %d bytes, %v", what, size, at, n, err)
				require.Zero(t, n, what)
				require.NoError(t, v.Close())
			}
		}
		// From each mark of the good batch before it (marked by now) to
		// its end, and on.
		s := p.segments()[0]
		ib := s.views.get(s, Values).innerAt(bs[1].Pos)
		require.NotNil(t, ib, what)
		readFromMarksToBadBatch(t, p, Values, ib, want, what)
		require.NoError(t, lg.Close())
	}
}
