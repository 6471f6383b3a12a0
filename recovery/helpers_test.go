package recovery_test

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/layout"
	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/storage"
)

// testLogger keeps test output quiet unless -v.
func testLogger() *slog.Logger {
	if testing.Verbose() && os.Getenv("LOGFS_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// value is the deterministic value of the record at offset off: tests know
// every byte a record must hold without keeping it.
func value(off record.Offset) string {
	n := int(off)
	return fmt.Sprintf("value-%05d-", n) + strings.Repeat(string(rune('a'+n%26)), (n*7)%53)
}

// stamp is the deterministic timestamp of the record at offset off.
func stamp(off record.Offset) int64 { return 1_700_000_000_000 + int64(off)*1000 }

// batchInfo locates one batch of a segment.
type batchInfo struct {
	pos        record.Position
	size       int64
	base, last record.Offset
}

// segInfo is one segment of a built partition.
type segInfo struct {
	base    record.Offset
	size    int64
	batches []batchInfo
}

// built is a data directory holding one partition, "t-0", closed cleanly.
type built struct {
	data string // the data directory
	dir  string // the partition folder
	segs []segInfo
	end  record.Offset
}

func (b *built) path(seg int, suffix string) string {
	return layout.SegmentPath(b.dir, b.segs[seg].base, suffix)
}

func (b *built) last() int { return len(b.segs) - 1 }

// lastBatch returns the last batch of segment seg.
func (b *built) lastBatch(seg int) batchInfo {
	bs := b.segs[seg].batches
	return bs[len(bs)-1]
}

// topicConfig makes several segments of a few kilobytes with index entries
// in each: small enough to damage by hand, big enough to have structure.
var topicConfig = []string{"segment.bytes=2000", "index.interval.bytes=200", "segment.index.bytes=4096", "flush.ms=-1"}

func overrides(t testing.TB, kv ...string) storage.Overrides {
	o := storage.Overrides{}
	for _, p := range kv {
		require.NoError(t, o.SetPair(p))
	}
	return o
}

// appendN appends records [from, from+n), one batch each, with their
// deterministic values and timestamps.
func appendN(t testing.TB, p *storage.Partition, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		off := p.EndOffset()
		got, err := p.Append([]storage.Record{{Timestamp: stamp(off), Value: []byte(value(off))}})
		require.NoError(t, err)
		require.Equal(t, off, got)
	}
}

// buildPartition writes n records to a new data directory through storage
// and closes it cleanly.
func buildPartition(t testing.TB, n int) *built {
	t.Helper()
	data := t.TempDir()
	l, err := storage.Open(data, storage.Options{Logger: testLogger(), RetentionCheckInterval: -1})
	require.NoError(t, err)
	top, err := l.CreateTopic("t", 1, overrides(t, topicConfig...))
	require.NoError(t, err)
	p, err := top.Partition(0)
	require.NoError(t, err)
	appendN(t, p, n)
	require.NoError(t, l.Close())
	b := &built{data: data, dir: filepath.Join(data, "t-0"), end: record.Offset(n)}
	b.segs = scanSegments(t, b.dir)
	return b
}

// scanSegments describes every segment of a partition folder.
func scanSegments(t testing.TB, dir string) []segInfo {
	t.Helper()
	logs, err := filepath.Glob(filepath.Join(dir, "*"+layout.LogSuffix))
	require.NoError(t, err)
	sort.Strings(logs)
	var out []segInfo
	for _, p := range logs {
		base, _, ok := layout.ParseSegmentFileName(filepath.Base(p))
		require.True(t, ok)
		f, err := os.Open(p)
		require.NoError(t, err)
		st, err := f.Stat()
		require.NoError(t, err)
		s := segInfo{base: base, size: st.Size()}
		sc := record.NewScanner(f, 0, record.Position(st.Size()), record.ScanOptions{})
		for sc.Next() {
			b := sc.Batch()
			s.batches = append(s.batches, batchInfo{pos: b.Pos, size: b.Size(), base: b.BaseOffset, last: b.LastOffset()})
		}
		require.NoError(t, sc.Err())
		f.Close()
		out = append(out, s)
	}
	return out
}

// readRecords reads every record of p from its start and returns their
// offsets in order, checking each value; the first read error is returned.
func readRecords(t testing.TB, p *storage.Partition) ([]record.Offset, error) {
	t.Helper()
	r, err := p.NewReader(p.StartOffset())
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var offs []record.Offset
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			return offs, nil
		}
		if err != nil {
			return offs, err
		}
		require.Equal(t, value(rec.Offset), string(rec.Value), "record %d", rec.Offset)
		require.Equal(t, stamp(rec.Offset), rec.Timestamp, "record %d", rec.Offset)
		offs = append(offs, rec.Offset)
	}
}

// requireContiguous checks that offs is exactly [from, to).
func requireContiguous(t testing.TB, offs []record.Offset, from, to record.Offset) {
	t.Helper()
	require.Len(t, offs, int(to-from), "records [%d, %d)", from, to)
	for i, o := range offs {
		require.Equal(t, from+record.Offset(i), o, "record %d of [%d, %d)", i, from, to)
	}
}

func removeMarker(t testing.TB, data string) {
	t.Helper()
	require.NoError(t, os.Remove(filepath.Join(data, layout.CleanShutdownFile)))
}

func markerExists(data string) bool {
	_, err := os.Stat(filepath.Join(data, layout.CleanShutdownFile))
	return err == nil
}

// copyTree copies a directory tree (regular files and folders). A missing
// tree copies as nothing.
func copyTree(t testing.TB, from, to string) {
	t.Helper()
	if _, err := os.Stat(from); errors.Is(err, os.ErrNotExist) {
		return
	}
	err := filepath.Walk(from, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		dst := filepath.Join(to, rel)
		if info.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		if !info.Mode().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, data, 0o644)
	})
	require.NoError(t, err)
}

func readFile(t testing.TB, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	return b
}

func writeFile(t testing.TB, p string, b []byte) {
	t.Helper()
	require.NoError(t, os.WriteFile(p, b, 0o644))
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
