package storage

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/internal/broker"
	"github.com/logfs/logfs/record"
)

// Adversarial tests of a view reading on into a batch that another view
// read whole and marked (renderInto rendering it from its first mark).

// v24Span is where a shown data batch's records render in a Values view.
type v24Span struct {
	start, end int64
	big        bool // markable
}

// v24Spans renders p from offset 0 in Values the slow way, showing only
// the records shows lets through, and returns the rendering and where
// each batch with a shown record renders.
func v24Spans(t *testing.T, p *Partition, shows func(record.Offset) bool) ([]byte, []v24Span) {
	t.Helper()
	type bt struct {
		base, last record.Offset
		big        bool
	}
	var batches []bt
	for _, s := range p.segments() {
		for _, b := range batchesOf(t, s, true) {
			if b.Attributes.Control() {
				continue
			}
			batches = append(batches, bt{b.BaseOffset, b.LastOffset(), markable(&b)})
		}
	}
	r, err := p.NewReader(p.StartOffset())
	require.NoError(t, err)
	defer r.Close()
	var out []byte
	var spans []v24Span
	var of []int // the batch of each span
	k := 0
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		if !shows(rec.Offset) {
			continue
		}
		for batches[k].last < rec.Offset {
			k++
		}
		at := int64(len(out))
		out = Values.Append(out, rec)
		if n := len(spans); n > 0 && of[n-1] == k {
			spans[n-1].end = int64(len(out))
			continue
		}
		spans = append(spans, v24Span{start: at, end: int64(len(out)), big: batches[k].big})
		of = append(of, k)
	}
	return out, spans
}

// v24Read reads size bytes at at from v and checks them against want.
func v24Read(t *testing.T, v *View, want []byte, at int64, size int, what string) int64 {
	t.Helper()
	b := make([]byte, size)
	n, err := v.ReadAt(b, at)
	if err != nil {
		require.ErrorIs(t, err, io.EOF, "%s: read %d at %d", what, size, at)
	}
	end := min(at+int64(size), int64(len(want)))
	if at > int64(len(want)) {
		end = at
	}
	require.Equal(t, int(end-at), n, "%s: read %d at %d: bytes", what, size, at)
	v24RequireBytes(t, what, size, at, want[at:end], b[:n])
	return at + int64(n)
}

func v24DropMarks(p *Partition) {
	for _, s := range p.segments() {
		s.views.dropInner()
	}
}

// v24MarkThenOn: for every big batch, with no marks anywhere, view A
// reads up to the batch's start (or a byte either side, or a record
// before), view B (Values or JSONL) reads a piece inside the batch,
// which marks it, and A reads on with sizes that stop inside the batch,
// at its end, a byte either side of it, and far past it; then A reads to
// the end in random pieces. Every byte must be want's.
func v24MarkThenOn(t *testing.T, p *Partition, want []byte, spans []v24Span, rng *rand.Rand, what string) {
	t.Helper()
	bigs := 0
	for si, sp := range spans {
		if !sp.big {
			continue
		}
		bigs++
		for di, d := range []int64{0, -1, 1, -2, 2} {
			s, e := sp.start, sp.end
			stopA := s + d
			if d == -2 && si > 0 { // a record before: the one ending at s
				stopA = int64(bytes.LastIndexByte(want[:max(s-1, 0)], '\n') + 1)
			}
			if d == 2 {
				stopA = int64(bytes.IndexByte(want[s:], '\n')) + s + 1 // the batch's first record
			}
			if stopA < 0 || stopA > int64(len(want)) {
				continue
			}
			sizes := []int64{1, 4096, e - stopA - 1, e - stopA, e - stopA + 1, 128 << 10, 1 << 20, int64(1 + rng.Intn(300000))}
			for k, size := range sizes {
				if size <= 0 {
					continue
				}
				if raceEnabled && (di*len(sizes)+k)%4 != si%4 {
					continue // a quarter of the cases, a different one in each batch
				}
				v24DropMarks(p)
				fB := Values
				if rng.Intn(4) == 0 {
					fB = JSONL // marks of another format: not A's
				}
				what := fmt.Sprintf("%s: batch %d [%d,%d) A to %d, B %v, A on %d", what, si, s, e, stopA, fB, size)
				a, err := p.NewView(Values, 0)
				require.NoError(t, err)
				from := max(stopA-int64(1+rng.Intn(200000)), 0)
				if rng.Intn(3) == 0 {
					from = max(spans[max(si-1, 0)].start, 0) // from the batch before's start
				}
				for at := from; at < stopA; {
					at = v24Read(t, a, want, at, int(min(stopA-at, int64(1+rng.Intn(150000)))), what+": A up to it")
				}
				b, err := p.NewView(fB, 0)
				require.NoError(t, err)
				if fB == Values {
					at := s + rng.Int63n(e-s)
					if rng.Intn(4) == 0 {
						at = s
					}
					v24Read(t, b, want, at, 1+rng.Intn(5000), what+": B inside")
					if fB == Values && rng.Intn(3) == 0 {
						// A third view marks the batch after too.
						if si+1 < len(spans) && spans[si+1].big {
							c, err := p.NewView(Values, 0)
							require.NoError(t, err)
							n := spans[si+1]
							v24Read(t, c, want, n.start+rng.Int63n(n.end-n.start), 100, what+": C inside the next")
							require.NoError(t, c.Close())
						}
					}
				} else {
					bb := make([]byte, 100)
					_, err := b.ReadAt(bb, 1<<30)
					if err != nil && !errors.Is(err, io.EOF) {
						t.Fatalf("%s: JSONL read: %v", what, err)
					}
					// a JSONL read inside: any place past the start
					sz, err := b.Size()
					require.NoError(t, err)
					if sz > 0 {
						_, err = b.ReadAt(bb, sz/2)
						require.NoError(t, err)
					}
				}
				at := stopA
				at = v24Read(t, a, want, at, int(size), what+": A on")
				for at < int64(len(want)) {
					at = v24Read(t, a, want, at, []int{1, 100, 4096, 70000, 1 << 20, 1 + rng.Intn(200000)}[rng.Intn(6)], what+": A to the end")
				}
				_, err = a.ReadAt(make([]byte, 10), at)
				require.ErrorIs(t, err, io.EOF, what)
				require.NoError(t, a.Close())
				require.NoError(t, b.Close())
			}
		}
	}
	require.Greater(t, bigs, 2, "%s: big batches", what)
}

// v24Big returns n records of values of odd lengths, now and then empty,
// null or longer than a window.
func v24Big(rng *rand.Rand, tag string, n int) []string {
	vals := make([]string, n)
	for i := range vals {
		switch rng.Intn(80) {
		case 0:
			vals[i] = ""
		case 1:
			vals[i] = strings.Repeat("W", innerWindow+rng.Intn(innerWindow))
		default:
			vals[i] = fmt.Sprintf("%s-%d-%s", tag, i, strings.Repeat(string(rune('a'+rng.Intn(26))), rng.Intn(400)))
		}
	}
	return vals
}

func v24Records(vals []string) []Record {
	recs := make([]Record, len(vals))
	for i, v := range vals {
		recs[i] = Record{Value: []byte(v)}
		if v == "" && i%2 == 0 {
			recs[i].Value = nil
		}
	}
	return recs
}

// Plain big batches, adjacent and between small ones, across segment
// rolls (a big batch first in a segment).
func TestView24MarkedNextBatchPlain(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{})
	top, err := l.CreateTopic("t", 1, small("segment.bytes=900000"))
	require.NoError(t, err)
	p, _ := top.Partition(0)
	rng := rand.New(rand.NewSource(advSeed(2401)))
	for i := 0; i < 14; i++ {
		switch rng.Intn(4) {
		case 0:
			_, err = p.Append(v24Records([]string{fmt.Sprint("small-", i)}))
		default:
			_, err = p.Append(v24Records(v24Big(rng, fmt.Sprint("b", i), 250+rng.Intn(500))))
		}
		require.NoError(t, err)
	}
	require.Greater(t, len(p.segments()), 2)
	want, spans := v24Spans(t, p, func(record.Offset) bool { return true })
	require.Equal(t, string(renderAll(t, p, Values, 0)), string(want))
	v24MarkThenOn(t, p, want, spans, rng, "plain")
}

// Big transactional batches, committed, aborted and open, with control
// batches between big batches, in ReadCommitted and ReadUncommitted.
func TestView24MarkedNextBatchTxn(t *testing.T) {
	dir := t.TempDir()
	w := newTxnWriter(t, dir, broker.Options{SegmentBytes: 2 << 20})
	rng := rand.New(rand.NewSource(advSeed(2402)))
	big := func(tag string) []string { return v24Big(rng, tag, 200+rng.Intn(300)) }
	w.write(-1, false, "first")
	w.write(1, true, big("t1a")...) // aborted, before a plain big batch
	w.write(-1, false, big("p1")...)
	w.marker(1, true)
	w.write(-1, false, big("p2")...) // after a control batch
	w.write(2, true, big("t2a")...)  // committed
	w.marker(2, false)
	w.write(2, true, big("t2b")...) // committed, next to another txn
	w.write(1, true, big("t1b")...) // aborted
	w.marker(2, false)
	w.marker(1, true)
	w.write(-1, false, big("p3")...)
	w.write(-1, false, "small")
	w.write(-1, false, big("p4")...)
	w.write(1, true, big("t1c")...) // aborted, then two plain big ones
	w.marker(1, true)
	w.write(-1, false, big("p5")...)
	w.write(-1, false, big("p6")...)
	w.write(2, true, big("t2c")...) // open: the LSO
	w.write(-1, false, big("p7")...)
	require.NoError(t, w.p.Close())
	for _, iso := range []Isolation{ReadCommitted, ReadUncommitted} {
		t.Run(iso.String(), func(t *testing.T) {
			l, p, want, spans := v24OpenTxn(t, w, dir, iso)
			require.Equal(t, string(w.expected(t, p, Values, iso, 0)), string(want))
			v24MarkThenOn(t, p, want, spans, rng, iso.String())
			require.NoError(t, l.Close())
		})
	}
}

// A transaction open below a marked plain big batch commits while views
// read: a ReadCommitted view that stopped at the LSO reads on, through the
// now committed big batch, into the plain big batch another view marked.
func TestView24MarkedAfterTxnCommitsWhileReading(t *testing.T) {
	dir := t.TempDir()
	w := newTxnWriter(t, dir, broker.Options{SegmentBytes: 8 << 20})
	rng := rand.New(rand.NewSource(advSeed(2403)))
	big := func(tag string) []string { return v24Big(rng, tag, 200+rng.Intn(300)) }
	w.write(-1, false, big("p0")...)
	w.write(1, true, big("t1")...) // open
	w.write(-1, false, big("p1")...)
	w.write(1, true, big("t1b")...)
	w.write(-1, false, big("p2")...)
	require.NoError(t, w.p.Checkpoint(w.p.End()))
	l := openLog(t, dir, Options{ReadOnly: true, Follow: true, Isolation: ReadCommitted})
	p, err := l.Partition("tx", 0)
	require.NoError(t, err)
	before := w.expected(t, p, Values, ReadCommitted, 0)
	a, err := p.NewView(Values, 0)
	require.NoError(t, err)
	defer a.Close()
	at := int64(0)
	for at < int64(len(before)) {
		at = v24Read(t, a, before, at, 1+rng.Intn(100000), "A before the commit")
	}
	n, err := a.ReadAt(make([]byte, 100), at)
	require.Zero(t, n)
	require.ErrorIs(t, err, io.EOF)
	// Views from offsets inside the open transaction's big batch and the
	// plain one after it, past the LSO: their lookups may mark those
	// batches, which A must not render from (nor anything past the LSO).
	for _, wr := range w.m.writes[1:3] {
		for _, off := range []record.Offset{wr.base + 1, (wr.base + wr.last) / 2, wr.last} {
			v, err := p.NewView(Values, off)
			require.NoError(t, err)
			_, _ = v.ReadAt(make([]byte, 100), 0)
			require.NoError(t, v.Close())
		}
	}
	a2, err := p.NewView(Values, 0)
	require.NoError(t, err)
	for _, v := range []*View{a, a2} {
		got, err := readView(t, v, 1+rng.Intn(100000))
		require.NoError(t, err)
		require.True(t, bytes.Equal(before, got), "a view of the log up to the LSO, after marks past it")
	}
	require.NoError(t, a2.Close())
	marked := 0
	for _, s := range p.segments() {
		if vi := s.views.byFormat[Values]; vi != nil {
			vi.mu.Lock()
			marked += len(vi.inner)
			vi.mu.Unlock()
		}
	}
	t.Logf("batches with marks before the commit: %d", marked)

	w.marker(1, false)
	require.NoError(t, w.p.Checkpoint(w.p.End()))
	want := w.expected(t, p, Values, ReadCommitted, 0)
	require.Greater(t, len(want), len(before))
	// Wait for the view to see the commit.
	for i := 0; ; i++ {
		sz, err := a.Size()
		require.NoError(t, err)
		if sz == int64(len(want)) {
			break
		}
		require.Less(t, i, 2000, "size %d, want %d", sz, len(want))
		time.Sleep(time.Millisecond)
	}
	_, spans := v24Spans(t, p, func(o record.Offset) bool { return true })
	// Another view marks p1 and p2 (plain big batches after t1's).
	b, err := p.NewView(Values, 0)
	require.NoError(t, err)
	defer b.Close()
	for _, sp := range spans[2:] {
		if sp.big {
			v24Read(t, b, want, sp.start+rng.Int63n(sp.end-sp.start), 10, "B marks")
		}
	}
	for at < int64(len(want)) {
		at = v24Read(t, a, want, at, 1+rng.Intn(300000), "A after the commit")
	}
}

// A bad batch right after a batch another view marked: A reads to the
// marked batch's start, B marks it, A reads on: it gets the marked batch
// and nothing of the bad one, and the read that reaches it fails.
func TestView24BadBatchAfterMarked(t *testing.T) {
	for _, kind := range []string{"flipped byte", "count-1", "count+1", "length-1000", "truncated"} {
		t.Run(kind, func(t *testing.T) {
			dir, prefix := advDamaged(t, kind)
			want := prefix[Values]
			xStart := int64(len("first\n"))
			for ii, iso := range []Isolation{ReadUncommitted, ReadCommitted} {
				for si, size := range []int{1, 4096, 1 << 20} {
					for di, stopA := range []int64{xStart - 1, xStart, xStart + 1} {
						if raceEnabled && (ii+si+di)%3 != 0 {
							continue // a third of the cases
						}
						what := fmt.Sprintf("%s %v size %d A to %d", kind, iso, size, stopA)
						l, err := Open(dir, Options{ReadOnly: true, Isolation: iso, Logger: testLogger(t), RetentionCheckInterval: -1})
						require.NoError(t, err)
						p, err := l.Partition("t", 0)
						require.NoError(t, err)
						a, err := p.NewView(Values, 0)
						require.NoError(t, err)
						v24Read(t, a, want, 0, int(stopA), what)
						b, err := p.NewView(Values, 0)
						require.NoError(t, err)
						v24Read(t, b, want, int64(len(want))-3000, 100, what+": B marks X")
						got := append([]byte(nil), want[:stopA]...)
						var rerr error
						buf := make([]byte, size)
						for {
							n, err := a.ReadAt(buf, int64(len(got)))
							got = append(got, buf[:n]...)
							if err != nil {
								rerr = err
								break
							}
							require.NotZero(t, n, what)
						}
						require.True(t, advBadData(kind, rerr), "%s: %v", what, rerr)
						require.Equal(t, len(want), len(got), what)
						require.True(t, bytes.Equal(want, got), what)
						sz, err := a.Size()
						require.NoError(t, err)
						require.Equal(t, int64(len(want)), sz, what)
						require.NoError(t, a.Close())
						require.NoError(t, b.Close())
						require.NoError(t, l.Close())
					}
				}
			}
		})
	}
}

// The kernel's way, in odd orders: several views, each request served on
// the idle view whose last read ended where it starts (or any), requests
// of one random size per round in flight together and rendered in a
// random order, marks dropped now and then. Every request is checked.
func TestView24ViewsInTurnRandom(t *testing.T) {
	for _, iso := range []Isolation{ReadUncommitted, ReadCommitted} {
		t.Run(iso.String(), func(t *testing.T) {
			dir := t.TempDir()
			w := newTxnWriter(t, dir, broker.Options{SegmentBytes: 3 << 20})
			rng := rand.New(rand.NewSource(advSeed(2404)))
			for i := 0; i < 30; i++ {
				switch rng.Intn(6) {
				case 0:
					w.write(-1, false, fmt.Sprint("small", i))
				case 1:
					w.write(1, true, v24Big(rng, fmt.Sprint("t", i), 100+rng.Intn(400))...)
					w.marker(1, rng.Intn(2) == 0)
				default:
					w.write(-1, false, v24Big(rng, fmt.Sprint("p", i), 150+rng.Intn(500))...)
				}
			}
			require.NoError(t, w.p.Close())
			l := openLog(t, dir, Options{ReadOnly: true, Isolation: iso})
			p, err := l.Partition("tx", 0)
			require.NoError(t, err)
			want := w.expected(t, p, Values, iso, 0)
			for round := 0; round < 12; round++ {
				v24DropMarks(p)
				req := []int{4096, 16 << 10, 60000, 128 << 10, 131071, 131073, 1 << 20, 1 + rng.Intn(400000)}[rng.Intn(8)]
				inFlight := 2 + rng.Intn(3)
				type idle struct {
					v   *View
					end int64
				}
				var views []idle
				for k := 0; k < inFlight+1; k++ {
					v, err := p.NewView(Values, 0)
					require.NoError(t, err)
					views = append(views, idle{v, -1})
				}
				pick := func(off int64) idle {
					k := rng.Intn(len(views))
					for j, iv := range views {
						if iv.end == off {
							k = j
						}
					}
					iv := views[k]
					views = append(views[:k], views[k+1:]...)
					return iv
				}
				what := fmt.Sprintf("%v round %d req %d in flight %d", iso, round, req, inFlight)
				for off := int64(0); off < int64(len(want)); off += int64(inFlight * req) {
					type job struct {
						iv  idle
						off int64
					}
					var jobs []job
					for k := 0; k < inFlight && off+int64(k*req) < int64(len(want)); k++ {
						jobs = append(jobs, job{pick(off + int64(k*req)), off + int64(k*req)})
					}
					rng.Shuffle(len(jobs), func(i, j int) { jobs[i], jobs[j] = jobs[j], jobs[i] })
					for _, j := range jobs {
						end := v24Read(t, j.iv.v, want, j.off, req, what)
						j.iv.end = end
						views = append(views, j.iv)
					}
					if rng.Intn(20) == 0 {
						v24DropMarks(p)
					}
				}
				for _, iv := range views {
					require.NoError(t, iv.v.Close())
				}
			}
			require.NoError(t, l.Close())
		})
	}
}

// v24RequireBytes fails t at the first byte of got, what a read of size
// bytes at at returned, that is not want's (as long as got).
func v24RequireBytes(t testing.TB, what string, size int, at int64, want, got []byte) {
	t.Helper()
	if bytes.Equal(want, got) {
		return
	}
	i := 0
	for i < len(got) && want[i] == got[i] {
		i++
	}
	t.Fatalf("%s: read %d at %d: first wrong byte at %d: got %q, want %q", what, size, at, at+int64(i),
		got[i:min(i+40, len(got))], want[i:min(i+40, len(want))])
}

// v24OpenTxn opens the log w wrote in dir read-only at isolation level
// iso, and returns its partition's rendering as the model says a view
// shows it.
func v24OpenTxn(t *testing.T, w *txnWriter, dir string, iso Isolation) (*Log, *Partition, []byte, []v24Span) {
	t.Helper()
	l := openLog(t, dir, Options{ReadOnly: true, Isolation: iso})
	p, err := l.Partition("tx", 0)
	require.NoError(t, err)
	want, spans := v24Spans(t, p, w.shown(iso, w.m.lso(p.EndOffset())))
	return l, p, want, spans
}

// v24Condemned makes a partition of n appends (batch(i) each) over several
// segments, which retention condemns all but the active one of, and
// returns it with its rendering.
func v24Condemned(t *testing.T, n int, batch func(i int) []Record) (*Log, *Partition, []byte, []v24Span) {
	t.Helper()
	l := openLog(t, t.TempDir(), Options{})
	top, err := l.CreateTopic("t", 1, small("segment.bytes=600000", "retention.bytes=0", "retention.ms=-1", "file.delete.delay.ms=0"))
	require.NoError(t, err)
	p, _ := top.Partition(0)
	for i := 0; i < n; i++ {
		_, err = p.Append(batch(i))
		require.NoError(t, err)
	}
	require.Greater(t, len(p.segments()), 3)
	want, spans := v24Spans(t, p, func(record.Offset) bool { return true })
	return l, p, want, spans
}

// v24ReadToEnd reads v from at on in reads of random sizes until the end
// or ErrDeleted (retention deleted what came next), checking each read's
// bytes against want and calling each, if not nil, after it. It returns
// where the reads stopped.
func v24ReadToEnd(t *testing.T, v *View, want []byte, at int64, rng *rand.Rand, what string, each func()) int64 {
	t.Helper()
	for {
		buf := make([]byte, 1+rng.Intn(300000))
		n, err := v.ReadAt(buf, at)
		end := min(at+int64(len(buf)), int64(len(want)))
		require.LessOrEqual(t, at+int64(n), end, what)
		require.True(t, bytes.Equal(want[at:at+int64(n)], buf[:n]), "%s: read at %d", what, at)
		if each != nil {
			each()
		}
		at += int64(n)
		if err != nil {
			if !errors.Is(err, io.EOF) {
				require.ErrorIs(t, err, ErrDeleted)
			}
			return at
		}
	}
}

// Retention deletes segments while view A, which read up to a big batch
// another view marked, holds them: A reads on, from the marks or not, and
// what it serves before it ends (at the end, or at ErrDeleted) is the
// rendering's.
func TestView24MarkedThenRetention(t *testing.T) {
	rng := rand.New(rand.NewSource(advSeed(2405)))
	for round := 0; round < 4; round++ {
		l, p, want, spans := v24Condemned(t, 10, func(i int) []Record {
			return v24Records(v24Big(rng, fmt.Sprint("r", round, "b", i), 300+rng.Intn(400)))
		})
		k := 1 + rng.Intn(len(spans)-2)
		sp := spans[k]
		a, err := p.NewView(Values, 0)
		require.NoError(t, err)
		at := int64(0)
		for at < sp.start {
			at = v24Read(t, a, want, at, int(min(sp.start-at, int64(1+rng.Intn(200000)))), "A up to it")
		}
		b, err := p.NewView(Values, 0)
		require.NoError(t, err)
		v24Read(t, b, want, sp.start+rng.Int63n(sp.end-sp.start), 100, "B marks")
		require.NoError(t, b.Close())
		_, err = l.EnforceRetention()
		require.NoError(t, err)
		at = v24ReadToEnd(t, a, want, at, rng, fmt.Sprint("round ", round), nil)
		require.GreaterOrEqual(t, at, sp.end, "round %d: A read on through the marked batch", round)
		require.NoError(t, a.Close())
		require.NoError(t, l.Close())
	}
}

// As TestView24ViewsInTurnRandom, with the requests of a round served at
// once, each on its own goroutine, as the mount serves them (run with
// -race).
func TestView24ViewsInTurnConcurrent(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{})
	top, err := l.CreateTopic("t", 1, small("segment.bytes=2000000"))
	require.NoError(t, err)
	p, _ := top.Partition(0)
	rng := rand.New(rand.NewSource(advSeed(2406)))
	for i := 0; i < 16; i++ {
		_, err = p.Append(v24Records(v24Big(rng, fmt.Sprint("c", i), 100+rng.Intn(600))))
		require.NoError(t, err)
	}
	want := renderAll(t, p, Values, 0)
	for round := 0; round < 6; round++ {
		v24DropMarks(p)
		req := []int{16 << 10, 128 << 10, 131073, 1 + rng.Intn(300000)}[rng.Intn(4)]
		inFlight := 2 + rng.Intn(3)
		views := make([]*View, inFlight)
		ends := make([]int64, inFlight)
		for k := range views {
			views[k], err = p.NewView(Values, 0)
			require.NoError(t, err)
		}
		for off := int64(0); off < int64(len(want)); off += int64(inFlight * req) {
			perm := v24Assign(rng, ends, off, req)
			errs := make(chan error, inFlight)
			for k := 0; k < inFlight; k++ {
				go func(k int) {
					at := off + int64(k*req)
					if at >= int64(len(want)) {
						errs <- nil
						return
					}
					end, err := v24ReadRight(views[perm[k]], want, at, req)
					if err != nil {
						errs <- fmt.Errorf("round %d req %d: %w", round, req, err)
						return
					}
					ends[perm[k]] = end
					errs <- nil
				}(k)
			}
			for k := 0; k < inFlight; k++ {
				require.NoError(t, <-errs)
			}
		}
		for _, v := range views {
			require.NoError(t, v.Close())
		}
	}
}

// v24Assign gives each of len(ends) requests in flight, of req bytes from
// off on, one of the views (their indexes, in request order): the view
// whose last read ended where the request starts, if any (the one before
// it, as the kernel's read-ahead goes on), else one at random.
func v24Assign(rng *rand.Rand, ends []int64, off int64, req int) []int {
	perm := rng.Perm(len(ends))
	for k := range perm {
		for j := range ends {
			if ends[j] == off+int64(k*req) {
				perm[k], perm[slices.Index(perm, j)] = j, perm[k]
			}
		}
	}
	return perm
}

// v24ReadRight reads size bytes at at from v, from a goroutine of a test,
// and returns where the read ended, or an error when it failed or served
// other bytes than want's.
func v24ReadRight(v *View, want []byte, at int64, size int) (int64, error) {
	b := make([]byte, size)
	n, err := v.ReadAt(b, at)
	if err != nil && !errors.Is(err, io.EOF) {
		return 0, err
	}
	end := min(at+int64(size), int64(len(want)))
	if int64(n) != end-at || !bytes.Equal(want[at:end], b[:n]) {
		return 0, fmt.Errorf("read %d at %d: %d bytes, not the rendering's %d", size, at, n, end-at)
	}
	return end, nil
}

// Views from offsets (inside big batches, at their starts, in small
// ones) read in turn as the kernel's requests come: a view whose
// rendering starts past its first segment's start reads on into batches
// other views marked.
func TestView24ViewsFromOffsetsInTurn(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{})
	top, err := l.CreateTopic("t", 1, small("segment.bytes=1500000"))
	require.NoError(t, err)
	p, _ := top.Partition(0)
	rng := rand.New(rand.NewSource(advSeed(2407)))
	var bases []record.Offset
	for i := 0; i < 14; i++ {
		var recs []Record
		if rng.Intn(4) == 0 {
			recs = v24Records([]string{fmt.Sprint("small-", i), "x"})
		} else {
			recs = v24Records(v24Big(rng, fmt.Sprint("o", i), 200+rng.Intn(500)))
		}
		base, err := p.Append(recs)
		require.NoError(t, err)
		bases = append(bases, base)
	}
	end := p.EndOffset()
	froms := []record.Offset{bases[1], bases[1] + 1, bases[5] + 77, bases[9] - 1, bases[11] + 3, end - 2}
	for _, from := range froms {
		want := renderAll(t, p, Values, from)
		for round := 0; round < 3; round++ {
			v24DropMarks(p)
			req := []int{4096, 128 << 10, 131071, 1 + rng.Intn(300000)}[rng.Intn(4)]
			views := make([]*View, 3)
			ends := make([]int64, 3)
			for k := range views {
				views[k], err = p.NewView(Values, from)
				require.NoError(t, err)
				ends[k] = -1
			}
			what := fmt.Sprintf("from %d round %d req %d", from, round, req)
			for off := int64(0); off < int64(len(want)); off += 2 * int64(req) {
				// Two requests: the second first, on a view of its own;
				// the first on the view that ended where it starts.
				first, second := -1, -1
				for k := range views {
					if ends[k] == off {
						first = k
					}
				}
				if first < 0 {
					first = rng.Intn(3)
				}
				second = (first + 1 + rng.Intn(2)) % 3
				if off+int64(req) < int64(len(want)) {
					ends[second] = v24Read(t, views[second], want, off+int64(req), req, what)
				}
				ends[first] = v24Read(t, views[first], want, off, req, what)
			}
			for _, v := range views {
				require.NoError(t, v.Close())
			}
		}
	}
}
