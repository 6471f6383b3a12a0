package storage

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/index"
	"github.com/logfs/logfs/layout"
	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/vfs"
)

// A read-only log beside a live writer in another process (README: consume,
// topic list|describe, check and mount --read-only "work beside a running
// mount"): here both are in one process, on one data directory, and the
// reader must neither take the writer's newer index entries for corruption
// nor answer from them.

// adv35TS is the timestamp of offset 0; offset o is stamped adv35TS+o.
const adv35TS = int64(1_700_000_000_000)

// adv35Value is the value of the record at offset o.
func adv35Value(o record.Offset) string { return fmt.Sprintf("v-%06d", o) }

// roAppend appends n one-record batches to p from its end on.
func roAppend(t *testing.T, p *Partition, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		o := p.EndOffset()
		_, err := p.Append([]Record{{Timestamp: adv35TS + int64(o), Value: []byte(adv35Value(o))}})
		require.NoError(t, err)
	}
}

// adv35Hook is a file system that runs hook once, the first time an
// offset index file is opened: in the middle of a read-only Open, after it
// listed the segments and took the size of the last one.
type adv35Hook struct {
	vfs.FS
	once sync.Once
	hook func()
}

func (h *adv35Hook) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	if strings.HasSuffix(name, layout.IndexSuffix) {
		h.once.Do(h.hook)
	}
	return h.FS.OpenFile(name, flag, perm)
}

// adv35Verify checks what reader r says of partition t-0, whose records
// are offsets 0 to n-1: every record read from its offset, every offset
// found by its timestamp, the last segment's max timestamp, the values
// view, Check, and that nothing was logged as a problem.
func adv35Verify(t *testing.T, r *Log, logs *logCounter, n record.Offset) {
	t.Helper()
	p, err := r.Partition("t", 0)
	require.NoError(t, err)
	require.Equal(t, n, p.EndOffset())
	for o := record.Offset(0); o < n; o++ {
		rd, err := p.NewReader(o)
		require.NoError(t, err)
		rec, err := rd.Next()
		require.NoError(t, err)
		require.Equal(t, o, rec.Offset)
		require.Equal(t, adv35Value(o), string(rec.Value))
		require.NoError(t, rd.Close())
		got, err := p.OffsetForTime(adv35TS + int64(o))
		require.NoError(t, err)
		require.Equal(t, o, got, "offset for the timestamp of %d", o)
	}
	got, err := p.OffsetForTime(adv35TS + int64(n))
	require.NoError(t, err)
	require.Equal(t, n, got, "no record is that recent: the end")
	adv35Quiet(t, logs)
	segs, err := p.Segments()
	require.NoError(t, err)
	require.Equal(t, adv35TS+int64(n)-1, segs[len(segs)-1].MaxTimestamp, "the newest timestamp this log shows")
	var want strings.Builder
	for o := record.Offset(0); o < n; o++ {
		want.WriteString(adv35Value(o) + "\n")
	}
	v, err := p.NewView(Values, 0)
	require.NoError(t, err)
	size, err := v.Size()
	require.NoError(t, err)
	require.EqualValues(t, want.Len(), size)
	body, err := io.ReadAll(io.NewSectionReader(v, 0, size))
	require.NoError(t, err)
	require.Equal(t, want.String(), string(body))
	require.NoError(t, v.Close())
	require.NoError(t, r.Check())
	adv35Quiet(t, logs)
}

// adv35Quiet requires that the reader logged no problem.
func adv35Quiet(t *testing.T, logs *logCounter) {
	t.Helper()
	logs.mu.Lock()
	defer logs.mu.Unlock()
	for _, m := range logs.msgs {
		require.NotContains(t, m, "level=ERROR", "a problem logged by the reader")
		require.NotContains(t, m, "level=WARN", "a problem logged by the reader")
	}
}

// adv35NoFallback requires that no segment of r's t-0 is indexed in memory.
func adv35NoFallback(t *testing.T, r *Log) {
	t.Helper()
	p, err := r.Partition("t", 0)
	require.NoError(t, err)
	for _, s := range p.segments() {
		s.idxMu.RLock()
		fell := s.fallback != nil
		s.idxMu.RUnlock()
		require.False(t, fell, "segment %d indexed in memory", s.base)
	}
}

// TestReadOnlyBesideWriterAdv35: a read-only log takes the size of its last
// segment when it opens and indexes that segment lazily, from the files,
// when first used. Meanwhile the writer goes on appending and writes the
// index entries of the batches after that size to the files (a page of
// entries at a time, and all of them when it rolls the segment). The
// reader must use the entries for what it sees and leave the rest out:
// before, it took the offset entries past its size for corruption, logged
// an error and indexed the segment in memory, and it took the writer's
// newest time entry for the segment's max timestamp; Check failed.
func TestReadOnlyBesideWriterAdv35(t *testing.T) {
	// A writer's time index holds a page of entries in memory and writes
	// it when the entry after it comes: the first batch has no entry, so
	// timePage+1 batches leave one full page in memory.
	const timePage = 4096 / index.TimeEntrySize
	for name, c := range map[string]struct {
		clean    bool   // the writer closes before the reader opens and opens again after
		first    int    // batches before the reader opens: what it sees
		inOpen   int    // batches appended while the reader opens (see adv35Hook), which it does not see
		segBytes string // the writer rolls its segment after 650 batches with "50000"
		read     bool   // the reader reads its records before the writer appends
		inMemory bool   // the load cannot vouch for the last segment's index files: it indexes it in memory
	}{
		// The writer opens after the reader: a clean load trusts the last
		// segment's index files, as they were when the writer closed.
		"clean open": {clean: true, first: 100, segBytes: "10000000"},
		// The writer opens after the reader took the clean shutdown marker
		// as its word, and appends while the reader looks for the end of
		// the log in the last segment.
		"clean open, writer starts during it": {clean: true, first: 100, inOpen: 1200, segBytes: "10000000"},
		// The reader opens beside the writer and recovers the last
		// segment: its index files keep the rule against the size it took
		// (the writer wrote its page of time entries just then, for the
		// batch after), so it uses them.
		"recovered open": {first: timePage + 1, inOpen: 1, segBytes: "10000000"},
		// The usual case: the writer holds its newest entries in memory,
		// so the files lack them and the load does not vouch for them;
		// Check still judges them.
		"recovered open, index files lag": {first: 100, segBytes: "10000000", inMemory: true},
		"roll":                            {clean: true, first: 100, segBytes: "50000"},
		"roll after a read":               {clean: true, first: 100, segBytes: "50000", read: true},
		// The writer keeps the values view index of the segment it made and
		// writes it beside the segment when it rolls it.
		"recovered open, roll": {first: timePage + 1, inOpen: 1, segBytes: "50000"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			wo := Options{Logger: testLogger(t), RetentionCheckInterval: -1}
			w, err := Open(dir, wo)
			require.NoError(t, err)
			defer func() { require.NoError(t, w.Close()) }()
			top, err := w.CreateTopic("t", 1, small("index.interval.bytes=0", "segment.bytes="+c.segBytes))
			require.NoError(t, err)
			wp, err := top.Partition(0)
			require.NoError(t, err)
			roAppend(t, wp, c.first)
			if c.clean {
				require.NoError(t, w.Close())
			}
			reopen := func() {
				if c.clean {
					w, err = Open(dir, wo)
					require.NoError(t, err)
					wp, err = w.Partition("t", 0)
					require.NoError(t, err)
				}
			}
			fs := &adv35Hook{FS: vfs.Default, hook: func() {
				if c.inOpen > 0 {
					reopen()
					roAppend(t, wp, c.inOpen)
				}
			}}
			var logs logCounter
			r, err := Open(dir, Options{FS: fs, ReadOnly: true, Logger: logs.logger()})
			require.NoError(t, err)
			defer func() { require.NoError(t, r.Close()) }()
			if c.inOpen == 0 {
				reopen()
			}
			if !c.inMemory {
				adv35NoFallback(t, r) // the load vouched for the index files
			}
			if c.read {
				rp, err := r.Partition("t", 0)
				require.NoError(t, err)
				require.Len(t, readAll(t, rp, 0), c.first)
			}
			roAppend(t, wp, 1200)
			if c.segBytes == "50000" {
				require.Greater(t, len(wp.SegmentBases()), 1, "the writer rolled")
			}
			adv35Verify(t, r, &logs, record.Offset(c.first))
			if !c.inMemory {
				adv35NoFallback(t, r)
			}
		})
	}
}

// TestReadOnlyCorruptLastIndexAdv35: what TestReadOnlyBesideWriterAdv35
// allows a writer's entries past the size a read-only log took is not
// allowed a corrupt file: an entry past the end of the log with no writer
// beside it, past the end of a log that did grow, or wrong against the
// batches this log sees. Each is reported, the segment is indexed in
// memory, reads stay right and Check fails.
func TestReadOnlyCorruptLastIndexAdv35(t *testing.T) {
	for _, damage := range []string{"past the end", "past the end of a longer log", "wrong entry, longer log"} {
		t.Run(damage, func(t *testing.T) {
			dir := t.TempDir()
			pdir := buildSegments(t, dir, 300)
			var logs logCounter
			r, err := Open(dir, Options{ReadOnly: true, Logger: logs.logger()})
			require.NoError(t, err)
			defer func() { require.NoError(t, r.Close()) }()
			p, err := r.Partition("t", 0)
			require.NoError(t, err)
			last := p.segments()[len(p.segments())-1]
			size := uint32(last.size.Load())
			ipath := layout.SegmentPath(pdir, last.base, layout.IndexSuffix)
			data, err := os.ReadFile(ipath)
			require.NoError(t, err)
			require.NotEmpty(t, data)
			lastRel := binary.BigEndian.Uint32(data[len(data)-8:])
			lastPos := binary.BigEndian.Uint32(data[len(data)-4:])
			past := func(pos uint32) []byte {
				return binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, lastRel+100), pos)
			}
			grow := func() {
				f, err := os.OpenFile(layout.SegmentPath(pdir, last.base, layout.LogSuffix), os.O_WRONLY|os.O_APPEND, 0)
				require.NoError(t, err)
				_, err = f.Write(make([]byte, 4096))
				require.NoError(t, err)
				require.NoError(t, f.Close())
			}
			switch damage {
			case "past the end":
				data = append(data, past(size+100)...)
			case "past the end of a longer log":
				grow()
				data = append(data, past(size+5000)...)
			case "wrong entry, longer log":
				grow()
				binary.BigEndian.PutUint32(data[len(data)-4:], lastPos+1) // not where a batch starts
				data = append(data, past(size+100)...)
			}
			require.NoError(t, os.WriteFile(ipath, data, 0o644))
			require.Len(t, readAll(t, p, 0), 300)
			for _, o := range []record.Offset{0, 150, 299} {
				got, err := p.OffsetForTime(1_700_000_000_000 + int64(o))
				require.NoError(t, err)
				require.Equal(t, o, got)
			}
			require.Equal(t, 1, logs.count("segment index is unusable; indexing the log in memory instead"))
			require.ErrorIs(t, r.Check(), ErrCheck)
		})
	}
}

// TestReadOnlyBesideRetentionAdv35: the writer's retention deletes segments
// a read-only log opened (renamed to *.deleted, then removed after
// file.delete.delay.ms). The reader still reads them from the files it
// holds open, but their index files are gone from their names by the time
// it first uses them: it indexes those segments in memory, and that is no
// problem to report.
func TestReadOnlyBesideRetentionAdv35(t *testing.T) {
	for _, delay := range []string{"0", "60000"} {
		t.Run("file.delete.delay.ms="+delay, func(t *testing.T) {
			dir := t.TempDir()
			w, err := Open(dir, Options{Logger: testLogger(t), RetentionCheckInterval: -1})
			require.NoError(t, err)
			defer func() { require.NoError(t, w.Close()) }()
			top, err := w.CreateTopic("t", 1, small("index.interval.bytes=0", "segment.bytes=2000",
				"retention.bytes=0", "retention.ms=-1", "file.delete.delay.ms="+delay))
			require.NoError(t, err)
			wp, err := top.Partition(0)
			require.NoError(t, err)
			roAppend(t, wp, 200)
			var logs logCounter
			r, err := Open(dir, Options{ReadOnly: true, Logger: logs.logger()})
			require.NoError(t, err)
			defer func() { require.NoError(t, r.Close()) }()
			rp, err := r.Partition("t", 0)
			require.NoError(t, err)
			bases := rp.SegmentBases()
			require.Greater(t, len(bases), 5)
			n, err := w.EnforceRetention()
			require.NoError(t, err)
			require.Equal(t, len(bases), n, "every segment the reader has: retention rolled the active one first")
			adv35Verify(t, r, &logs, 200)
		})
	}
}
