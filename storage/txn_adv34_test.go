package storage

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/internal/broker"
	"github.com/logfs/logfs/layout"
	"github.com/logfs/logfs/record"
)

// This file checks read_committed views against an oracle written from
// Kafka's rules (3.7.1), independent of storage/txn.go:
//
//   - the last stable offset is ProducerStateManager's first unstable
//     offset (the first offset of the earliest ongoing transaction), raised
//     to the log start offset when below it
//     (UnifiedLog.maybeIncrementFirstUnstableOffset), or the log end;
//   - a read_committed fetch from N reads the batches up to the LSO and
//     returns the aborted transactions (from the .txnindex files) whose
//     last offset is at or past N and first offset below the upper bound;
//   - the consumer (CompletedFetch.nextFetchedRecord) walks the batches: at
//     each batch of a producer it takes in the aborted transactions whose
//     first offset is at or below the batch's last offset; an ABORT marker
//     takes its producer out again; a transactional batch of a producer in
//     the set is skipped; control batches never show; records below N are
//     dropped.

// obatch is one batch of the partition's whole history as written.
type obatch struct {
	base, last record.Offset
	pid        int64 // -1: none
	txnl       bool
	ctrl       record.ControlType // ControlUnknown for data
	vals       []string
	ts         int64
}

type oabort struct {
	pid         int64
	first, last record.Offset
}

// oracle is the whole history of a partition and where its log starts.
type oracle struct {
	hist  []obatch
	start record.Offset
	end   record.Offset
}

// aborts replays the history as ProducerStateManager does and lists the
// aborted transactions, as the .txnindex entries Kafka writes.
func (o *oracle) aborts() []oabort {
	open := map[int64]record.Offset{}
	var out []oabort
	for _, b := range o.hist {
		if b.pid < 0 {
			continue
		}
		if b.ctrl == record.ControlUnknown {
			if _, ok := open[b.pid]; !ok && b.txnl {
				open[b.pid] = b.base
			}
			continue
		}
		if f, ok := open[b.pid]; ok && b.ctrl == record.ControlAbort {
			out = append(out, oabort{b.pid, f, b.base})
		}
		delete(open, b.pid)
	}
	return out
}

// lso is the last stable offset of a live broker.
func (o *oracle) lso() record.Offset {
	open := map[int64]record.Offset{}
	for _, b := range o.hist {
		if b.pid < 0 {
			continue
		}
		if b.ctrl != record.ControlUnknown {
			delete(open, b.pid)
		} else if _, ok := open[b.pid]; !ok && b.txnl {
			open[b.pid] = b.base
		}
	}
	if len(open) == 0 {
		return o.end
	}
	lso := o.end
	for _, f := range open {
		lso = min(lso, f)
	}
	return max(lso, o.start)
}

func (o *oracle) dump() string {
	var b strings.Builder
	fmt.Fprintf(&b, "start %d end %d\n", o.start, o.end)
	for _, x := range o.hist {
		fmt.Fprintf(&b, "%d-%d pid %d txnl %v ctrl %v\n", x.base, x.last, x.pid, x.txnl, x.ctrl)
	}
	return b.String()
}

// orec is one record a consumer returns.
type orec struct {
	off record.Offset
	val string
	ts  int64
}

// consume returns what a read_committed consumer fetching from n gets.
func (o *oracle) consume(n record.Offset) []orec {
	lso := o.lso()
	var aborted []oabort
	for _, a := range o.aborts() {
		if a.last >= n && a.first < lso {
			aborted = append(aborted, a)
		}
	}
	sort.SliceStable(aborted, func(i, j int) bool { return aborted[i].first < aborted[j].first })
	set := map[int64]bool{}
	var out []orec
	for _, b := range o.hist {
		if b.last < n || b.last < o.start {
			continue
		}
		if b.last >= lso {
			break // the fetch stops at the batch holding the LSO
		}
		if b.pid >= 0 {
			for len(aborted) > 0 && aborted[0].first <= b.last {
				set[aborted[0].pid] = true
				aborted = aborted[1:]
			}
			if b.ctrl == record.ControlAbort {
				delete(set, b.pid)
			} else if b.txnl && b.ctrl == record.ControlUnknown && set[b.pid] {
				continue
			}
		}
		if b.ctrl != record.ControlUnknown {
			continue
		}
		for k, v := range b.vals {
			off := b.base + record.Offset(k)
			if off >= n && off >= o.start {
				out = append(out, orec{off, v, b.ts + int64(k)})
			}
		}
	}
	return out
}

// oWriter writes a broker partition and keeps the oracle's history.
type oWriter struct {
	t      testing.TB
	p      *broker.Partition
	o      *oracle
	seq    int
	ts     int64
	rolled record.Offset
}

func newOWriter(t testing.TB, dir string, opts broker.Options) *oWriter {
	p, err := broker.Create(dir, "tx", 0, opts)
	require.NoError(t, err)
	return &oWriter{t: t, p: p, o: &oracle{}, ts: 1_700_000_000_000}
}

func (w *oWriter) write(pid int64, txnl bool, n int) {
	vals := make([]string, n)
	for k := range vals {
		w.seq++
		vals[k] = fmt.Sprintf("v%d-p%d", w.seq, pid)
	}
	base, err := w.p.Write(pid, txnl, vals...)
	require.NoError(w.t, err)
	w.o.hist = append(w.o.hist, obatch{base: base, last: base + record.Offset(n-1), pid: pid, txnl: txnl, ctrl: record.ControlUnknown, vals: vals})
	w.o.end = base + record.Offset(n)
}

func (w *oWriter) marker(pid int64, abort bool) {
	t := record.ControlCommit
	if abort {
		t = record.ControlAbort
	}
	off, err := w.p.Marker(pid, t)
	require.NoError(w.t, err)
	w.o.hist = append(w.o.hist, obatch{base: off, last: off, pid: pid, txnl: true, ctrl: t})
	w.o.end = off + 1
}

// roll rolls unless the active segment is empty (Kafka never holds two
// segments at one base offset).
func (w *oWriter) roll() {
	if w.o.end > w.rolled {
		require.NoError(w.t, w.p.Roll())
		w.rolled = w.o.end
	}
}

func (w *oWriter) deleteRecords(off record.Offset) {
	require.NoError(w.t, w.p.DeleteRecords(off))
	w.o.start = max(w.o.start, off)
}

// deleteOldest deletes the oldest segment while three or more are left;
// the log start moves to the next one's base, which the broker knows.
func (w *oWriter) deleteOldest() bool { return w.deleteOldestLeaving(2) }

// deleteOldestLeaving deletes the oldest segment if more than keep are
// left.
func (w *oWriter) deleteOldestLeaving(keep int) bool {
	names, err := w.p.Files()
	require.NoError(w.t, err)
	var bases []record.Offset
	for _, n := range names {
		if off, suffix, ok := layout.ParseSegmentFileName(n); ok && suffix == layout.LogSuffix {
			bases = append(bases, off)
		}
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	if len(bases) <= keep {
		return false
	}
	require.NoError(w.t, w.p.DeleteOldest(true))
	// The broker helper sets the start to the next segment's base even
	// when DeleteRecords had raised it further: raise it back.
	require.NoError(w.t, w.p.DeleteRecords(w.o.start))
	w.o.start = max(w.o.start, bases[1])
	return true
}

// random writes a random history: producers 1..4 in transactions, plain
// and idempotent batches between, rolls (some right before a marker),
// retention and DeleteRecords; open leaves some transactions open.
func (w *oWriter) random(rng *rand.Rand, steps int, open bool) {
	inTxn := map[int64]bool{}
	for i := 0; i < steps; i++ {
		switch r := rng.Intn(100); {
		case r < 15:
			w.write(-1, false, 1+rng.Intn(3))
		case r < 20:
			w.write(100+int64(rng.Intn(2)), false, 1+rng.Intn(3)) // idempotent
		case r < 60:
			pid := 1 + int64(rng.Intn(4))
			w.write(pid, true, 1+rng.Intn(4))
			inTxn[pid] = true
		case r < 85:
			pid := 1 + int64(rng.Intn(4))
			if !inTxn[pid] {
				continue
			}
			if rng.Intn(3) == 0 {
				w.roll() // the marker starts a segment
			}
			w.marker(pid, rng.Intn(2) == 0)
			inTxn[pid] = false
		case r < 90:
			w.roll()
		case r < 93:
			w.deleteOldest()
		case r < 95:
			if w.o.end > w.o.start {
				w.deleteRecords(w.o.start + record.Offset(rng.Int63n(int64(w.o.end-w.o.start))))
			}
		}
	}
	for pid := int64(1); pid <= 4; pid++ {
		if inTxn[pid] && !(open && pid%2 == 1) {
			w.marker(pid, rng.Intn(2) == 0)
		}
	}
	w.write(-1, false, 1)
}

// viewValues reads a whole Values view from start: its lines, and the
// view's size.
func viewBytes(t testing.TB, p *Partition, f Format, start record.Offset, piece int) ([]byte, int64) {
	t.Helper()
	v, err := p.NewView(f, start)
	require.NoError(t, err)
	defer v.Close()
	size, err := v.Size()
	require.NoError(t, err)
	var got []byte
	buf := make([]byte, piece)
	for off := int64(0); ; {
		n, err := v.ReadAt(buf, off)
		got = append(got, buf[:n]...)
		off += int64(n)
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		if n == 0 {
			t.Fatalf("view from %d: no bytes and no EOF at %d", start, off)
		}
	}
	return got, size
}

func valuesOf(recs []orec) string {
	var b strings.Builder
	for _, r := range recs {
		b.WriteString(r.val)
		b.WriteByte('\n')
	}
	return b.String()
}

func offsetsOfJSONL(t testing.TB, b []byte) []record.Offset {
	var out []record.Offset
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r struct {
			Offset record.Offset `json:"offset"`
		}
		require.NoError(t, json.Unmarshal(sc.Bytes(), &r), "%s", sc.Bytes())
		out = append(out, r.Offset)
	}
	return out
}

// checkAgainstOracle compares the partition's read_committed views with
// the oracle from every start offset, and preads at random.
func checkAgainstOracle(t *testing.T, p *Partition, o *oracle, rng *rand.Rand) {
	t.Helper()
	if o.start != p.StartOffset() {
		names, _ := os.ReadDir(p.Dir())
		for _, n := range names {
			t.Log(n.Name())
		}
		ck, _ := os.ReadFile(filepath.Join(filepath.Dir(p.Dir()), layout.LogStartFile))
		t.Logf("checkpoint: %s", ck)
	}
	require.Equal(t, o.start, p.StartOffset(), "log start")
	require.Equal(t, o.end, p.EndOffset(), "log end")
	if !assertEq(t, o.lso(), p.LastStableOffset(), "last stable offset") {
		t.Log(o.dump())
	}
	assertEq(t, o.lso(), p.LatestOffset(), "latest offset")
	for n := o.start; n <= o.end; n++ {
		want := o.consume(n)
		got, size := viewBytes(t, p, Values, n, 1+rng.Intn(300))
		require.Equal(t, valuesOf(want), string(got), "values view from %d (start %d, lso %d)", n, o.start, o.lso())
		require.Equal(t, int64(len(got)), size, "size of the values view from %d", n)
		if rng.Intn(4) == 0 {
			j, _ := viewBytes(t, p, JSONL, n, 1+rng.Intn(2000))
			var offs []record.Offset
			for _, r := range want {
				offs = append(offs, r.off)
			}
			require.Equal(t, offs, offsetsOfJSONL(t, j), "jsonl view from %d", n)
		}
		if len(got) > 0 && rng.Intn(3) == 0 {
			v, err := p.NewView(Values, n)
			require.NoError(t, err)
			for k := 0; k < 10; k++ {
				off := rng.Int63n(int64(len(got)))
				b := make([]byte, 1+rng.Intn(200))
				m, err := v.ReadAt(b, off)
				if err != nil {
					require.ErrorIs(t, err, io.EOF)
				}
				require.Equal(t, string(got[off:min(off+int64(len(b)), int64(len(got)))]), string(b[:m]), "pread at %d from %d", off, n)
			}
			require.NoError(t, v.Close())
		}
	}
}

func TestAdv34ReadCommittedOracle(t *testing.T) {
	seeds := int64(40)
	if raceEnabled {
		seeds = 8 // .ci/run runs all 40 again without the race detector
	}
	for seed := int64(1); seed <= seeds; seed++ {
		for _, c := range []struct {
			name string
			o    broker.Options
			open bool
			drop bool
			kill bool // no clean shutdown: no final snapshot
		}{
			{name: "killed", o: broker.Options{SegmentBytes: 600}, open: true, kill: true},
			{name: "txnindex", o: broker.Options{SegmentBytes: 600}},
			{name: "open", o: broker.Options{SegmentBytes: 600}, open: true},
			{name: "markers only", o: broker.Options{SegmentBytes: 600, NoTxnIndex: true}, open: true},
			{name: "txnindex lost", o: broker.Options{SegmentBytes: 900}, open: true, drop: true},
		} {
			t.Run(fmt.Sprintf("%s/%d", c.name, seed), func(t *testing.T) {
				rng := rand.New(rand.NewSource(seed))
				dir := t.TempDir()
				w := newOWriter(t, dir, c.o)
				w.random(rng, 120, c.open)
				if !c.kill {
					require.NoError(t, w.p.Close())
				}
				if c.drop {
					require.NoError(t, w.p.RemoveTxnIndexes())
				}
				l := openLog(t, dir, Options{ReadOnly: true})
				p, err := l.Partition("tx", 0)
				require.NoError(t, err)
				checkAgainstOracle(t, p, w.o, rng)
			})
		}
	}
}

func assertEq(t *testing.T, want, got any, what string) bool {
	t.Helper()
	if want != got {
		t.Errorf("%s: want %v, got %v", what, want, got)
		return false
	}
	return true
}

// TestAdv34LSONotBelowLogStart: a transaction open since before the log
// start (its first batches deleted by retention or DeleteRecords) holds
// the last stable offset at the log start, not below it, as Kafka's
// UnifiedLog.maybeIncrementFirstUnstableOffset raises the first unstable
// offset to the log start. Below it, offset/latest and consume --offset
// latest name an offset the log no longer holds.
func TestAdv34LSONotBelowLogStart(t *testing.T) {
	for _, how := range []string{"retention", "DeleteRecords"} {
		t.Run(how, func(t *testing.T) {
			dir := t.TempDir()
			w := newOWriter(t, dir, broker.Options{SegmentBytes: 1 << 20})
			w.write(1, true, 2) // producer 1's transaction, never ended
			w.write(-1, false, 3)
			w.roll()
			w.write(-1, false, 3)
			w.write(1, true, 1)
			w.write(-1, false, 2)
			if how == "retention" {
				require.True(t, w.deleteOldestAllowingTwo())
			} else {
				w.deleteRecords(4)
			}
			require.NoError(t, w.p.Close())
			l := openLog(t, dir, Options{ReadOnly: true})
			p, err := l.Partition("tx", 0)
			require.NoError(t, err)
			require.Equal(t, w.o.start, p.StartOffset())
			require.Equal(t, p.StartOffset(), p.LastStableOffset())
			require.Equal(t, p.StartOffset(), p.LatestOffset())
			v, err := p.NewView(Values, p.LatestOffset())
			require.NoError(t, err)
			size, err := v.Size()
			require.NoError(t, err)
			require.Zero(t, size)
			require.NoError(t, v.Close())
		})
	}
}

// deleteOldestAllowingTwo is deleteOldest down to a single segment.
func (w *oWriter) deleteOldestAllowingTwo() bool { return w.deleteOldestLeaving(1) }

// TestAdv34DamagedTxnIndex: a .txnindex that is torn, truncated, out of
// order, duplicated, of an unknown version, planted (a symlink to another
// segment's, a directory) or lists a transaction past its segment (which
// Kafka never writes: the entry goes into the segment of the ABORT marker)
// changes nothing: the markers say what it said.
func TestAdv34DamagedTxnIndex(t *testing.T) {
	type fault struct {
		name  string
		apply func(t *testing.T, path, other string, entries []byte)
	}
	write := func(t *testing.T, path string, b []byte) { require.NoError(t, os.WriteFile(path, b, 0o644)) }
	entry := func(pid int64, first, last record.Offset, version int16) []byte {
		b := make([]byte, 0, 34)
		b = append(b, byte(version>>8), byte(version))
		for _, v := range []int64{pid, int64(first), int64(last), int64(first)} {
			for k := 7; k >= 0; k-- {
				b = append(b, byte(v>>(8*k)))
			}
		}
		return b
	}
	faults := []fault{
		{"torn last entry", func(t *testing.T, p, _ string, e []byte) { write(t, p, e[:len(e)-7]) }},
		{"empty", func(t *testing.T, p, _ string, e []byte) { write(t, p, nil) }},
		{"duplicated", func(t *testing.T, p, _ string, e []byte) { write(t, p, append(append([]byte{}, e...), e...)) }},
		{"reversed", func(t *testing.T, p, _ string, e []byte) {
			var r []byte
			for k := len(e) - 34; k >= 0; k -= 34 {
				r = append(r, e[k:k+34]...)
			}
			write(t, p, r)
		}},
		{"unknown version", func(t *testing.T, p, _ string, e []byte) {
			write(t, p, append(append([]byte{}, e...), entry(1, 0, 5, 1)...))
		}},
		{"symlink to a later one", func(t *testing.T, p, o string, _ []byte) {
			require.NoError(t, os.Remove(p))
			require.NoError(t, os.Symlink(filepath.Base(o), p))
		}},
		{"directory", func(t *testing.T, p, _ string, _ []byte) {
			require.NoError(t, os.Remove(p))
			require.NoError(t, os.Mkdir(p, 0o755))
		}},
		{"entry past the log", func(t *testing.T, p, _ string, e []byte) {
			write(t, p, append(append([]byte{}, e...), entry(1, 0, 1<<40, 0)...))
		}},
		{"entry past its segment", func(t *testing.T, p, o string, e []byte) {
			base, _, _ := layout.ParseSegmentFileName(filepath.Base(o))
			write(t, p, append(append([]byte{}, e...), entry(1, 0, base+1, 0)...))
		}},
	}
	for _, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			dir := t.TempDir()
			w := newOWriter(t, dir, broker.Options{SegmentBytes: 1 << 20})
			// Segment 0: producer 2 aborts twice, producer 1 commits.
			w.write(1, true, 2)
			w.write(2, true, 2)
			w.marker(2, true)
			w.write(-1, false, 1)
			w.write(2, true, 1)
			w.marker(2, true)
			w.marker(1, false)
			w.write(1, true, 2)
			w.roll()
			// Segment 1: producer 1's transaction commits; producer 2
			// aborts one.
			w.write(2, true, 1)
			w.marker(1, false)
			w.marker(2, true)
			w.write(1, true, 1)
			w.marker(1, false)
			w.write(-1, false, 1)
			require.NoError(t, w.p.Close())
			pdir := filepath.Join(dir, layout.PartitionDirName("tx", 0))
			seg0 := layout.SegmentPath(pdir, 0, layout.TxnIndexSuffix)
			seg1 := layout.SegmentPath(pdir, w.rolled, layout.TxnIndexSuffix)
			entries, err := os.ReadFile(seg0)
			require.NoError(t, err)
			require.Len(t, entries, 2*34)
			f.apply(t, seg0, seg1, entries)
			checkDirAgainstOracle(t, dir, true, w.o)
		})
	}
}

// checkDirAgainstOracle opens dir's log and checks partition tx-0 against
// the oracle o.
func checkDirAgainstOracle(t *testing.T, dir string, readOnly bool, o *oracle) {
	t.Helper()
	l, err := Open(dir, Options{ReadOnly: readOnly, Logger: testLogger(t), RetentionCheckInterval: -1})
	require.NoError(t, err)
	defer l.Close()
	p, err := l.Partition("tx", 0)
	require.NoError(t, err)
	checkAgainstOracle(t, p, o, rand.New(rand.NewSource(1)))
}

// TestAdv34CrashAroundAbortMarker: a broker killed after appending an
// ABORT marker but before its .txnindex entry, or whose marker's bytes
// never reached the disk while the entry did (neither file is synced in
// order). The log holds what the markers say: an aborted transaction in
// the first case, a transaction still open in the second (Kafka's recovery
// truncates the .txnindex with the log: TransactionIndex.truncateTo).
func TestAdv34CrashAroundAbortMarker(t *testing.T) {
	for _, c := range []struct {
		name     string
		torn     bool // the marker's bytes are torn off, the entry is kept
		readOnly bool
	}{
		{"entry lost", false, false},
		{"entry lost, read-only", false, true},
		{"marker torn", true, false},
		{"marker torn, read-only", true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			w := newOWriter(t, dir, broker.Options{SegmentBytes: 1 << 20})
			w.write(-1, false, 2)
			w.write(1, true, 2)
			w.marker(1, true) // an aborted transaction, its entry kept
			w.write(1, true, 2)
			w.write(-1, false, 1)
			w.marker(1, true)
			pdir := filepath.Join(dir, layout.PartitionDirName("tx", 0))
			idx := layout.SegmentPath(pdir, 0, layout.TxnIndexSuffix)
			entries, err := os.ReadFile(idx)
			require.NoError(t, err)
			require.Len(t, entries, 2*34)
			if c.torn {
				log := layout.SegmentPath(pdir, 0, layout.LogSuffix)
				st, err := os.Stat(log)
				require.NoError(t, err)
				require.NoError(t, os.Truncate(log, st.Size()-5))
				w.o.hist = w.o.hist[:len(w.o.hist)-1]
				w.o.end--
			} else {
				require.NoError(t, os.WriteFile(idx, entries[:34], 0o644))
			}
			checkDirAgainstOracle(t, dir, c.readOnly, w.o)
		})
	}
}

// TestAdv34FollowedLSOMoves follows a broker directory while transactions
// open, commit and abort, segments roll and retention and DeleteRecords
// take the oldest records. After each round (once the follower caught up)
// views opened in earlier rounds and new ones read what a read_committed
// consumer gets now, or, for a view whose records retention took, stop
// with ErrDeleted; the LSO is the oracle's.
func TestAdv34FollowedLSOMoves(t *testing.T) {
	for seed := int64(1); seed <= 6; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewSource(seed))
			dir := t.TempDir()
			w := newOWriter(t, dir, broker.Options{SegmentBytes: 700})
			w.write(-1, false, 1)
			require.NoError(t, w.p.Checkpoint(w.o.end))
			l := openLog(t, dir, Options{ReadOnly: true, Follow: true})
			p, err := l.Partition("tx", 0)
			require.NoError(t, err)
			type held struct {
				v     *View
				start record.Offset
			}
			var views []held
			defer func() {
				for _, h := range views {
					h.v.Close()
				}
			}()
			inTxn := map[int64]bool{}
			for round := 0; round < 25; round++ {
				for k := 0; k < 1+rng.Intn(6); k++ {
					switch r := rng.Intn(20); {
					case r < 3:
						w.write(-1, false, 1+rng.Intn(3))
					case r < 11:
						pid := 1 + int64(rng.Intn(3))
						w.write(pid, true, 1+rng.Intn(3))
						inTxn[pid] = true
					case r < 16:
						pid := 1 + int64(rng.Intn(3))
						if inTxn[pid] {
							w.marker(pid, rng.Intn(2) == 0)
							inTxn[pid] = false
						}
					case r < 18:
						w.roll()
					case r < 19:
						w.deleteOldest()
					default:
						if w.o.end > w.o.start {
							w.deleteRecords(w.o.start + record.Offset(rng.Int63n(int64(w.o.end-w.o.start))))
						}
					}
				}
				require.NoError(t, w.p.Checkpoint(w.o.end))
				eventually(t, "the follower", func() bool {
					return p.EndOffset() == w.o.end && p.HighWatermark() == w.o.end && p.StartOffset() == w.o.start
				})
				require.Equal(t, w.o.lso(), p.LastStableOffset(), "round %d\n%s", round, w.o.dump())
				for _, h := range views {
					got, err := readView(t, h.v, 1+rng.Intn(500))
					if err != nil {
						require.ErrorIs(t, err, ErrDeleted, "view from %d, round %d", h.start, round)
						continue
					}
					// The view keeps the segments it holds: it reads
					// from its start even where retention took them.
					o := *w.o
					o.start = h.start
					require.Equal(t, valuesOf(o.consume(h.start)), string(got), "view from %d held since before round %d\n%s", h.start, round, w.o.dump())
				}
				n := w.o.start + record.Offset(rng.Int63n(int64(w.o.end-w.o.start+1)))
				v, err := p.NewView(Values, n)
				require.NoError(t, err)
				views = append(views, held{v, n})
				got, err := readView(t, v, 1+rng.Intn(500))
				require.NoError(t, err)
				require.Equal(t, valuesOf(w.o.consume(n)), string(got), "new view from %d, round %d\n%s", n, round, w.o.dump())
			}
		})
	}
}
