package storage

import (
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/internal/broker"
	"github.com/logfs/logfs/internal/fixtures"
	"github.com/logfs/logfs/layout"
	"github.com/logfs/logfs/record"
)

// txnWrite is one batch a test wrote into a broker partition, and what a
// read_committed consumer makes of it.
type txnWrite struct {
	pid        int64
	txnl       bool
	base, last record.Offset
}

// txnModel is the reference the tests check views against: Kafka's rules
// applied to the writes themselves, not to the files.
type txnModel struct {
	writes  []txnWrite
	markers map[record.Offset]txnMarker // by offset
}

type txnMarker struct {
	pid   int64
	abort bool
}

// fate says whether write w is aborted or still open: the producer's next
// marker after it.
func (m *txnModel) fate(w txnWrite) (aborted, open bool) {
	next := record.Offset(-1)
	for off, mk := range m.markers {
		if mk.pid == w.pid && off > w.last && (next < 0 || off < next) {
			next = off
		}
	}
	if next < 0 {
		return false, true
	}
	return m.markers[next].abort, false
}

// lso is the first offset of the earliest open transaction, or end.
func (m *txnModel) lso(end record.Offset) record.Offset {
	lso := end
	first := map[int64]record.Offset{}
	for _, w := range m.writes {
		if !w.txnl {
			continue
		}
		if _, open := m.fate(w); open {
			if f, ok := first[w.pid]; !ok || w.base < f {
				first[w.pid] = w.base
			}
		}
	}
	for _, f := range first {
		lso = min(lso, f)
	}
	return lso
}

// shows says whether a read_committed consumer sees the records of w.
func (m *txnModel) shows(w txnWrite, lso record.Offset) bool {
	if w.last >= lso {
		return false
	}
	if !w.txnl {
		return true
	}
	aborted, open := m.fate(w)
	return !aborted && !open
}

// txnWriter writes interleaved transactions of several producers into a
// broker partition and keeps the model.
type txnWriter struct {
	t *testing.T
	p *broker.Partition
	m *txnModel
}

func newTxnWriter(t *testing.T, dir string, o broker.Options) *txnWriter {
	p, err := broker.Create(dir, "tx", 0, o)
	require.NoError(t, err)
	return &txnWriter{t: t, p: p, m: &txnModel{markers: map[record.Offset]txnMarker{}}}
}

func (w *txnWriter) write(pid int64, txnl bool, values ...string) {
	b := w.p.Batch(pid, txnl, values...)
	base, err := w.p.Append(b)
	require.NoError(w.t, err)
	w.m.writes = append(w.m.writes, txnWrite{pid: pid, txnl: txnl, base: base, last: base + record.Offset(len(values)-1)})
}

func (w *txnWriter) marker(pid int64, abort bool) {
	t := record.ControlCommit
	if abort {
		t = record.ControlAbort
	}
	off, err := w.p.Marker(pid, t)
	require.NoError(w.t, err)
	w.m.markers[off] = txnMarker{pid: pid, abort: abort}
}

// scenario writes committed and aborted transactions of three producers,
// interleaved with each other and with plain records, over many small
// segments, so that transactions cross segment boundaries; open leaves
// producer 3's last transaction open at the end.
func (w *txnWriter) scenario(rng *rand.Rand, batches int, open bool) {
	inTxn := map[int64]bool{}
	for i := 0; i < batches; i++ {
		pid := int64(rng.Intn(4)) // 0: plain records
		n := 1 + rng.Intn(4)
		vals := make([]string, n)
		for k := range vals {
			vals[k] = fmt.Sprintf("p%d-%d-%d-%s", pid, i, k, strings.Repeat("x", rng.Intn(40)))
		}
		switch {
		case pid == 0:
			w.write(-1, false, vals...)
		case inTxn[pid] && rng.Intn(4) == 0:
			w.marker(pid, rng.Intn(2) == 0)
			inTxn[pid] = false
		default:
			w.write(pid, true, vals...)
			inTxn[pid] = true
		}
	}
	for pid := int64(1); pid <= 3; pid++ {
		if inTxn[pid] && !(open && pid == 3) {
			w.marker(pid, pid == 2)
		}
	}
	if open && !inTxn[3] {
		w.write(3, true, "left-open")
	}
	w.write(-1, false, "after-the-open-one")
}

// shown reports, by the model, whether a view at isolation level iso
// shows the record at an offset: one of a write it shows, and in
// ReadCommitted below the last stable offset lso.
func (w *txnWriter) shown(iso Isolation, lso record.Offset) func(record.Offset) bool {
	visible := map[record.Offset]bool{}
	for _, wr := range w.m.writes {
		if iso == ReadUncommitted || w.m.shows(wr, lso) {
			for off := wr.base; off <= wr.last; off++ {
				visible[off] = true
			}
		}
	}
	return func(o record.Offset) bool { return visible[o] && (iso == ReadUncommitted || o < lso) }
}

// expected renders what a view from start shows, from the records a
// ReadUncommitted reader returns, filtered by the model.
func (w *txnWriter) expected(t *testing.T, p *Partition, f Format, iso Isolation, start record.Offset) []byte {
	shown := w.shown(iso, w.m.lso(p.EndOffset()))
	r, err := p.NewReader(p.StartOffset())
	require.NoError(t, err)
	defer r.Close()
	var out []byte
	for {
		rec, err := r.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		if rec.Offset >= start && shown(rec.Offset) {
			out = f.Append(out, rec)
		}
	}
	return out
}

// checkView checks a view from start against want: its size, a
// sequential read in odd pieces, and preads anywhere.
func checkView(t *testing.T, p *Partition, f Format, start record.Offset, want []byte, rng *rand.Rand) {
	t.Helper()
	v, err := p.NewView(f, start)
	require.NoError(t, err)
	defer v.Close()
	size, err := v.Size()
	require.NoError(t, err)
	require.Equal(t, int64(len(want)), size, "size of the %v view from %d", f, start)
	var got []byte
	buf := make([]byte, 1+rng.Intn(5000))
	for off := int64(0); ; {
		n, err := v.ReadAt(buf, off)
		got = append(got, buf[:n]...)
		off += int64(n)
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
	}
	require.Equal(t, string(want), string(got), "%v view from %d", f, start)
	for k := 0; k < 30 && len(want) > 0; k++ {
		off := rng.Int63n(int64(len(want)))
		n := 1 + rng.Intn(3000)
		b := make([]byte, n)
		got, err := v.ReadAt(b, off)
		if err != nil {
			require.ErrorIs(t, err, io.EOF)
		}
		require.Equal(t, string(want[off:min(off+int64(n), int64(len(want)))]), string(b[:got]), "pread of %d at %d", n, off)
	}
}

func TestReadCommittedHidesAbortedTransactions(t *testing.T) {
	for _, c := range []struct {
		name    string
		o       broker.Options
		open    bool
		drop    bool // remove the .txnindex files after writing
		unclean bool // remove .kafka_cleanshutdown
		seed    int64
	}{
		{name: "txnindex", o: broker.Options{SegmentBytes: 2048}, seed: 1},
		{name: "markers only", o: broker.Options{SegmentBytes: 2048, NoTxnIndex: true}, seed: 2},
		{name: "txnindex lost", o: broker.Options{SegmentBytes: 2048}, drop: true, seed: 3},
		{name: "open at the end", o: broker.Options{SegmentBytes: 2048}, open: true, seed: 4},
		{name: "open, no snapshots", o: broker.Options{SegmentBytes: 2048, NoSnapshots: true}, open: true, unclean: true, seed: 5},
		{name: "one segment", o: broker.Options{SegmentBytes: 1 << 20, IndexInterval: 256}, open: true, seed: 6},
	} {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewSource(c.seed))
			dir := t.TempDir()
			w := newTxnWriter(t, dir, c.o)
			w.scenario(rng, 300, c.open)
			require.NoError(t, w.p.Close())
			if c.drop {
				require.NoError(t, w.p.RemoveTxnIndexes())
			}
			if c.unclean {
				require.NoError(t, os.Remove(filepath.Join(dir, layout.CleanShutdownFile)))
			}
			names, err := w.p.Files()
			require.NoError(t, err)
			hasTxnIndex := false
			for _, n := range names {
				hasTxnIndex = hasTxnIndex || strings.HasSuffix(n, layout.TxnIndexSuffix)
			}
			require.Equal(t, !c.o.NoTxnIndex && !c.drop, hasTxnIndex, "the broker wrote .txnindex files: %v", names)
			require.NotEmpty(t, w.p.Aborted())

			for _, iso := range []Isolation{ReadCommitted, ReadUncommitted} {
				t.Run(iso.String(), func(t *testing.T) {
					l := openLog(t, dir, Options{ReadOnly: true, Isolation: iso})
					p, err := l.Partition("tx", 0)
					require.NoError(t, err)
					if c.o.SegmentBytes < 1<<20 {
						require.Greater(t, len(p.segments()), 3)
					}
					lso := w.m.lso(p.EndOffset())
					if iso == ReadCommitted {
						require.Equal(t, lso, p.LastStableOffset())
					}
					if c.open {
						require.Less(t, lso, p.EndOffset())
					}
					starts := []record.Offset{0, lso, p.EndOffset()}
					for k := 0; k < 6; k++ {
						starts = append(starts, record.Offset(rng.Int63n(int64(p.EndOffset()))))
					}
					for _, f := range []Format{Values, JSONL} {
						for _, start := range starts {
							checkView(t, p, f, start, w.expected(t, p, f, iso, start), rng)
						}
					}
				})
			}
		})
	}
}

// TestReadCommittedCleanWithoutSnapshot follows Kafka's rule for a data
// directory shut down cleanly that has no producer snapshot
// (UnifiedLog.rebuildProducerState, 3.7.1): the producer state is taken as
// empty at the log end, so a transaction left open then does not hold back
// the last stable offset. Its records are not shown all the same, as no
// marker decides them, and aborted ones stay hidden.
func TestReadCommittedCleanWithoutSnapshot(t *testing.T) {
	dir := t.TempDir()
	w := newTxnWriter(t, dir, broker.Options{SegmentBytes: 2048, NoSnapshots: true})
	w.write(1, true, "aborted")
	w.marker(1, true)
	w.write(-1, false, "plain")
	w.write(2, true, "open")
	require.NoError(t, w.p.Close())
	l := openLog(t, dir, Options{ReadOnly: true})
	p, err := l.Partition("tx", 0)
	require.NoError(t, err)
	require.Equal(t, p.EndOffset(), p.LastStableOffset())
	v, err := p.NewView(Values, 0)
	require.NoError(t, err)
	defer v.Close()
	b := make([]byte, 100)
	n, _ := v.ReadAt(b, 0)
	require.Equal(t, "plain\n", string(b[:n]))
}

// TestReadCommittedFixture reads the Kafka 3.7 fixture's committed
// transaction: its record shows, its COMMIT marker does not.
func TestReadCommittedFixture(t *testing.T) {
	data := filepath.Join(fixtures.Dir(t), "kafka-3.7-kraft-transactions", "kafka-data")
	for _, iso := range []Isolation{ReadCommitted, ReadUncommitted} {
		l := openLog(t, data, Options{ReadOnly: true, Isolation: iso})
		p, err := l.Partition("_confluent-ksql-default__command_topic", 0)
		require.NoError(t, err)
		require.Equal(t, record.Offset(2), p.LastStableOffset())
		v, err := p.NewView(JSONL, 0)
		require.NoError(t, err)
		b := make([]byte, 64<<10)
		n, err := v.ReadAt(b, 0)
		if err != nil {
			require.ErrorIs(t, err, io.EOF)
		}
		require.Equal(t, 1, strings.Count(string(b[:n]), "\n"), iso)
		require.Contains(t, string(b[:n]), `"key":"\"stream/`+"`KSQL_PROCESSING_LOG`"+`/create\""`)
		v.Close()
	}
}

// TestReadCommittedWithoutTransactionsScansNothing: a partition logfs
// wrote itself has no transactional batch, and the replay of producer
// state reads none of its log: the view indexes say so.
func TestReadCommittedWithoutTransactionsScansNothing(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir, Options{Logger: testLogger(t)})
	require.NoError(t, err)
	top, err := l.CreateTopic("t", 1, small("segment.bytes=4096"))
	require.NoError(t, err)
	p, _ := top.Partition(0)
	for i := 0; i < 100; i++ {
		_, err := p.Append(values(3, fmt.Sprintf("r%d", i)))
		require.NoError(t, err)
	}
	require.NoError(t, l.Close())
	for _, clean := range []bool{true, false} {
		if !clean {
			require.NoError(t, os.Remove(filepath.Join(dir, layout.CleanShutdownFile)))
		}
		l := openLog(t, dir, Options{ReadOnly: true})
		p, err := l.Partition("t", 0)
		require.NoError(t, err)
		require.Equal(t, p.EndOffset(), p.LastStableOffset())
		for _, s := range p.segments() {
			s.txn.mu.Lock()
			scanned, events := s.txn.scanned, len(s.txn.events)
			s.txn.mu.Unlock()
			require.Zero(t, events)
			if !clean || s == p.active() {
				require.Equal(t, record.Position(s.size.Load()), scanned, "segment %d summarised from its view index", s.base)
			}
		}
	}
}
