package recovery

import (
	"errors"
	"fmt"
	"math"
	"os"

	"github.com/logfs/logfs/index"
	"github.com/logfs/logfs/layout"
	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/vfs"
)

// SegmentResult is what recovering one segment found and did.
type SegmentResult struct {
	Base       record.Offset
	ValidBytes record.Position // length of the valid prefix of the .log
	Truncated  int64           // bytes cut from the end (0 when read-only: reported only)
	NextOffset record.Offset   // offset after the last valid batch, or Base when empty
	Batches    int
	Reason     error // why the scan stopped early (a *record.CorruptError), or nil
}

// IndexConfig is what index rebuilding needs from the topic's settings.
type IndexConfig struct {
	IndexBytes    int64 // segment.index.bytes
	IndexInterval int64 // index.interval.bytes
}

// RecoverSegment is Kafka's LogSegment.recover: walk the batches of a .log
// checking each one's size, magic, CRC-32C and offsets, cut the file at the
// first invalid byte, and rebuild both indexes from what remains, ending
// the time index with the segment's max timestamp and trimming both. With
// readOnly it only scans and reports.
func RecoverSegment(fs vfs.FS, dir string, base record.Offset, cfg IndexConfig, readOnly bool) (SegmentResult, error) {
	res := SegmentResult{Base: base, NextOffset: base}
	logPath := layout.SegmentPath(dir, base, layout.LogSuffix)
	flag := os.O_RDWR
	if readOnly {
		flag = os.O_RDONLY
	}
	f, err := fs.OpenFile(logPath, flag, 0)
	if err != nil {
		return res, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return res, err
	}
	size := record.Position(st.Size())

	var b *indexBuilder
	if !readOnly {
		if b, err = newIndexBuilder(dir, base, cfg); err != nil {
			return res, err
		}
		defer b.close()
	}
	sc := record.NewScanner(f, 0, size, record.ScanOptions{})
	next := base
	for sc.Next() {
		batch := sc.Batch()
		if reason := checkOffsets(batch, base, next); reason != "" {
			res.Reason = &record.CorruptError{File: logPath, Pos: batch.Pos, Reason: reason, Err: record.ErrCorrupt}
			break
		}
		if b != nil {
			if err := b.add(batch); err != nil {
				return res, err
			}
		}
		res.Batches++
		res.ValidBytes = sc.Pos()
		next = batch.NextOffset()
	}
	if res.Reason == nil && sc.Err() != nil {
		res.Reason = record.WithFile(sc.Err(), logPath)
	}
	res.NextOffset = next
	if res.ValidBytes < size {
		res.Truncated = int64(size - res.ValidBytes)
		if !readOnly {
			if err := f.Truncate(int64(res.ValidBytes)); err != nil {
				return res, fmt.Errorf("cut %s at %d: %w", logPath, res.ValidBytes, err)
			}
		}
	}
	if b != nil {
		if err := b.finish(); err != nil {
			return res, err
		}
	}
	if !readOnly {
		// The sidecar of rendered positions describes the old bytes.
		if err := fs.Remove(layout.SegmentPath(dir, base, layout.ViewIndexSuffix)); err != nil && !isNotExist(err) {
			return res, err
		}
	}
	return res, nil
}

// checkOffsets returns why a batch's offsets cannot follow the batches
// before it in a segment with this base, or "".
func checkOffsets(b *record.Batch, base, next record.Offset) string {
	switch {
	case b.BaseOffset < next:
		return fmt.Sprintf("base offset %d is below %d, where the previous batch ended", b.BaseOffset, next)
	case b.LastOffset()-base > math.MaxInt32:
		return fmt.Sprintf("last offset %d overflows a relative offset from base %d", b.LastOffset(), base)
	}
	return ""
}

// indexBuilder writes a segment's two indexes from its batches with Kafka's
// rules: an entry when more than index.interval.bytes of log lie since the
// last one, keyed by the batch's last offset at the batch's start; the time
// index follows the running max timestamp and its batch's last offset.
type indexBuilder struct {
	cfg         IndexConfig
	off         *index.OffsetIndex
	time        *index.TimeIndex
	lastEntry   record.Position
	maxTS       int64
	maxTSOffset record.Offset
}

func newIndexBuilder(dir string, base record.Offset, cfg IndexConfig) (*indexBuilder, error) {
	opts := index.Options{MaxBytes: cfg.IndexBytes, Writable: true}
	off, err := index.CreateOffsetIndex(layout.SegmentPath(dir, base, layout.IndexSuffix), base, opts)
	if err != nil {
		return nil, err
	}
	ti, err := index.CreateTimeIndex(layout.SegmentPath(dir, base, layout.TimeIndexSuffix), base, opts)
	if err != nil {
		off.Close()
		return nil, err
	}
	return &indexBuilder{cfg: cfg, off: off, time: ti, maxTS: record.NoTimestamp, maxTSOffset: base}, nil
}

func (b *indexBuilder) add(batch *record.Batch) error {
	if batch.MaxTimestamp > b.maxTS {
		b.maxTS, b.maxTSOffset = batch.MaxTimestamp, batch.LastOffset()
	}
	if int64(batch.Pos-b.lastEntry) <= b.cfg.IndexInterval {
		return nil
	}
	b.lastEntry = batch.Pos
	if b.off.IsFull() || b.time.IsFull() {
		return nil // a sparser index is still a correct one
	}
	if err := b.off.Append(batch.LastOffset(), batch.Pos); err != nil {
		return err
	}
	return b.time.MaybeAppend(b.maxTS, b.maxTSOffset, false)
}

// finish writes the final time-index entry and trims both files.
func (b *indexBuilder) finish() error {
	if err := b.time.MaybeAppend(b.maxTS, b.maxTSOffset, true); err != nil {
		return err
	}
	return errors.Join(b.off.Seal(), b.time.Seal(), b.off.Flush(), b.time.Flush())
}

func (b *indexBuilder) close() {
	b.off.Close()
	b.time.Close()
}

// RebuildIndexes rewrites a segment's indexes from the first size bytes of
// its .log, which must all be valid (a sealed segment, or one just
// recovered).
func RebuildIndexes(fs vfs.FS, dir string, base record.Offset, size record.Position, cfg IndexConfig) error {
	logPath := layout.SegmentPath(dir, base, layout.LogSuffix)
	f, err := fs.OpenFile(logPath, os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	b, err := newIndexBuilder(dir, base, cfg)
	if err != nil {
		return err
	}
	defer b.close()
	sc := record.NewScanner(f, 0, size, record.ScanOptions{HeadersOnly: true})
	for sc.Next() {
		if err := b.add(sc.Batch()); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return record.WithFile(err, logPath)
	}
	return b.finish()
}
