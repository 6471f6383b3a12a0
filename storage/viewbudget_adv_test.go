package storage

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/internal/broker"
	"github.com/logfs/logfs/record"
)

// Adversarial tests of the budget of view indexes' entries (viewbudget.go):
// reads inside big batches with marks in thinned segments, ReadCommitted
// views over thinned indexes, sidecars swapped under thinned indexes, the
// accounting back where it started once logs close, and thinning racing
// lookups, appends and retention.

// advBudgetLog writes a partition of segments of about 600 kB of small
// batches and big ones (markable, with records longer than a window), and
// closes it; it returns the directory.
func advBudgetLog(t *testing.T, rng *rand.Rand, appends int) string {
	dir := t.TempDir()
	l, err := Open(dir, Options{Logger: testLogger(t), RetentionCheckInterval: -1})
	require.NoError(t, err)
	top, err := l.CreateTopic("t", 1, small("segment.bytes=600000", "index.interval.bytes=1000"))
	require.NoError(t, err)
	p, _ := top.Partition(0)
	for i := 0; i < appends; i++ {
		_, err := p.Append(advValues(rng, i, i%5 == 2))
		require.NoError(t, err)
	}
	require.Greater(t, len(p.segments()), 4)
	require.NoError(t, l.Close())
	return dir
}

// budgetInvariant requires that indexBytes is what the registered indexes'
// entries take, and that each is charged for what its entries take now.
func budgetInvariant(t *testing.T) {
	t.Helper()
	set := indexed.others(nil)
	var sum int64
	for _, v := range set {
		v.mu.Lock()
		n := int64(cap(v.entries)) * viewEntryBytes
		charged, gone := v.charged, v.gone
		v.mu.Unlock()
		require.False(t, gone, "a gone index is still in the budget")
		require.Equal(t, n, charged, "an index charged for other than its entries")
		sum += n
	}
	require.Equal(t, sum, indexBytes.Load(), "indexBytes is not what the registered indexes take")
}

// thinnedWithMarks counts p's indexes that are thinned and hold marks.
func thinnedWithMarks(p *Partition) (thinned, withMarks int) {
	for _, s := range p.segments() {
		s.views.mu.Lock()
		for _, v := range s.views.byFormat {
			if v == nil {
				continue
			}
			v.mu.Lock()
			if v.spacing > viewInterval {
				thinned++
				if len(v.inner) > 0 {
					withMarks++
				}
			}
			v.mu.Unlock()
		}
		s.views.mu.Unlock()
	}
	return thinned, withMarks
}

// Big batches get marks (innerAt is keyed by a batch's position, and the
// index had an entry at each big batch); then every sealed index is
// thinned (once, and as far as it goes), dropping most of those entries.
// Reads inside the big batches,
// from fresh views and from views opened at offsets inside them, serve the
// log's bytes, and sizes match, in both formats.
func TestViewBudgetAdvMarksInThinnedSegments(t *testing.T) {
	rng := rand.New(rand.NewSource(advSeed(4141)))
	dir := advBudgetLog(t, rng, 160)
	for _, ro := range []bool{false, true} {
		t.Run(fmt.Sprint("read-only, thinned as far as it goes=", ro), func(t *testing.T) {
			l := openLog(t, dir, Options{ReadOnly: ro})
			p, err := l.Partition("t", 0)
			require.NoError(t, err)
			for _, f := range []Format{Values, JSONL} {
				want, starts := renderStarts(t, p, f)
				// Marks first, with the whole budget: reads everywhere.
				v, err := p.NewView(f, 0)
				require.NoError(t, err)
				for i := 0; i < raceFewer(200); i++ {
					checkRead(t, v, want, rng.Int63n(int64(len(want))), 1+rng.Intn(8<<10), true, fmt.Sprintf("%v marking %d", f, i))
				}
				require.NoError(t, v.Close())
				func() {
					if ro {
						// As far as it goes: entries[0] alone.
						defer func(b int64) { indexBudget = b }(indexBudget)
						withIndexBudget(t, 0)
						makeIndexRoom(nil)
					} else {
						// Once: an entry every 128 KiB, kept where the
						// thinned index leaves them (no sidecar taken,
						// room in the budget).
						segs := p.segments()
						for _, s := range segs[:len(segs)-1] {
							vi := s.views.get(s, f)
							vi.mu.Lock()
							vi.sidecar = false
							vi.mu.Unlock()
							vi.thin()
						}
					}
					thinned, marked := thinnedWithMarks(p)
					require.Greater(t, thinned, 2, "%v: indexes thinned", f)
					segs := p.segments()
					active := segs[len(segs)-1]
					if vi := active.views.get(active, f); true {
						vi.mu.Lock()
						spacing := vi.spacing
						vi.mu.Unlock()
						require.Zero(t, spacing, "%v: the active segment's index was thinned", f)
					}
					require.Greater(t, marked, 0, "%v: thinned indexes with marks", f)
					ps := advPositions(want)
					for i := 0; i < raceFewer(200); i++ {
						v, err := p.NewView(f, 0)
						require.NoError(t, err)
						at := rng.Int63n(int64(len(want)))
						if i%2 == 0 {
							at = min(max(ps[rng.Intn(len(ps))], 0), int64(len(want))-1)
						}
						checkRead(t, v, want, at, 1+rng.Intn(40<<10), true, fmt.Sprintf("%v thinned %d", f, i))
						// and on from there, as a streaming read
						checkRead(t, v, want, min(at+1, int64(len(want))-1), 1+rng.Intn(40<<10), true, fmt.Sprintf("%v thinned on %d", f, i))
						require.NoError(t, v.Close())
					}
					for i := 0; i < raceFewer(12); i++ {
						off := record.Offset(rng.Int63n(int64(p.EndOffset())))
						wantFrom := want[starts[off]:]
						v, err := p.NewView(f, off)
						require.NoError(t, err)
						size, err := v.Size()
						require.NoError(t, err)
						require.Equal(t, int64(len(wantFrom)), size, "%v from offset %d", f, off)
						if len(wantFrom) > 0 {
							checkRead(t, v, wantFrom, rng.Int63n(int64(len(wantFrom))), 1+rng.Intn(8<<10), true, fmt.Sprintf("%v from offset %d", f, off))
						}
						require.NoError(t, v.Close())
					}
					got, err := readView(t, mustView(t, p, f), 5000)
					require.NoError(t, err)
					require.True(t, bytes.Equal(want, got), "%v: a sequential read of thinned indexes", f)
					budgetInvariant(t)
				}()
			}
		})
	}
}

// ReadCommitted views (hidden aborted batches, an open transaction, markers)
// of many small segments, every sealed index thinned at each lookup
// (budget 0) and again made whole from sidecars: sizes and bytes are the
// model's, from the start and from offsets, in both isolation levels.
func TestViewBudgetAdvReadCommittedThinned(t *testing.T) {
	rng := rand.New(rand.NewSource(advSeed(4242)))
	dir := t.TempDir()
	w := newTxnWriter(t, dir, broker.Options{SegmentBytes: 60000})
	w.scenario(rng, 5000, true)
	require.NoError(t, w.p.Close())
	for _, iso := range []Isolation{ReadCommitted, ReadUncommitted} {
		t.Run(iso.String(), func(t *testing.T) {
			l := openLog(t, dir, Options{Isolation: iso})
			p, err := l.Partition("tx", 0)
			require.NoError(t, err)
			require.Greater(t, len(p.segments()), 5)
			for _, budget := range []int64{64 << 20, 0, 1 << 30} {
				withIndexBudget(t, budget)
				thins := indexThins.Load()
				if budget == 0 {
					makeIndexRoom(nil)
					require.Greater(t, indexThins.Load(), thins, "nothing thinned")
				}
				for _, f := range []Format{Values, JSONL} {
					for _, start := range []record.Offset{0, p.EndOffset() / 3, p.EndOffset() / 2, p.EndOffset() - 2} {
						checkView(t, p, f, start, w.expected(t, p, f, iso, start), rng)
					}
				}
				budgetInvariant(t)
			}
		})
	}
}

// Each sealed segment's sidecar swapped while its index is thinned: for
// another segment's, for one cut short, for garbage, and for the index's
// own thinned to a few entries (as right, only sparser, but not what the
// index knew). Reads serve the log's bytes, and none is taken.
func TestViewBudgetAdvSidecarSwappedWhileThinned(t *testing.T) {
	rng := rand.New(rand.NewSource(advSeed(4343)))
	dir := budgetLog(t, rng)
	for _, swap := range []string{"another segment's", "cut short", "garbage", "sparser"} {
		t.Run(swap, func(t *testing.T) {
			l := openLog(t, dir, Options{})
			p, err := l.Partition("t", 0)
			require.NoError(t, err)
			want, starts := renderStarts(t, p, Values)
			got, err := readView(t, mustView(t, p, Values), 64<<10)
			require.NoError(t, err)
			require.True(t, bytes.Equal(want, got))
			withIndexBudget(t, 0)
			makeIndexRoom(nil)
			segs := p.segments()
			sealed := segs[:len(segs)-1]
			orig := make([][]byte, len(sealed))
			for i, s := range sealed {
				orig[i], err = os.ReadFile(s.viewIndexPath())
				require.NoError(t, err)
			}
			t.Cleanup(func() { // the next subtest starts from the sidecars as logfs wrote them
				for i, s := range sealed {
					_ = os.WriteFile(s.viewIndexPath(), orig[i], 0o644)
				}
			})
			for i, s := range sealed {
				var b []byte
				switch swap {
				case "another segment's":
					b = orig[(i+1)%len(orig)]
				case "cut short":
					b = orig[i][:len(orig[i])-1-rng.Intn(len(orig[i])-1)]
				case "garbage":
					b = bytes.Repeat([]byte{0xa5}, len(orig[i]))
				case "sparser":
					x, err := readViewIndex(s)
					require.NoError(t, err)
					x.entries = []viewEntry{x.entries[0], x.entries[len(x.entries)/2]}
					require.NoError(t, writeViewIndex(s, x))
					continue
				}
				require.NoError(t, os.WriteFile(s.viewIndexPath(), b, 0o644))
			}
			reloads := indexReloads.Load()
			indexBudget = 1 << 30
			for i := 0; i < raceFewer(300); i++ {
				v, err := p.NewView(Values, 0)
				require.NoError(t, err)
				checkRead(t, v, want, rng.Int63n(int64(len(want))), 1+rng.Intn(16<<10), true, fmt.Sprint(swap, " read ", i))
				require.NoError(t, v.Close())
			}
			for i := 0; i < raceFewer(20); i++ {
				off := record.Offset(rng.Int63n(int64(p.EndOffset())))
				v, err := p.NewView(Values, off)
				require.NoError(t, err)
				size, err := v.Size()
				require.NoError(t, err)
				require.Equal(t, int64(len(want)-starts[off]), size, "%s: from offset %d", swap, off)
				require.NoError(t, v.Close())
			}
			require.Equal(t, reloads, indexReloads.Load(), "%s sidecar taken", swap)
			budgetInvariant(t)
		})
	}
}

// Logs opened, read in every format (thinned, made whole, damaged and
// replaced indexes, views left open across Log.Close), and closed: the
// budget's count and set are back where they were, and while open,
// indexBytes is what the registered indexes' entries take.
func TestViewBudgetAdvAccountingReturns(t *testing.T) {
	rng := rand.New(rand.NewSource(advSeed(4444)))
	dirs := []string{budgetLog(t, rng), budgetLog(t, rng), budgetLog(t, rng)}
	removeSidecars(t, dirs[2])
	setBefore := indexed.len()
	bytesBefore := indexBytes.Load()
	for round := 0; round < 2; round++ {
		var logs []*Log
		var held []*View
		for k, dir := range dirs {
			l, err := Open(dir, Options{ReadOnly: k == 1, Logger: testLogger(t), RetentionCheckInterval: -1})
			require.NoError(t, err)
			logs = append(logs, l)
			p, err := l.Partition("t", 0)
			require.NoError(t, err)
			for _, f := range []Format{Values, JSONL} {
				want := renderAll(t, p, f, 0)
				withIndexBudget(t, 3000)
				v, err := p.NewView(f, 0)
				require.NoError(t, err)
				got, err := readView(t, v, 16<<10)
				require.NoError(t, err)
				require.True(t, bytes.Equal(want, got))
				for i := 0; i < raceFewer(50); i++ {
					checkRead(t, v, want, rng.Int63n(int64(len(want))), 1+rng.Intn(8<<10), true, fmt.Sprint("read ", i))
				}
				indexBudget = 1 << 30 // made whole again where a sidecar is
				for i := 0; i < raceFewer(50); i++ {
					checkRead(t, v, want, rng.Int63n(int64(len(want))), 1+rng.Intn(8<<10), true, fmt.Sprint("read ", i))
				}
				budgetInvariant(t)
				if round == 1 && f == JSONL {
					held = append(held, v) // open across Log.Close
				} else {
					require.NoError(t, v.Close())
				}
			}
			if round == 1 && k == 0 {
				// A damaged segment whose index gets replaced.
				segs := p.segments()
				s := segs[len(segs)/2]
				bs := batchesOf(t, s, false)
				writeLog(t, s, []byte{0xff, 0xfe}, int64(bs[len(bs)/2].Pos)+record.HeaderSize+3)
				withIndexBudget(t, 0)
				makeIndexRoom(nil)
				v, err := p.NewView(Values, 0)
				require.NoError(t, err)
				_, err = readView(t, v, 4096)
				require.Error(t, err)
				require.NoError(t, v.Close())
				budgetInvariant(t)
				indexBudget = 64 << 20
			}
		}
		for _, l := range logs {
			require.NoError(t, l.Close())
		}
		for _, v := range held {
			_, _ = v.ReadAt(make([]byte, 100), 0)
			require.NoError(t, v.Close())
		}
		setAfter := indexed.len()
		require.Equal(t, setBefore, setAfter, "round %d: indexes left registered after the logs closed", round)
		require.Equal(t, bytesBefore, indexBytes.Load(), "round %d: indexBytes after the logs closed", round)
	}
}

// Readers at random places, a goroutine thinning everything with makeIndexRoom,
// an appender rolling segments, and retention deleting the oldest, all at
// once (for -race): every byte served is the log's or a read fails with
// ErrDeleted or io.EOF; after the log closes the budget is where it was.
func TestViewBudgetAdvRetentionRace(t *testing.T) {
	rng := rand.New(rand.NewSource(advSeed(4545)))
	dir := budgetLog(t, rng)
	bytesBefore := indexBytes.Load()
	clk := newClock()
	l, err := Open(dir, Options{Now: clk.Now, Logger: testLogger(t), RetentionCheckInterval: 10 * time.Millisecond})
	require.NoError(t, err)
	top, err := l.Topic("t")
	require.NoError(t, err)
	p, err := l.Partition("t", 0)
	require.NoError(t, err)
	want := map[Format][]byte{Values: renderAll(t, p, Values, 0), JSONL: renderAll(t, p, JSONL, 0)}
	withIndexBudget(t, 1000)
	rounds := 150
	if raceEnabled {
		rounds = 60
	}
	// Retention may pass offset 0 (no view opens there) or delete a
	// segment a view reads.
	wait := budgetReaders(p, want, 5*rounds, 5, rng, func(err error) bool {
		return errors.Is(err, ErrOffsetOutOfRange) || errors.Is(err, io.EOF) || errors.Is(err, ErrDeleted)
	})
	var wg sync.WaitGroup
	var stop atomic.Bool
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			makeIndexRoom(nil)
			time.Sleep(100 * time.Microsecond)
		}
	}()
	for i := 0; i < 40; i++ {
		_, err := p.Append(advValues(rng, i, i%9 == 4))
		require.NoError(t, err)
		if i == 10 {
			require.NoError(t, top.SetConfig(small("segment.bytes=200000", "index.interval.bytes=1000", "retention.bytes=1500000", "file.delete.delay.ms=0")))
			clk.Advance(31 * time.Second) // past the first run's delay
		}
		time.Sleep(time.Millisecond)
	}
	deadline := time.Now().Add(5 * time.Second)
	for p.StartOffset() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	require.NotZero(t, p.StartOffset(), "retention deleted nothing")
	stop.Store(true)
	wg.Wait()
	for _, err := range wait() {
		t.Error(err)
	}
	require.NoError(t, l.Close())
	require.Equal(t, bytesBefore, indexBytes.Load(), "indexBytes after the log closed")
}

// fetchedBatch is a leader's batch of one record at base.
func fetchedBatch(t *testing.T, base record.Offset, key, value []byte) []byte {
	var b record.Builder
	b.Append(1_700_000_000_000, key, value, nil)
	raw, err := b.BuildWith(record.BuildOptions{ProducerID: 7, ProducerEpoch: 1, BaseSequence: int32(base)})
	require.NoError(t, err)
	raw = append([]byte(nil), raw...)
	record.SetBaseOffset(raw, base)
	return raw
}

// A follower copy reset (ResetFetched) at the same base, with other
// records of the same byte sizes and the same last batch, while a view of
// the old copy holds a thinned index of its first segment: the new first
// segment's sidecar, at the same path, has the old one's size, total and
// last batch CRC, but its entries place the batches elsewhere in the
// rendering. The old view must not take them: it reads the old copy's
// bytes. (It served another batch's bytes before the index remembered
// which entries it had.)
func TestViewBudgetAdvResetSidecarOfAnotherCopy(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, Options{Gaps: true})
	topic, err := l.CreateTopic("copy", 1, small("segment.bytes=150000"))
	require.NoError(t, err)
	p, err := topic.Partition(0)
	require.NoError(t, err)
	rep := func(c byte, n int) []byte { return bytes.Repeat([]byte{c}, n) }
	c, d := fetchedBatch(t, 2, nil, rep('c', 100)), fetchedBatch(t, 3, nil, rep('d', 70000))
	// a renders 70001 bytes then b 35000; a2 35000 then b2 70001: the same
	// sizes in the log (a null key takes a byte, the lengths' varints
	// make up the rest).
	a, b := fetchedBatch(t, 0, nil, rep('a', 70000)), fetchedBatch(t, 1, rep('k', 34999), rep('b', 34999))
	a2, b2 := fetchedBatch(t, 0, rep('k', 34999), rep('x', 34999)), fetchedBatch(t, 1, nil, rep('y', 70000))
	require.Equal(t, len(a), len(a2))
	require.Equal(t, len(b), len(b2))
	require.NoError(t, p.ResetFetched(0, [][]byte{a, b, c, d}))
	require.Len(t, p.segments(), 2)
	var want []byte
	for _, v := range [][]byte{rep('a', 70000), rep('b', 34999), rep('c', 100), rep('d', 70000)} {
		want = append(append(want, v...), '\n')
	}
	got, err := readView(t, mustView(t, p, Values), 64<<10)
	require.NoError(t, err)
	require.True(t, bytes.Equal(want, got))
	old := mustView(t, p, Values) // reads nothing yet: its first read locates
	withIndexBudget(t, 0)
	makeIndexRoom(nil)
	vi := old.idx[0]
	vi.mu.Lock()
	spacing := vi.spacing
	vi.mu.Unlock()
	require.Greater(t, spacing, viewInterval, "the old first segment's index is not thinned")
	require.NoError(t, p.ResetFetched(0, [][]byte{a2, b2, c, d}))
	// The new copy's sidecar is at the old segment's name; the old segment,
	// renamed *.deleted (segment.unlinked), must not take it.
	_, err = os.Stat(old.segs[0].viewIndexPath())
	require.NoError(t, err, "no sidecar of the new copy at the old segment's name")
	indexBudget = 1 << 30 // room to make the old index whole
	for _, at := range []int64{40000, 69990, 70001, 100000, 105001} {
		buf := make([]byte, 10)
		n, err := old.ReadAt(buf, at)
		require.NoError(t, err)
		require.Equal(t, string(want[at:at+10]), string(buf[:n]), "the old copy's view at %d", at)
	}
	var want2 []byte
	for _, v := range [][]byte{rep('x', 34999), rep('y', 70000), rep('c', 100), rep('d', 70000)} {
		want2 = append(append(want2, v...), '\n')
	}
	require.Equal(t, string(want2), viewString(t, p, 0), "the new copy")
}

// A segment with bad bytes in the middle, learned before any thinning:
// views from offsets after the bad bytes (which start from the entry at
// the first valid batch after them) and reads across the partition give
// the same sizes and bytes, or the same errors, once every sealed index
// is thinned as far as it goes.
func TestViewBudgetAdvHolesKeepTheirEntries(t *testing.T) {
	rng := rand.New(rand.NewSource(advSeed(4646)))
	dir := budgetLog(t, rng)
	l, err := Open(dir, Options{ReadOnly: true, Logger: testLogger(t), RetentionCheckInterval: -1}) // no Check: the log is damaged
	require.NoError(t, err)
	defer l.Close()
	p, err := l.Partition("t", 0)
	require.NoError(t, err)
	segs := p.segments()
	s := segs[len(segs)/2]
	bs := batchesOf(t, s, false)
	bad := bs[len(bs)/3]
	writeLog(t, s, []byte{0xff, 0xfe}, int64(bad.Pos)+record.HeaderSize+3)
	var offs []record.Offset
	for _, b := range bs[len(bs)/3+1:] {
		offs = append(offs, b.BaseOffset, b.LastOffset())
	}
	offs = append(offs, segs[len(segs)/2+1].base, 0, s.base)
	type result struct {
		size int64
		head string
		err  string
	}
	look := func(f Format) []result {
		var out []result
		for _, off := range offs {
			v, err := p.NewView(f, off)
			if err != nil {
				out = append(out, result{err: err.Error()})
				continue
			}
			size, err := v.Size()
			r := result{size: size}
			if err != nil {
				r.err = err.Error()
			}
			buf := make([]byte, 3000)
			n, err := v.ReadAt(buf, 0)
			if err != nil && !errors.Is(err, io.EOF) {
				r.err += " / " + err.Error()
			}
			r.head = string(buf[:n])
			require.NoError(t, v.Close())
			out = append(out, r)
		}
		return out
	}
	for _, f := range []Format{Values, JSONL} {
		before := look(f)
		withIndexBudget(t, 0)
		makeIndexRoom(nil)
		after := look(f)
		indexBudget = 64 << 20
		for i := range before {
			require.Equal(t, before[i], after[i], "%v: the view from offset %d", f, offs[i])
		}
		vi := s.views.get(s, f)
		require.True(t, vi.hasHoles())
	}
}
