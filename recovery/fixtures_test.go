package recovery_test

import (
	"bytes"
	"encoding/binary"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/index"
	"github.com/logfs/logfs/internal/fixtures"
	"github.com/logfs/logfs/layout"
	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/recovery"
	"github.com/logfs/logfs/storage"
	"github.com/logfs/logfs/vfs"
)

// kafkaInterval is index.interval.bytes as the fixture brokers ran with
// (Kafka's default).
const kafkaInterval = 4096

// TestFixturesIndexesRebuilt opens a copy of every Kafka data directory
// writable: recovery rebuilds the index files the fixtures lack (active
// segments whose preallocated indexes were not committed), cuts nothing,
// and every record reads back. The fixtures themselves are not touched.
func TestFixturesIndexesRebuilt(t *testing.T) {
	for _, d := range fixtures.DataDirs(t) {
		t.Run(d.Set, func(t *testing.T) {
			before := treeDigest(t, d.Path)
			dir := filepath.Join(t.TempDir(), "data")
			copyTree(t, d.Path, dir)
			missing := map[string]bool{}
			logs, err := filepath.Glob(filepath.Join(dir, "*", "*"+layout.LogSuffix))
			require.NoError(t, err)
			for _, lp := range logs {
				for _, s := range []string{layout.IndexSuffix, layout.TimeIndexSuffix} {
					if p := strings.TrimSuffix(lp, layout.LogSuffix) + s; !exists(p) {
						missing[p] = true
					}
				}
			}
			l, err := storage.Open(dir, storage.Options{Logger: testLogger(), RetentionCheckInterval: -1})
			require.NoError(t, err)
			rep := l.RecoveryReport()
			require.Zero(t, rep.Problems(), "recovery cuts, drops and finds nothing in Kafka's data:\n%s", reportText(rep))
			for p := range missing {
				require.FileExists(t, p, "rebuilt")
			}
			require.NoError(t, l.Check())
			for _, name := range l.Topics() {
				top, err := l.Topic(name)
				require.NoError(t, err)
				for _, p := range top.Partitions() {
					checkAgainstScan(t, p, filepath.Join(d.Path, filepath.Base(p.Dir())))
				}
			}
			require.NoError(t, l.Close())
			// The rebuilt files are what a rebuild from the log gives.
			for p := range missing {
				base, suffix, _ := layout.ParseSegmentFileName(filepath.Base(p))
				want := rebuildInto(t, filepath.Dir(p), base)
				require.Equal(t, want[suffix], readFile(t, p), "%s", p)
			}
			require.Equal(t, before, treeDigest(t, d.Path), "the fixture is untouched")
			t.Logf("%d index files rebuilt", len(missing))
		})
	}
}

// checkAgainstScan reads p through storage and compares every record's
// offset and value with a direct scan of the original fixture folder.
func checkAgainstScan(t *testing.T, p *storage.Partition, orig string) {
	t.Helper()
	type rec struct {
		off record.Offset
		val string
	}
	var want []rec
	logs, err := filepath.Glob(filepath.Join(orig, "*"+layout.LogSuffix))
	require.NoError(t, err)
	sort.Strings(logs)
	var dec record.Decoder
	for _, lp := range logs {
		data := readFile(t, lp)
		sc := record.NewScanner(bytes.NewReader(data), 0, record.Position(len(data)), record.ScanOptions{})
		for sc.Next() {
			if sc.Batch().Attributes.Control() {
				continue
			}
			it, err := dec.Records(sc.Batch())
			require.NoError(t, err)
			for it.Next() {
				want = append(want, rec{it.Record().Offset, string(it.Record().Value)})
			}
		}
		require.NoError(t, sc.Err())
	}
	r, err := p.NewReader(p.StartOffset())
	require.NoError(t, err)
	defer r.Close()
	var got []rec
	for {
		x, err := r.Next()
		if err != nil {
			break
		}
		got = append(got, rec{x.Offset, string(x.Value)})
	}
	require.Equal(t, want, got, "%s", p)
}

// rebuildInto rebuilds the indexes of the segment at base from the .log in
// dir, in a scratch folder, and returns the files by suffix.
func rebuildInto(t *testing.T, dir string, base record.Offset) map[string][]byte {
	t.Helper()
	scratch := t.TempDir()
	lp := layout.SegmentPath(dir, base, layout.LogSuffix)
	data := readFile(t, lp)
	writeFile(t, layout.SegmentPath(scratch, base, layout.LogSuffix), data)
	_, err := recovery.RebuildIndexes(vfs.Default, scratch, base, record.Position(len(data)), recovery.IndexConfig{IndexInterval: kafkaInterval})
	require.NoError(t, err)
	return map[string][]byte{
		layout.IndexSuffix:     readFile(t, layout.SegmentPath(scratch, base, layout.IndexSuffix)),
		layout.TimeIndexSuffix: readFile(t, layout.SegmentPath(scratch, base, layout.TimeIndexSuffix)),
	}
}

// fixtureHistory is how a Kafka-written index file of the fixtures differs
// from a rebuild from its log, for the files where it does. A broker that
// restarts while a segment is still active changes its index files in two
// ways no rebuild can reproduce from the log alone:
//
//   - closeEntries: every clean close appends a final time-index entry
//     (the running max timestamp then), and the segment then grows on, so
//     the file keeps one such entry per restart in the middle;
//   - delayedOffsetEntries: a reopened segment starts its
//     index.interval.bytes count afresh (Kafka's LogSegment is a new
//     object), so the entries after a restart come later than a rebuild,
//     which counts across the whole file, puts them; at the end of the file
//     such a late entry may not exist yet. Their time-index entries, which
//     are added with them, move or go with them.
//
// Recovery's own rebuild (LogSegment.recover) counts across the file as a
// rebuild does, so what a restart after a recovery appends differs only by
// the two effects above.
type fixtureHistory struct {
	closeEntries         int // time-index entries a rebuild does not make, each a valid running max
	delayedOffsetEntries int // offset-index entries a rebuild makes that Kafka made later or not yet
}

// fixtureIndexHistory pins, per segment with Kafka-written index files,
// what the comparison finds; the segments not listed must match byte for
// byte. The 3.7 fixture's broker restarted many times (17 leader epochs),
// so its longer-lived segments carry history.
var fixtureIndexHistory = map[string]fixtureHistory{
	// A recovery when the log ended at offset 38 rebuilt entries 12 and 26
	// and closed with (ts(38), 38); the broker then appended 39-44 counting
	// afresh (no entry: under 4096 bytes) and closed with (ts(44), 44). A
	// rebuild of the whole file adds 39 at 13065, time entry included.
	"kafka-3.7-kraft-transactions/kafka-data/__consumer_offsets-29/00000000000000000000": {closeEntries: 1, delayedOffsetEntries: 1},
	// The offset entries agree; (ts(36), 36) was written by a close.
	"kafka-3.7-kraft-transactions/kafka-data/__consumer_offsets-37/00000000000000000000": {closeEntries: 1},
	// No offset entries (4032 bytes); (ts(37), 37) was written by a close.
	"kafka-3.7-kraft-transactions/kafka-data/_schemas-0/00000000000000000000": {closeEntries: 1},
	// No offset entries (1950 bytes); (ts(7), 7) was written by a close.
	"kafka-3.7-kraft-transactions/kafka-data/docker-connect-configs-0/00000000000000000000": {closeEntries: 1},
}

// TestFixtureIndexesByteIdentical rebuilds, from its .log, every fixture
// segment that has Kafka-written .index and .timeindex files, and compares
// the bytes. Where they differ the difference must be exactly the broker's
// history pinned in fixtureIndexHistory: Kafka's file is then checked to be
// a valid index of the log (every offset entry names the batch at its
// position, every time entry a running max timestamp and the batch that
// reached it), to agree with the rebuild up to the restart, to have its
// later offset entries only later than the rebuild's, and to hold every
// time entry recovery would make before the restart plus the segment's
// final entry, which is the rebuild's last.
func TestFixtureIndexesByteIdentical(t *testing.T) {
	root := fixtures.Dir(t)
	seen := map[string]bool{}
	exact := 0
	for _, ip := range fixtures.Files(t, layout.IndexSuffix) {
		stem := strings.TrimSuffix(ip, layout.IndexSuffix)
		if !exists(stem+layout.TimeIndexSuffix) || !exists(stem+layout.LogSuffix) {
			continue
		}
		rel, err := filepath.Rel(root, stem)
		require.NoError(t, err)
		seen[rel] = true
		t.Run(rel, func(t *testing.T) {
			base, _, _ := layout.ParseSegmentFileName(filepath.Base(stem) + layout.LogSuffix)
			ours := rebuildInto(t, filepath.Dir(stem), base)
			kOff, kTime := readFile(t, stem+layout.IndexSuffix), readFile(t, stem+layout.TimeIndexSuffix)
			want, history := fixtureIndexHistory[rel]
			if !history {
				require.Equal(t, kOff, ours[layout.IndexSuffix], "offset index byte for byte")
				require.Equal(t, kTime, ours[layout.TimeIndexSuffix], "time index byte for byte")
				exact++
				return
			}
			require.False(t, bytes.Equal(kOff, ours[layout.IndexSuffix]) && bytes.Equal(kTime, ours[layout.TimeIndexSuffix]),
				"identical now: drop it from fixtureIndexHistory")
			got := explainHistory(t, readFile(t, stem+layout.LogSuffix), base, kOff, kTime, ours[layout.IndexSuffix], ours[layout.TimeIndexSuffix])
			require.Equal(t, want, got)
			t.Logf("history: %d time-index entries from closes at restarts, %d offset entries a restart delayed", got.closeEntries, got.delayedOffsetEntries)
		})
	}
	for rel := range fixtureIndexHistory {
		require.True(t, seen[rel], "%s is a fixture segment with Kafka-written indexes", rel)
	}
	require.Positive(t, exact)
	t.Logf("%d segments identical byte for byte, %d with broker history", exact, len(fixtureIndexHistory))
}

type offEntry struct {
	key record.Offset
	pos record.Position
}

type timeEntry struct {
	ts  int64
	off record.Offset
}

func offEntries(b []byte, base record.Offset) []offEntry {
	var out []offEntry
	for i := 0; i+index.OffsetEntrySize <= len(b); i += index.OffsetEntrySize {
		out = append(out, offEntry{base + record.Offset(binary.BigEndian.Uint32(b[i:])), record.Position(binary.BigEndian.Uint32(b[i+4:]))})
	}
	return out
}

func timeEntries(b []byte, base record.Offset) []timeEntry {
	var out []timeEntry
	for i := 0; i+index.TimeEntrySize <= len(b); i += index.TimeEntrySize {
		out = append(out, timeEntry{int64(binary.BigEndian.Uint64(b[i:])), base + record.Offset(binary.BigEndian.Uint32(b[i+8:]))})
	}
	return out
}

// explainHistory checks that Kafka's index files are a valid history of
// the log as described at fixtureHistory, and measures it.
func explainHistory(t *testing.T, log []byte, base record.Offset, kOff, kTime, oOff, oTime []byte) fixtureHistory {
	t.Helper()
	// The batches, and the running max timestamp after each, with the last
	// offset of the batch that first reached it.
	type batch struct {
		pos         record.Position
		last        record.Offset
		maxTS       int64
		runTS       int64
		runTSOffset record.Offset
	}
	var batches []batch
	at := map[record.Position]int{}
	run, runOff := record.NoTimestamp, base
	sc := record.NewScanner(bytes.NewReader(log), 0, record.Position(len(log)), record.ScanOptions{})
	for sc.Next() {
		b := sc.Batch()
		if b.MaxTimestamp > run {
			run, runOff = b.MaxTimestamp, b.LastOffset()
		}
		at[b.Pos] = len(batches)
		batches = append(batches, batch{b.Pos, b.LastOffset(), b.MaxTimestamp, run, runOff})
	}
	require.NoError(t, sc.Err())
	validTime := func(e timeEntry) bool {
		for _, b := range batches {
			if b.runTS == e.ts && b.runTSOffset == e.off {
				return true
			}
		}
		return false
	}

	k, o := offEntries(kOff, base), offEntries(oOff, base)
	// Every Kafka offset entry names the batch at its position, more than
	// an interval after the previous one (or the segment start).
	prev := record.Position(0)
	for i, e := range k {
		j, ok := at[e.pos]
		require.True(t, ok, "Kafka offset entry %d (%d at %d) is at a batch start", i, e.key, e.pos)
		require.Equal(t, batches[j].last, e.key, "Kafka offset entry %d keys its batch's last offset", i)
		require.Greater(t, int64(e.pos-prev), int64(kafkaInterval), "Kafka offset entry %d follows the interval rule", i)
		prev = e.pos
	}
	// Kafka and the rebuild agree up to a restart; after it Kafka's
	// entries only come later.
	m := 0
	for m < len(k) && m < len(o) && k[m] == o[m] {
		m++
	}
	for i := m; i < len(k); i++ {
		require.Less(t, i, len(o)+1)
		if i < len(o) {
			require.Greater(t, k[i].pos, o[i].pos, "after a restart Kafka's offset entry %d comes later", i)
		}
	}
	delayed := len(o) - m

	kt, ot := timeEntries(kTime, base), timeEntries(oTime, base)
	require.NotEmpty(t, kt)
	require.NotEmpty(t, ot)
	require.Equal(t, ot[len(ot)-1], kt[len(kt)-1], "Kafka's last time entry is the segment's max timestamp, as recovery writes it")
	for i, e := range kt {
		require.True(t, validTime(e), "Kafka time entry %d (%d, %d) is a running max at the batch that reached it", i, e.ts, e.off)
		if i > 0 {
			require.Greater(t, e.ts, kt[i-1].ts)
			require.GreaterOrEqual(t, e.off, kt[i-1].off)
		}
	}
	// Kafka's file holds every time entry the rebuild makes with the
	// offset entries both have, plus the final one: a valid superset.
	inKafka := map[timeEntry]bool{}
	for _, e := range kt {
		inKafka[e] = true
	}
	paired := map[timeEntry]bool{}
	for _, e := range o[:m] {
		j := at[e.pos]
		te := timeEntry{batches[j].runTS, batches[j].runTSOffset}
		require.True(t, inKafka[te], "Kafka holds the time entry (%d, %d) recovery makes with offset entry %d", te.ts, te.off, e.key)
		paired[te] = true
	}
	// Kafka's entries that come with its own later offset entries are not
	// from closes.
	for _, e := range k[m:] {
		j := at[e.pos]
		paired[timeEntry{batches[j].runTS, batches[j].runTSOffset}] = true
	}
	closes := 0
	for i, e := range kt {
		if !paired[e] && i != len(kt)-1 {
			closes++
		}
	}
	return fixtureHistory{closeEntries: closes, delayedOffsetEntries: delayed}
}
