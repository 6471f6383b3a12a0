package recovery_test

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/logfs/logfs/layout"
	"github.com/logfs/logfs/recovery"
	"github.com/logfs/logfs/storage"
	"github.com/logfs/logfs/vfs"
)

// fuzzSeeds are the files of a small partition built by storage: a .log,
// its .index and .timeindex.
func fuzzSeeds(f *testing.F) (log, idx, tix []byte) {
	b := buildPartition(f, 12)
	return readFile(f, b.path(0, layout.LogSuffix)), readFile(f, b.path(0, layout.IndexSuffix)), readFile(f, b.path(0, layout.TimeIndexSuffix))
}

// FuzzLoadPartition feeds arbitrary bytes as a segment's .log, .index and
// .timeindex to every kind of load, then opens the result with storage and
// reads it all: nothing may panic, a writable unclean load must leave a
// partition whose every record reads back, and loading again finds nothing
// left to cut.
func FuzzLoadPartition(f *testing.F) {
	log, idx, tix := fuzzSeeds(f)
	f.Add(log, idx, tix)
	f.Add(log[:len(log)-7], idx, tix)
	f.Add(append(log[:len(log):len(log)], make([]byte, 100)...), idx, make([]byte, 24))
	f.Add([]byte{}, []byte{0, 0, 0, 1, 0, 0, 0, 9}, []byte{})
	f.Add(log, []byte{1, 2, 3}, tix[:5])
	f.Fuzz(func(t *testing.T, log, idx, tix []byte) {
		for _, mode := range []struct {
			clean, readOnly bool
		}{{false, false}, {true, false}, {false, true}, {true, true}} {
			data := fastTempDir(t)
			dir := filepath.Join(data, "f-0")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			writeFile(t, layout.SegmentPath(dir, 0, layout.LogSuffix), log)
			writeFile(t, layout.SegmentPath(dir, 0, layout.IndexSuffix), idx)
			writeFile(t, layout.SegmentPath(dir, 0, layout.TimeIndexSuffix), tix)
			o := recovery.PartitionOptions{FS: vfs.Default, Dir: dir, RecoveryPoint: -1, LogStart: -1,
				Clean: mode.clean, ReadOnly: mode.readOnly, Logger: testLogger(),
				IndexConfig: recovery.IndexConfig{IndexBytes: 1024, IndexInterval: 100}}
			st, err := recovery.LoadPartition(o)
			if err != nil {
				if errors.Is(err, recovery.ErrLegacyFormat) {
					continue
				}
				t.Fatalf("%+v: %v", mode, err)
			}
			if len(st.Segments) == 0 || st.LogStart > st.NextOffset || st.RecoveryPoint > st.NextOffset {
				t.Fatalf("%+v: inconsistent state %+v", mode, st)
			}
			if !mode.clean && !mode.readOnly {
				again, err := recovery.LoadPartition(o)
				if err != nil || len(again.Report.Cuts)+len(again.Report.Dropped) > 0 || again.NextOffset != st.NextOffset {
					t.Fatalf("a second load changed things: %v %+v", err, again.Report)
				}
			}
			// Through storage: whatever the files, reads end in records,
			// io.EOF or an error, never a panic; after a writable unclean
			// load, in io.EOF.
			opts := storage.Options{ReadOnly: mode.readOnly, Logger: testLogger(), RetentionCheckInterval: -1}
			if mode.clean {
				recovery.WriteCleanShutdownMarker(vfs.Default, data)
			}
			l, err := storage.Open(data, opts)
			if err != nil {
				if errors.Is(err, recovery.ErrLegacyFormat) {
					continue
				}
				t.Fatalf("%+v: open: %v", mode, err)
			}
			p, err := l.Partition("f", 0)
			if err != nil {
				t.Fatal(err)
			}
			readErr := readToEnd(p)
			if !mode.clean && !mode.readOnly && readErr != nil {
				t.Fatalf("after recovery: %v", readErr)
			}
			p.OffsetForTime(0)
			p.OffsetForTime(1 << 50)
			p.Segments()
			l.Check()
			l.Close()
		}
	})
}

// readToEnd reads every record of p from its start.
func readToEnd(p *storage.Partition) error {
	r, err := p.NewReader(p.StartOffset())
	if err != nil {
		return err
	}
	defer r.Close()
	for n := 0; n < 1<<16; n++ {
		if _, err := r.Next(); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
	return nil
}
