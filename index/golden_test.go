package index

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/internal/fixtures"
	"github.com/logfs/logfs/record"
)

// logBatch is what the golden tests need to know of a batch.
type logBatch struct {
	pos      record.Position
	last     record.Offset
	maxTSNow int64 // the segment's largest timestamp up to this batch
}

// scanLog reads the batch headers of the segment's .log next to an index
// file, with the segment's base offset (the file name) and the log size.
func scanLog(t testing.TB, indexPath string) (record.Offset, record.Position, []logBatch) {
	t.Helper()
	name := filepath.Base(indexPath)
	stem := name[:strings.IndexByte(name, '.')]
	base, err := strconv.ParseInt(stem, 10, 64)
	require.NoError(t, err, "segment file name %s", name)
	f, err := os.Open(filepath.Join(filepath.Dir(indexPath), stem+".log"))
	require.NoError(t, err)
	defer f.Close()
	st, err := f.Stat()
	require.NoError(t, err)
	var batches []logBatch
	maxTS := int64(-1)
	s := record.NewScanner(f, 0, record.Position(st.Size()), record.ScanOptions{HeadersOnly: true})
	for s.Next() {
		b := s.Batch()
		maxTS = max(maxTS, b.MaxTimestamp)
		batches = append(batches, logBatch{pos: b.Pos, last: b.LastOffset(), maxTSNow: maxTS})
	}
	require.NoError(t, s.Err())
	return record.Offset(base), record.Position(st.Size()), batches
}

func rel(t *testing.T, p string) string {
	r, err := filepath.Rel(fixtures.Dir(t), p)
	require.NoError(t, err)
	return r
}

// TestGoldenOffsetIndexes opens every .index a Kafka broker wrote among the
// fixtures, checks it against its .log, and checks that every entry points
// at the start of a batch whose last offset is the entry's key (the
// invariant Kafka's DumpLogSegments verifies).
func TestGoldenOffsetIndexes(t *testing.T) {
	files := fixtures.Files(t, ".index")
	require.NotEmpty(t, files)
	entries := 0
	for _, p := range files {
		t.Run(rel(t, p), func(t *testing.T) {
			base, size, batches := scanLog(t, p)
			byPos := make(map[record.Position]logBatch, len(batches))
			for _, b := range batches {
				byPos[b.pos] = b
			}
			x, err := OpenOffsetIndex(p, base, Options{LogSize: size})
			require.NoError(t, err)
			defer x.Close()
			require.NoError(t, x.Check())
			n, err := x.Entries()
			require.NoError(t, err)
			require.Equal(t, fileSize(t, p), int64(n*OffsetEntrySize))
			for i := range n {
				off, pos, err := x.Entry(i)
				require.NoError(t, err)
				b, ok := byPos[pos]
				require.True(t, ok, "entry %d position %d is not a batch start", i, pos)
				require.Equal(t, b.last, off, "entry %d key", i)
				// Looking the key up finds the entry.
				lo, lp, err := x.Lookup(off)
				require.NoError(t, err)
				require.Equal(t, off, lo)
				require.Equal(t, pos, lp)
				entries++
			}
			if len(batches) > 0 {
				// The first offset of the segment is below every key.
				lo, lp, err := x.Lookup(base)
				require.NoError(t, err)
				require.Equal(t, base, lo)
				require.Equal(t, record.Position(0), lp)
			}
		})
	}
	t.Logf("%d offset indexes, %d entries", len(files), entries)
}

// TestGoldenTimeIndexes opens every .timeindex among the fixtures and
// checks that every entry (T, O) names a batch whose last offset is O and
// at which the segment's largest timestamp so far is T; the last entry is
// the segment's largest timestamp.
func TestGoldenTimeIndexes(t *testing.T) {
	files := fixtures.Files(t, ".timeindex")
	require.NotEmpty(t, files)
	entries := 0
	for _, p := range files {
		t.Run(rel(t, p), func(t *testing.T) {
			base, _, batches := scanLog(t, p)
			byLast := make(map[record.Offset]logBatch, len(batches))
			for _, b := range batches {
				byLast[b.last] = b
			}
			x, err := OpenTimeIndex(p, base, Options{})
			require.NoError(t, err)
			defer x.Close()
			require.NoError(t, x.Check())
			n, err := x.Entries()
			require.NoError(t, err)
			require.Equal(t, fileSize(t, p), int64(n*TimeEntrySize))
			for i := range n {
				ts, off, err := x.Entry(i)
				require.NoError(t, err)
				b, ok := byLast[off]
				require.True(t, ok, "entry %d offset %d is no batch's last offset", i, off)
				require.Equal(t, b.maxTSNow, ts, "entry %d timestamp", i)
				lts, loff, err := x.Lookup(ts)
				require.NoError(t, err)
				require.Equal(t, ts, lts)
				require.Equal(t, off, loff)
				entries++
			}
			if n > 0 {
				ts, _, err := x.LastEntry()
				require.NoError(t, err)
				require.Equal(t, batches[len(batches)-1].maxTSNow, ts, "the last entry is the segment's largest timestamp")
			}
		})
	}
	t.Logf("%d time indexes, %d entries", len(files), entries)
}

// TestGoldenReopenAsActive copies each fixture segment's indexes (never
// into the repository) and reopens them writable, as the active segment
// after a clean shutdown: they re-expand, keep their entries and trim back
// to the same bytes.
func TestGoldenReopenAsActive(t *testing.T) {
	for _, suffix := range []string{".index", ".timeindex"} {
		for _, p := range fixtures.Files(t, suffix) {
			t.Run(rel(t, p), func(t *testing.T) {
				base, size, _ := scanLog(t, p)
				orig, err := os.ReadFile(p)
				require.NoError(t, err)
				q := writeFile(t, filepath.Base(p), orig)
				o := Options{LogSize: size, MaxBytes: 4096, Writable: true}
				var c *file
				if suffix == ".index" {
					x, err := OpenOffsetIndex(q, base, o)
					require.NoError(t, err)
					c = &x.file
				} else {
					x, err := OpenTimeIndex(q, base, o)
					require.NoError(t, err)
					c = &x.file
				}
				require.False(t, c.IsFull())
				require.NoError(t, c.Check())
				require.NoError(t, c.Close())
				got, err := os.ReadFile(q)
				require.NoError(t, err)
				require.Equal(t, orig, got)
			})
		}
	}
}
