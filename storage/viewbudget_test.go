package storage

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/record"
)

// Tests of the budget of view indexes' entries (viewbudget.go): indexes
// thinned to stay in it, and made whole again from their sidecar, serve
// what they served before, or an error; never other bytes. The whole
// package also runs with -logfs.index-budget=0, which thins the index of
// every sealed segment but the one in use at each lookup, as far as it
// goes.

// budgetLog writes a partition of many small segments (about 200 kB, 20
// entries of a view index each) of small batches, a big one (that gets
// marks) now and then, and closes it; it returns the directory.
func budgetLog(t *testing.T, rng *rand.Rand) string {
	dir := t.TempDir()
	l, err := Open(dir, Options{Logger: testLogger(t), RetentionCheckInterval: -1})
	require.NoError(t, err)
	top, err := l.CreateTopic("t", 1, small("segment.bytes=200000", "index.interval.bytes=1000"))
	require.NoError(t, err)
	p, _ := top.Partition(0)
	for i := 0; i < 3000; i++ {
		recs := make([]Record, 1+rng.Intn(8))
		if i%100 == 50 {
			recs = make([]Record, 700+rng.Intn(300)) // over innerMin
		}
		for j := range recs {
			recs[j].Value = fmt.Appendf(nil, "%d-%d-%s", i, j, bytes.Repeat([]byte{byte('a' + rng.Intn(26))}, 10+rng.Intn(190)))
		}
		_, err := p.Append(recs)
		require.NoError(t, err)
	}
	require.Greater(t, len(p.segments()), 20)
	require.NoError(t, l.Close())
	return dir
}

// withIndexBudget sets indexBudget for the test, forgetting what the last
// makeIndexRoom could not reach.
func withIndexBudget(t *testing.T, n int64) {
	old := indexBudget
	indexBudget = n
	indexRoomFloor.Store(0)
	t.Cleanup(func() { indexBudget = old; indexRoomFloor.Store(0) })
}

// budgetHeld returns the bytes the entries of p's indexes take, those of
// its active segment aside, and the most one index takes.
func budgetHeld(p *Partition) (held, most int64) {
	segs := p.segments()
	for _, s := range segs[:len(segs)-1] {
		s.views.mu.Lock()
		for _, v := range s.views.byFormat {
			if v == nil {
				continue
			}
			v.mu.Lock()
			held += v.charged
			most = max(most, v.charged)
			v.mu.Unlock()
		}
		s.views.mu.Unlock()
	}
	return held, most
}

// renderStarts returns p rendered in format f from its start, as
// renderAll does, and where each offset's record starts in it: the
// rendering from an offset is the rest from there.
func renderStarts(t *testing.T, p *Partition, f Format) ([]byte, map[record.Offset]int) {
	r, err := p.NewReader(p.StartOffset())
	require.NoError(t, err)
	defer r.Close()
	var out []byte
	starts := map[record.Offset]int{}
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out, starts
		}
		require.NoError(t, err)
		starts[rec.Offset] = len(out)
		out = f.Append(out, rec)
	}
}

// raceFewer is n, or a quarter of it under the race detector, whose
// reads are ten times slower.
func raceFewer(n int) int {
	if raceEnabled {
		return max(n/4, 1)
	}
	return n
}

// checkRead reads n bytes at at of v and requires what want holds there;
// whole says the read must serve all of it.
func checkRead(t *testing.T, v *View, want []byte, at int64, n int, whole bool, what string) {
	t.Helper()
	buf := make([]byte, n)
	k, err := v.ReadAt(buf, at)
	if at+int64(k) > int64(len(want)) || !bytes.Equal(buf[:k], want[at:at+int64(k)]) {
		t.Fatalf("%s: a read of %d bytes at %d served %d bytes other than the log's", what, n, at, k)
	}
	if whole && k < min(n, len(want)-int(at)) {
		t.Fatalf("%s: a read of %d bytes at %d served %d (%v)", what, n, at, k, err)
	}
}

// A partition read whole, then at random positions, then from views
// opened at random offsets, in both formats, with a budget that holds the
// entries of two or three segments: every byte is the log's, the entries
// held stay within the budget (and the one index in use), and indexes were
// thinned, and made whole from the sidecar where there is one. As written
// by logfs (sidecars), read-only, and with the sidecars gone (a Kafka
// data directory).
func TestViewBudgetServesTheSameBytes(t *testing.T) {
	rng := rand.New(rand.NewSource(advSeed(3131)))
	dir := budgetLog(t, rng)
	for _, setup := range []string{"writable", "read-only", "no sidecars"} {
		t.Run(setup, func(t *testing.T) {
			if setup == "no sidecars" {
				removeSidecars(t, dir)
			}
			l := openLog(t, dir, Options{ReadOnly: setup != "writable"})
			p, err := l.Partition("t", 0)
			require.NoError(t, err)
			withIndexBudget(t, 2000)
			reads, froms := raceFewer(300), raceFewer(40)
			for _, f := range []Format{Values, JSONL} {
				thins, reloads := indexThins.Load(), indexReloads.Load()
				want, starts := renderStarts(t, p, f)
				v, err := p.NewView(f, 0)
				require.NoError(t, err)
				got, err := readView(t, v, 4096)
				require.NoError(t, err)
				require.True(t, bytes.Equal(want, got), "%v: a sequential read", f)
				held, most := budgetHeld(p)
				require.LessOrEqual(t, held, indexBudget+most, "%v: entries held after a sequential read", f)
				for i := 0; i < reads; i++ {
					at := rng.Int63n(int64(len(want)))
					checkRead(t, v, want, at, 1+rng.Intn(64<<10), true, fmt.Sprintf("%v random %d", f, i))
					held, most := budgetHeld(p)
					require.LessOrEqual(t, held, indexBudget+most, "%v: entries held after random read %d", f, i)
				}
				require.NoError(t, v.Close())
				// Views from an offset: where each starts comes from the
				// entries too (renderedBefore).
				end := p.EndOffset()
				for i := 0; i < froms; i++ {
					off := record.Offset(rng.Int63n(int64(end)))
					at, ok := starts[off]
					require.True(t, ok, "no record at offset %d", off)
					wantFrom := want[at:]
					v, err := p.NewView(f, off)
					require.NoError(t, err)
					size, err := v.Size()
					require.NoError(t, err)
					require.Equal(t, int64(len(wantFrom)), size, "%v from offset %d", f, off)
					checkRead(t, v, wantFrom, 0, 1+rng.Intn(8<<10), true, fmt.Sprintf("%v from offset %d", f, off))
					require.NoError(t, v.Close())
				}
				require.Greater(t, indexThins.Load(), thins, "%v: no index thinned", f)
				// Room in the budget: the thinned indexes with a sidecar
				// are made whole on their next lookup.
				indexBudget = 1 << 30
				v, err = p.NewView(f, 0)
				require.NoError(t, err)
				for i := 0; i < reads/3; i++ {
					checkRead(t, v, want, rng.Int63n(int64(len(want))), 1+rng.Intn(16<<10), true, fmt.Sprintf("%v with room %d", f, i))
				}
				require.NoError(t, v.Close())
				indexBudget = 2000
				if f == Values && setup != "no sidecars" {
					require.Greater(t, indexReloads.Load(), reloads, "%v: none made whole from its sidecar", f)
				} else {
					require.Equal(t, indexReloads.Load(), reloads, "%v: made whole from what?", f)
				}
			}
		})
	}
}

// A segment's log damaged while its index is thinned: reads start from
// the entries left, or from the sidecar's (which knows nothing of the
// damage). Either way, every read serves the log's bytes as they were, or
// an error, and a read through the bad batch fails.
func TestViewBudgetLogDamagedWhileThinned(t *testing.T) {
	for _, sidecars := range []bool{true, false} {
		t.Run(fmt.Sprint("sidecars=", sidecars), func(t *testing.T) {
			rng := rand.New(rand.NewSource(advSeed(3232)))
			dir := budgetLog(t, rng)
			if !sidecars {
				removeSidecars(t, dir)
			}
			l, err := Open(dir, Options{ReadOnly: true, Logger: testLogger(t), RetentionCheckInterval: -1})
			require.NoError(t, err)
			defer l.Close()
			p, err := l.Partition("t", 0)
			require.NoError(t, err)
			want := map[Format][]byte{}
			for _, f := range []Format{Values, JSONL} {
				want[f] = renderAll(t, p, f, 0)
				v, err := p.NewView(f, 0)
				require.NoError(t, err)
				got, err := readView(t, v, 64<<10)
				require.NoError(t, err)
				require.True(t, bytes.Equal(want[f], got))
				require.NoError(t, v.Close())
			}
			withIndexBudget(t, 0)
			makeIndexRoom(nil)
			segs := p.segments()
			s := segs[len(segs)/2]
			batches := batchesOf(t, s, false)
			bad := batches[len(batches)/3]
			writeLog(t, s, []byte{0xff, 0xfe}, int64(bad.Pos)+record.HeaderSize+3) // in its records: the CRC fails
			for _, f := range []Format{Values, JSONL} {
				for i := 0; i < 200; i++ {
					v, err := p.NewView(f, 0)
					require.NoError(t, err)
					checkRead(t, v, want[f], rng.Int63n(int64(len(want[f]))), 1+rng.Intn(16<<10), false, fmt.Sprintf("%v read %d", f, i))
					require.NoError(t, v.Close())
				}
				v, err := p.NewView(f, 0)
				require.NoError(t, err)
				got, err := readView(t, v, 4096)
				require.Error(t, err, "%v: a sequential read through the bad batch", f)
				require.True(t, bytes.HasPrefix(want[f], got), "%v: a sequential read served other bytes", f)
				require.NoError(t, v.Close())
			}
		})
	}
}

// removeSidecars removes the values sidecars of dir's partition t-0, as
// in a data directory Kafka wrote.
func removeSidecars(t *testing.T, dir string) {
	sidecars, err := filepath.Glob(filepath.Join(dir, "t-0", "*.viewindex"))
	require.NoError(t, err)
	require.NotEmpty(t, sidecars)
	for _, f := range sidecars {
		require.NoError(t, os.Remove(f))
	}
}

// Readers of both formats at random positions while an appender rolls
// segments, with a budget that holds one segment's entries: every byte is
// the log's, and the active segment keeps its entries (the appender adds
// to them).
func TestViewBudgetReadersWhileAppending(t *testing.T) {
	rng := rand.New(rand.NewSource(advSeed(3333)))
	dir := budgetLog(t, rng)
	l := openLog(t, dir, Options{})
	p, err := l.Partition("t", 0)
	require.NoError(t, err)
	want := map[Format][]byte{Values: renderAll(t, p, Values, 0), JSONL: renderAll(t, p, JSONL, 0)}
	withIndexBudget(t, 600)
	rounds := 300
	if raceEnabled {
		rounds = 100
	}
	wait := budgetReaders(p, want, rounds, rounds, rng, nil)
	for i := 0; i < 60; i++ {
		_, err := p.Append(advValues(rng, i, i%11 == 5))
		require.NoError(t, err)
	}
	for _, err := range wait() {
		t.Error(err)
	}
	active := p.segments()[len(p.segments())-1]
	vi := active.views.get(active, Values)
	vi.mu.Lock()
	spacing := vi.spacing
	vi.mu.Unlock()
	require.Zero(t, spacing, "the active segment's index was thinned")
	got, err := readView(t, mustView(t, p, Values), 8192)
	require.NoError(t, err)
	require.True(t, bytes.Equal(renderAll(t, p, Values, 0), got))
}

// budgetReaders starts four readers, two of each format, that read rounds
// times at random positions of p's views, a new view every perView reads,
// and check what they serve against want (what the log held when they
// started: it may grow under them). An error fails a reader unless its
// read reached past want, or ok says it may happen; a view that does not
// open, unless ok says so too. wait waits for them and returns their
// failures.
func budgetReaders(p *Partition, want map[Format][]byte, rounds, perView int, rng *rand.Rand, ok func(error) bool) (wait func() []error) {
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for k := 0; k < 4; k++ {
		f := []Format{Values, JSONL}[k%2]
		seed := rng.Int63()
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := budgetRead(p, f, want[f], rounds, perView, rand.New(rand.NewSource(seed)), ok); err != nil {
				errs <- err
			}
		}()
	}
	return func() []error {
		wg.Wait()
		close(errs)
		var out []error
		for err := range errs {
			out = append(out, err)
		}
		return out
	}
}

// budgetRead is one of budgetReaders' readers.
func budgetRead(p *Partition, f Format, want []byte, rounds, perView int, rng *rand.Rand, ok func(error) bool) error {
	buf := make([]byte, 32<<10)
	var v *View
	defer func() {
		if v != nil {
			v.Close()
		}
	}()
	for i := 0; i < rounds; i++ {
		if i%perView == 0 {
			if v != nil {
				v.Close()
			}
			var err error
			if v, err = p.NewView(f, 0); err != nil {
				if ok != nil && ok(err) {
					return nil
				}
				return err
			}
		}
		at := rng.Int63n(int64(len(want)))
		n, err := v.ReadAt(buf[:1+rng.Intn(len(buf))], at)
		if err != nil && at+int64(n) < int64(len(want)) && !(ok != nil && ok(err)) {
			return fmt.Errorf("%v: a read at %d: %d bytes, %w", f, at, n, err)
		}
		n = min(n, len(want)-int(at)) // the log grew past want
		if !bytes.Equal(buf[:n], want[at:at+int64(n)]) {
			return fmt.Errorf("%v: a read at %d served other bytes", f, at)
		}
	}
	return nil
}

func mustView(t *testing.T, p *Partition, f Format) *View {
	v, err := p.NewView(f, 0)
	require.NoError(t, err)
	t.Cleanup(func() { v.Close() })
	return v
}

// A sidecar that changed while its index was thinned (planted, or left by
// another logfs) is not taken unless it says what the index knew: one
// whose entries and total are each a byte off is passed over, and every
// read serves the log's bytes from the entries left.
func TestViewBudgetSidecarChangedWhileThinned(t *testing.T) {
	rng := rand.New(rand.NewSource(advSeed(3434)))
	dir := budgetLog(t, rng)
	l := openLog(t, dir, Options{})
	p, err := l.Partition("t", 0)
	require.NoError(t, err)
	want := renderAll(t, p, Values, 0)
	got, err := readView(t, mustView(t, p, Values), 64<<10)
	require.NoError(t, err)
	require.True(t, bytes.Equal(want, got))
	withIndexBudget(t, 0)
	makeIndexRoom(nil)
	segs := p.segments()
	for _, s := range segs[:len(segs)-1] {
		lie, err := readViewIndex(s)
		require.NoError(t, err)
		for i := 1; i < len(lie.entries); i++ {
			lie.entries[i].rendered++
		}
		lie.total++
		require.NoError(t, writeViewIndex(s, lie))
	}
	reloads := indexReloads.Load()
	indexBudget = 1 << 30 // room to make them whole, if the sidecars said what the indexes knew
	v := mustView(t, p, Values)
	for i := 0; i < 300; i++ {
		checkRead(t, v, want, rng.Int63n(int64(len(want))), 1+rng.Intn(16<<10), true, fmt.Sprint("read ", i))
	}
	require.Equal(t, reloads, indexReloads.Load(), "a lying sidecar taken")
}

// When the indexes that may not be thinned (here the active segment's)
// take more than the budget on their own, lookups do not go through every
// index again and again: a pass that cannot reach its goal is not tried
// again before the entries grow.
func TestViewBudgetFullOfActiveIndexes(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{})
	top, err := l.CreateTopic("t", 1, nil)
	require.NoError(t, err)
	p, _ := top.Partition(0)
	rng := rand.New(rand.NewSource(advSeed(3535)))
	for i := 0; i < 2000; i++ {
		_, err := p.Append([]Record{{Value: bytes.Repeat([]byte{'a' + byte(i%26)}, 100+rng.Intn(100))}})
		require.NoError(t, err)
	}
	require.Len(t, p.segments(), 1)
	want := renderAll(t, p, Values, 0)
	withIndexBudget(t, 64)
	v := mustView(t, p, Values)
	checkRead(t, v, want, 0, 4096, true, "first read")
	rooms := indexRooms.Load()
	for i := 0; i < 200; i++ {
		checkRead(t, v, want, rng.Int63n(int64(len(want))), 1+rng.Intn(8192), true, fmt.Sprint("read ", i))
	}
	require.LessOrEqual(t, indexRooms.Load()-rooms, int64(1), "passes over all indexes for 200 reads")
}

// A thinned index is not written as a segment's sidecar: the next open
// would load it as if whole and keep it sparse. A data directory without
// sidecars, opened writable, read with no room in the budget and closed,
// has after it sidecars as dense as a fresh index of each log, or none.
func TestViewBudgetThinnedNotPersisted(t *testing.T) {
	rng := rand.New(rand.NewSource(advSeed(3636)))
	dir := budgetLog(t, rng)
	removeSidecars(t, dir)
	func() {
		l, err := Open(dir, Options{Logger: testLogger(t), RetentionCheckInterval: -1})
		require.NoError(t, err)
		defer func() { require.NoError(t, l.Close()) }()
		p, err := l.Partition("t", 0)
		require.NoError(t, err)
		withIndexBudget(t, 0)
		got, err := readView(t, mustView(t, p, Values), 64<<10)
		require.NoError(t, err)
		require.True(t, bytes.Equal(renderAll(t, p, Values, 0), got))
		require.Positive(t, indexThins.Load())
	}()
	l := openLog(t, dir, Options{ReadOnly: true})
	p, err := l.Partition("t", 0)
	require.NoError(t, err)
	segs := p.segments()
	for _, s := range segs[:len(segs)-1] {
		side, err := readViewIndex(s)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		require.NoError(t, err)
		fresh := newViewIndex(Values, s.base)
		require.NoError(t, fresh.extend(s, record.Position(s.size.Load()), math.MaxInt64))
		require.Equal(t, len(fresh.entries), len(side.entries), "the sidecar of %s", s.logPath())
	}
}
