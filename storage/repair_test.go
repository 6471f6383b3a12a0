package storage

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/layout"
	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/recovery"
	"github.com/logfs/logfs/vfs"
)

// countingFS counts the bytes read from .log files and the files opened.
type countingFS struct {
	vfs.FS
	logBytes atomic.Int64
	logReads atomic.Int64
	opened   atomic.Int64
	logSyncs atomic.Int64
}

func (c *countingFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	f, err := c.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	c.opened.Add(1)
	if strings.HasSuffix(name, layout.LogSuffix) {
		return countingFile{File: f, n: &c.logBytes, reads: &c.logReads, syncs: &c.logSyncs}, nil
	}
	return f, nil
}

type countingFile struct {
	vfs.File
	n     *atomic.Int64
	reads *atomic.Int64
	syncs *atomic.Int64
}

func (f countingFile) Sync() error {
	f.syncs.Add(1)
	return f.File.Sync()
}

func (f countingFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.File.ReadAt(p, off)
	f.n.Add(int64(n))
	f.reads.Add(1)
	return n, err
}

// logCounter counts log records whose message contains a string.
type logCounter struct {
	mu   sync.Mutex
	msgs []string
}

func (c *logCounter) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.msgs = append(c.msgs, string(p))
		return len(p), nil
	}), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func (c *logCounter) count(sub string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, m := range c.msgs {
		if strings.Contains(m, sub) {
			n++
		}
	}
	return n
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// buildSegments writes n records of rolling segments and closes the log
// cleanly. It returns the partition folder.
func buildSegments(t *testing.T, dir string, n int) string {
	t.Helper()
	l, err := Open(dir, Options{Logger: testLogger(t), RetentionCheckInterval: -1})
	require.NoError(t, err)
	top, err := l.CreateTopic("t", 1, small("segment.bytes=4000", "index.interval.bytes=300", "segment.index.bytes=8192"))
	require.NoError(t, err)
	p, err := top.Partition(0)
	require.NoError(t, err)
	for i := 0; i < n; i++ {
		_, err := p.Append([]Record{{Timestamp: 1_700_000_000_000 + int64(i), Value: []byte(fmt.Sprintf("record-%04d-%s", i, strings.Repeat("x", i%40)))}})
		require.NoError(t, err)
	}
	require.NoError(t, l.Close())
	return filepath.Join(dir, "t-0")
}

// TestCleanOpenReadsNothing checks the clean-shutdown promise: after Close,
// Open deletes the marker, trusts the checkpoints, reads no byte of a .log
// but those of the last segment from its last offset-index entry (to find
// the log end) and maps no index.
func TestCleanOpenReadsNothing(t *testing.T) {
	dir := t.TempDir()
	pdir := buildSegments(t, dir, 300)
	require.FileExists(t, filepath.Join(dir, layout.CleanShutdownFile))
	fs := &countingFS{FS: vfs.Default}
	l, err := Open(dir, Options{FS: fs, Logger: testLogger(t), RetentionCheckInterval: -1})
	require.NoError(t, err)
	require.NoFileExists(t, filepath.Join(dir, layout.CleanShutdownFile), "the marker is deleted before loading")
	require.True(t, l.RecoveryReport().Clean)
	p, err := l.Partition("t", 0)
	require.NoError(t, err)
	segs := p.segments()
	last := segs[len(segs)-1]
	_, lastPos, err := last.offIdx.LastEntry()
	require.NoError(t, err)
	require.LessOrEqual(t, fs.logBytes.Load(), last.size.Load()-int64(lastPos), "log bytes read: the last segment's from its last index entry")
	require.Greater(t, len(segs), 5)
	for _, s := range segs {
		s.idxMu.RLock()
		require.False(t, s.offIdx.Mapped(), "segment %d offset index mapped", s.base)
		require.False(t, s.timeIdx.Mapped(), "segment %d time index mapped", s.base)
		s.idxMu.RUnlock()
	}
	require.Equal(t, record.Offset(300), p.EndOffset())
	// What was trusted is right.
	require.Len(t, readAll(t, p, 0), 300)
	require.NoError(t, l.Check())
	require.NoError(t, l.Close())
	_ = pdir
}

// TestIndexRebuiltOnFirstUse damages the index files of a segment below the
// recovery point and has many readers meet them at once: the first rebuilds
// them on disk, byte for byte as they were, the others wait and use the new
// files, and every read is right.
func TestIndexRebuiltOnFirstUse(t *testing.T) {
	for _, damage := range []string{"zero-padded", "cut", "removed"} {
		// A zero tail ends an index's entries (Kafka's untrimmed active
		// segment): such a file is valid, used and left as it is.
		valid := damage == "zero-padded"
		t.Run(damage, func(t *testing.T) {
			dir := t.TempDir()
			pdir := buildSegments(t, dir, 400)
			seg0 := layout.SegmentPath(pdir, 0, layout.IndexSuffix)
			tseg0 := layout.SegmentPath(pdir, 0, layout.TimeIndexSuffix)
			origOff, err := os.ReadFile(seg0)
			require.NoError(t, err)
			origTime, err := os.ReadFile(tseg0)
			require.NoError(t, err)
			require.NotEmpty(t, origOff)
			for _, p := range []string{seg0, tseg0} {
				switch damage {
				case "zero-padded":
					f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
					require.NoError(t, err)
					_, err = f.Write(make([]byte, 4800))
					require.NoError(t, err)
					require.NoError(t, f.Close())
				case "cut":
					require.NoError(t, os.Truncate(p, 5))
				}
			}
			var logs logCounter
			l, err := Open(dir, Options{Logger: logs.logger(), RetentionCheckInterval: -1})
			require.NoError(t, err)
			if damage == "removed" {
				// Removed after open: the lazily opened files vanish under it.
				require.NoError(t, os.Remove(seg0))
				require.NoError(t, os.Remove(tseg0))
			}
			p, err := l.Partition("t", 0)
			require.NoError(t, err)
			var wg sync.WaitGroup
			for g := 0; g < 8; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for from := record.Offset(g); from < 40; from += 8 {
						got := readAll(t, p, from)
						require.Len(t, got, 400-int(from))
						require.True(t, strings.HasPrefix(got[0], fmt.Sprintf("%d:record-%04d-", from, from)), got[0])
						off, err := p.OffsetForTime(1_700_000_000_000 + int64(from))
						require.NoError(t, err)
						require.Equal(t, from, off)
					}
				}()
			}
			wg.Wait()
			if valid {
				require.Zero(t, logs.count("rebuilding it from the log"), "a valid file is not rebuilt")
				origOff = append(origOff, make([]byte, 4800)...)
				origTime = append(origTime, make([]byte, 4800)...)
			} else {
				require.Equal(t, 1, logs.count("rebuilding it from the log"), "rebuilt once")
			}
			require.Zero(t, logs.count("in memory"), "no fallback on a writable log")
			require.NoError(t, l.Check())
			gotOff, err := os.ReadFile(seg0)
			require.NoError(t, err)
			gotTime, err := os.ReadFile(tseg0)
			require.NoError(t, err)
			require.True(t, bytes.Equal(origOff, gotOff), "offset index rebuilt byte for byte, or left alone")
			require.True(t, bytes.Equal(origTime, gotTime), "time index rebuilt byte for byte, or left alone")
			require.NoError(t, l.Close())
		})
	}
}

// TestIndexFallbackReadOnly: a read-only log cannot rewrite a corrupt index;
// it indexes the segment in memory and leaves the file alone.
func TestIndexFallbackReadOnly(t *testing.T) {
	dir := t.TempDir()
	pdir := buildSegments(t, dir, 300)
	seg0 := layout.SegmentPath(pdir, 0, layout.IndexSuffix)
	require.NoError(t, os.Truncate(seg0, 5))
	var logs logCounter
	l, err := Open(dir, Options{ReadOnly: true, Logger: logs.logger()})
	require.NoError(t, err)
	p, err := l.Partition("t", 0)
	require.NoError(t, err)
	require.Len(t, readAll(t, p, 10), 290)
	require.Equal(t, 1, logs.count("in memory"))
	st, err := os.Stat(seg0)
	require.NoError(t, err)
	require.EqualValues(t, 5, st.Size(), "the file is left alone")
	require.Error(t, l.Check(), "Check reports the corrupt index of a read-only log")
	require.NoError(t, l.Close())
}

// TestActiveIndexRebuiltForAppend: an untrimmed active index after a
// "clean" shutdown whose trim was lost (KAFKA-12734, KAFKA-19200 shapes)
// no longer fails appends: it is rebuilt when the segment opens for
// writing.
func TestActiveIndexRebuiltForAppend(t *testing.T) {
	dir := t.TempDir()
	pdir := buildSegments(t, dir, 300)
	l, err := Open(dir, Options{Logger: testLogger(t), RetentionCheckInterval: -1})
	require.NoError(t, err)
	p, err := l.Partition("t", 0)
	require.NoError(t, err)
	last := p.SegmentBases()[len(p.SegmentBases())-1]
	require.NoError(t, l.Close())
	for _, suffix := range []string{layout.IndexSuffix, layout.TimeIndexSuffix} {
		path := layout.SegmentPath(pdir, last, suffix)
		require.NoError(t, os.Truncate(path, 8192)) // preallocated, never trimmed
	}
	l, err = Open(dir, Options{Logger: testLogger(t), RetentionCheckInterval: -1})
	require.NoError(t, err)
	p, err = l.Partition("t", 0)
	require.NoError(t, err)
	_, err = p.Append(values(5, "after"))
	require.NoError(t, err)
	require.NoError(t, l.Check())
	require.NoError(t, p.Wait(context.Background(), 304))
	require.NoError(t, l.Close())
	l, err = Open(dir, Options{Logger: testLogger(t), RetentionCheckInterval: -1})
	require.NoError(t, err)
	p, err = l.Partition("t", 0)
	require.NoError(t, err)
	require.Len(t, readAll(t, p, 0), 305)
	require.NoError(t, l.Check())
	require.NoError(t, l.Close())
}

// TestCloseLeavesTrimmedDurableIndexes: after Close the active segment's
// indexes are trimmed to their entries and end with the segment's max
// timestamp, before the marker is written.
func TestCloseLeavesTrimmedDurableIndexes(t *testing.T) {
	dir := t.TempDir()
	pdir := buildSegments(t, dir, 50)
	ents, err := os.ReadDir(pdir)
	require.NoError(t, err)
	for _, e := range ents {
		info, err := e.Info()
		require.NoError(t, err)
		switch {
		case strings.HasSuffix(e.Name(), layout.IndexSuffix):
			require.Zero(t, info.Size()%8, e.Name())
			require.Less(t, info.Size(), int64(8192), "%s trimmed", e.Name())
		case strings.HasSuffix(e.Name(), layout.TimeIndexSuffix):
			require.Zero(t, info.Size()%12, e.Name())
			require.Less(t, info.Size(), int64(8184), "%s trimmed", e.Name())
			require.NotZero(t, info.Size(), "%s has its final entry", e.Name())
		}
	}
	_ = io.Discard
}

// TestUncleanOpenSyncsOnlyWhatItRecovered: after a crash, Open makes what
// recovery scanned durable before it records a new recovery point, but does
// not fsync the segments the old recovery point already vouched for.
func TestUncleanOpenSyncsOnlyWhatItRecovered(t *testing.T) {
	dir := t.TempDir()
	buildSegments(t, dir, 400)
	require.NoError(t, os.Remove(filepath.Join(dir, layout.CleanShutdownFile)))
	// The checkpoint lags the data, as after a crash: offsets from 330 on
	// were written after it. Segments hold 40 records: 320 and 360 are
	// scanned and must be fsynced, the eight below are vouched for.
	tp := recovery.TopicPartition{Topic: "t", Partition: 0}
	require.NoError(t, recovery.WriteCheckpoint(vfs.Default, filepath.Join(dir, layout.RecoveryPointFile),
		map[recovery.TopicPartition]record.Offset{tp: 330}))
	fs := &countingFS{FS: vfs.Default}
	l, err := Open(dir, Options{FS: fs, Logger: testLogger(t), RetentionCheckInterval: -1})
	require.NoError(t, err)
	p, err := l.Partition("t", 0)
	require.NoError(t, err)
	require.Equal(t, []record.Offset{0, 40, 80, 120, 160, 200, 240, 280, 320, 360}, p.SegmentBases())
	require.EqualValues(t, 2, fs.logSyncs.Load(), "only the scanned segments are fsynced")
	require.Equal(t, record.Offset(400), p.RecoveryPoint())
	require.NoError(t, l.Check())
	require.NoError(t, l.Close())
}

// TestIndexEndsCheckedOnFirstUse: index files that pass the entry rules but
// do not match the log are caught on first use and rebuilt: a time index
// whose only entry was zeroed by a lost write-back (it reads (0, base), so
// the segment would look 55 years old to retention.ms: KAFKA-10207), and
// an offset index left from a longer log.
func TestIndexEndsCheckedOnFirstUse(t *testing.T) {
	for _, damage := range []string{"time index zeroed", "offset index stale"} {
		t.Run(damage, func(t *testing.T) {
			dir := t.TempDir()
			l, err := Open(dir, Options{Logger: testLogger(t), RetentionCheckInterval: -1})
			require.NoError(t, err)
			// No interval entries: each time index holds only its final entry.
			top, err := l.CreateTopic("t", 1, small("segment.bytes=2000", "index.interval.bytes=100000", "retention.ms=86400000"))
			require.NoError(t, err)
			p, err := top.Partition(0)
			require.NoError(t, err)
			now := time.Now().UnixMilli()
			for i := 0; i < 100; i++ {
				_, err := p.Append([]Record{{Timestamp: now + int64(i), Value: []byte(fmt.Sprintf("record-%04d-%s", i, strings.Repeat("x", 20)))}})
				require.NoError(t, err)
			}
			require.NoError(t, l.Close())
			pdir := filepath.Join(dir, "t-0")
			tix := layout.SegmentPath(pdir, 0, layout.TimeIndexSuffix)
			orig, err := os.ReadFile(tix)
			require.NoError(t, err)
			require.Len(t, orig, 12)
			switch damage {
			case "time index zeroed":
				require.NoError(t, os.WriteFile(tix, make([]byte, 12), 0o644))
			case "offset index stale":
				// An entry at a position inside the log that is not a batch start.
				require.NoError(t, os.WriteFile(layout.SegmentPath(pdir, 0, layout.IndexSuffix), []byte{0, 0, 0, 5, 0, 0, 0, 7}, 0o644))
			}
			var logs logCounter
			l, err = Open(dir, Options{Logger: logs.logger(), RetentionCheckInterval: -1})
			require.NoError(t, err)
			p, err = l.Partition("t", 0)
			require.NoError(t, err)
			segs, err := p.Segments()
			require.NoError(t, err)
			require.Greater(t, len(segs), 2)
			require.Greater(t, segs[0].MaxTimestamp, now, "the max timestamp comes from the log, not the damaged file")
			n, err := l.EnforceRetention()
			require.NoError(t, err)
			require.Zero(t, n, "nothing is old enough to go")
			require.Len(t, readAll(t, p, 0), 100)
			require.NoError(t, l.Check())
			require.Equal(t, 1, logs.count("rebuilding it from the log"))
			got, err := os.ReadFile(tix)
			require.NoError(t, err)
			require.Equal(t, orig, got, "rebuilt byte for byte")
			require.NoError(t, l.Close())
		})
	}
}
