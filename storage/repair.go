package storage

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/logfs/logfs/index"
	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/recovery"
	"github.com/logfs/logfs/vfs"
)

// Index repair on first use.
//
// Segments below the recovery point are not scanned when a log opens: their
// index files are opened lazily and validated by package index when first
// mapped (a cheap pass over the entries). One that breaks a rule, or whose
// file vanished, is rebuilt here from the segment's .log, on disk, by the
// first reader that meets it, while other readers of the segment wait on
// idxMu and then use the new files. A read-only log cannot write, so it
// indexes the segment in memory instead (memIndex); so does a writable one
// whose rebuild failed. Either way the reader gets its answer.

// indexUnusable reports whether an index error means the file must be
// rebuilt (or replaced by memIndex), as opposed to an I/O or lifecycle error
// the caller returns.
func indexUnusable(err error) bool {
	return errors.Is(err, index.ErrCorrupt) || errors.Is(err, fs.ErrNotExist)
}

// indexBroken is called by a user of the segment's indexes that got an
// error for which indexUnusable is true. On a writable log it rebuilds both
// index files from the log, once however many readers call it, and reports
// true: the caller looks up again. Otherwise it switches the segment to an
// in-memory index and reports false. proven, when not 0, is the index
// generation (segment.idxGen) in which a lookup proved an entry wrong
// against the log: the files are replaced even though the rules that run
// on first use pass them, unless that was done already.
func (s *segment) indexBroken(cause error, proven uint64) bool {
	s.idxMu.Lock()
	defer s.idxMu.Unlock()
	if proven != 0 && s.idxGen.Load() != proven {
		return s.fallback == nil // replaced since the caller looked
	}
	if s.fallback != nil {
		return false
	}
	defer s.idxGen.Add(1)
	if s.unlinked.Load() {
		// Its files are renamed *.deleted (and may be unlinked by now), or
		// its folder may be another partition's: nothing is rebuilt by
		// their names (see segment.unlinked), and nothing is wrong with
		// the data.
		s.logger.Info("index of a deleted or closed segment unavailable; indexing its log in memory", "segment", s.logPath(), "err", cause)
		s.fallback = &memIndex{}
		return false
	}
	if s.cfg.readOnly || s.writable {
		// s.writable: the appender's indexes were validated when opened and
		// are kept valid; if they break anyway, do not pull them away.
		if s.cfg.readOnly && s.deletedSinceOpen(cause) {
			s.logger.Info("segment deleted by another process since the log opened; indexing it in memory", "segment", s.logPath())
		} else {
			s.logger.Error("segment index is unusable; indexing the log in memory instead", "segment", s.logPath(), "err", cause)
		}
		s.fallback = &memIndex{}
		return false
	}
	if proven == 0 && s.indexesUsableLocked() {
		return true // another reader rebuilt them while this one waited
	}
	s.logger.Error("segment index is unusable; rebuilding it from the log", "segment", s.logPath(), "err", cause)
	if err := s.rebuildIndexesLocked(); err != nil {
		s.logger.Error("rebuilding the segment index failed; indexing the log in memory instead", "segment", s.logPath(), "err", err)
		s.fallback = &memIndex{}
		return false
	}
	return true
}

// deletedSinceOpen reports whether an index file is missing (cause)
// because a writer in another process deleted the segment after this
// read-only log opened it, as retention does: its .log is gone from its
// name too (retention renames the .log first). The log's open file still
// reads.
func (s *segment) deletedSinceOpen(cause error) bool {
	if !errors.Is(cause, fs.ErrNotExist) {
		return false
	}
	_, err := s.fs.Stat(s.logPath())
	return errors.Is(err, fs.ErrNotExist)
}

// indexesUsableLocked reports whether both index handles exist, pass the
// rules and end where the log says. The caller holds idxMu.
func (s *segment) indexesUsableLocked() bool {
	return s.offIdx != nil && s.timeIdx != nil && s.offIdx.Check() == nil && s.timeIdx.Check() == nil &&
		s.indexEndsErrLocked() == nil
}

// rebuildIndexesLocked replaces the segment's index files with ones built
// from the first size bytes of its .log, then opens them lazily. The caller
// holds idxMu exclusively, so no reader uses the old handles, and the
// segment is not the appender's (its size does not change meanwhile).
func (s *segment) rebuildIndexesLocked() error {
	s.closeIndexHandlesLocked()
	size := record.Position(s.size.Load())
	res, err := recovery.RebuildIndexes(s.fs, s.dir, s.base, size, s.recoveryConfig())
	if err != nil {
		return err
	}
	if res.Reason != nil {
		s.logger.Error("corrupt batch below the recovery point; reads that reach it fail; `logfs check --repair` cuts it",
			"segment", s.logPath(), "err", res.Reason)
	}
	if err := s.fs.SyncDir(s.dir); err != nil {
		return err
	}
	opts := index.Options{FS: s.fs, MaxBytes: s.cfg.indexBytes, LogSize: size}
	if s.offIdx, err = index.OpenOffsetIndex(s.indexPath(), s.base, opts); err != nil {
		return err
	}
	if s.timeIdx, err = index.OpenTimeIndex(s.timeIndexPath(), s.base, opts); err != nil {
		s.closeIndexHandlesLocked()
		return err
	}
	s.endsChecked.Store(true)
	return nil
}

func (s *segment) recoveryConfig() recovery.IndexConfig {
	return recovery.IndexConfig{IndexBytes: s.cfg.indexBytes, IndexInterval: s.cfg.indexInterval}
}

func (s *segment) closeIndexHandlesLocked() {
	s.roomKnown.Store(false)
	if s.offIdx != nil {
		s.offIdx.Close()
		s.offIdx = nil
	}
	if s.timeIdx != nil {
		s.timeIdx.Close()
		s.timeIdx = nil
	}
}

// openWritableIndexesLocked opens the active segment's indexes read-write
// and preallocated. Files that are missing or break a rule (an untrimmed
// index after a power loss, KAFKA-12734 and KAFKA-19200) are rebuilt from
// the log first rather than failing every append. The caller holds idxMu.
func (s *segment) openWritableIndexesLocked() error {
	s.closeIndexHandlesLocked()
	open := func() error {
		opts := index.Options{FS: s.fs, MaxBytes: s.cfg.indexBytes, LogSize: record.Position(s.size.Load()), Writable: true}
		var err error
		if s.offIdx, err = index.OpenOffsetIndex(s.indexPath(), s.base, opts); err != nil {
			return err
		}
		if s.timeIdx, err = index.OpenTimeIndex(s.timeIndexPath(), s.base, opts); err != nil {
			s.closeIndexHandlesLocked()
			return err
		}
		return nil
	}
	err := open()
	if err == nil && !s.endsChecked.Load() {
		if err = s.indexEndsErrLocked(); err == nil {
			s.endsChecked.Store(true)
		} else if indexUnusable(err) {
			s.closeIndexHandlesLocked()
		}
	}
	if err == nil || !indexUnusable(err) {
		return err
	}
	s.logger.Error("active segment index is unusable; rebuilding it from the log", "segment", s.logPath(), "err", err)
	if err := s.rebuildIndexesLocked(); err != nil {
		return fmt.Errorf("rebuild indexes of %s: %w", s.logPath(), err)
	}
	s.closeIndexHandlesLocked()
	return open()
}

// repairIndexesForCheck gives Check the indexes a reader would get: on a
// writable log, index files that break a rule are rebuilt first. On a
// read-only log Check reports them.
func (s *segment) repairIndexesForCheck() {
	if s.cfg.readOnly {
		return
	}
	s.checkIndexEnds()
	s.idxMu.RLock()
	var err error
	if s.offIdx != nil && s.timeIdx != nil && s.fallback == nil {
		err = errors.Join(s.offIdx.Check(), s.timeIdx.Check())
	}
	s.idxMu.RUnlock()
	if err != nil && indexUnusable(err) {
		s.indexBroken(err, 0)
	}
}

// checkIndexEnds is the cheap check of a lazily opened segment's indexes
// on first use, beyond the structural rules package index applies to every
// entry when it maps a file: the last entry of each must keep the rule of
// index.Verifier against the log, and the time index must end with the
// segment's largest timestamp. A file zeroed by a lost write-back (a single
// time-index entry (0, base) passes the structural rules, and would make
// retention think the segment is from 1970: KAFKA-10207), cut at an entry
// boundary (lookups by time would skip the segment), or left over from a
// longer log is caught here and repaired as a rule-breaking one. It costs a
// walk of the batch headers from the last entries to the end of the log,
// about one index interval, once per segment.
func (s *segment) checkIndexEnds() {
	if s.endsChecked.Load() {
		return
	}
	s.idxMu.RLock()
	err := s.indexEndsErrLocked()
	s.idxMu.RUnlock()
	if err != nil && indexUnusable(err) {
		s.indexBroken(err, 0)
	} else if err != nil {
		return // an I/O error: the reader meets it too; check again next time
	}
	s.endsChecked.Store(true)
}

// indexEndsErrLocked returns a *index.CorruptError when the last entry of
// an index breaks the rule against the log, an I/O error, or nil. The
// caller holds idxMu.
func (s *segment) indexEndsErrLocked() error {
	if s.offIdx == nil || s.timeIdx == nil || s.fallback != nil {
		return nil
	}
	size := record.Position(s.size.Load())
	// LastEntry reads an index that is not mapped yet without mapping it,
	// so this check costs two small reads, not two mappings.
	lastKey, lastPos, err := s.offIdx.LastEntry()
	if err != nil {
		return err
	}
	var off []index.OffsetEntry
	start := size
	if lastPos > 0 { // an offset index never has an entry at position 0: (base, 0) is "empty"
		off = []index.OffsetEntry{{Offset: lastKey, Pos: lastPos}}
		start = lastPos
	}
	ts, tsOff, err := s.timeIdx.LastEntry()
	if err != nil {
		return err
	}
	var tim []index.TimeEntry
	if ts >= 0 { // -1: an empty time index
		from := lastPos
		if tsOff < lastKey {
			// The newest timestamp is older than the last offset-index
			// entry (timestamps went back): where a lookup of it starts.
			if _, from, err = s.offIdx.Lookup(tsOff); err != nil {
				return err
			}
		}
		tim = []index.TimeEntry{{Timestamp: ts, Offset: tsOff, SearchFrom: from}}
		start = min(start, from)
	} else {
		start = min(start, lastPos)
	}
	v := index.NewVerifier(s.indexPath(), off, s.timeIndexPath(), tim, start)
	sc := record.NewScanner(s.log, start, size, record.ScanOptions{HeadersOnly: true, ReadAhead: lookupReadAhead, MaxReadAhead: readerMaxReadAhead})
	for sc.Next() {
		v.Batch(index.BatchOf(&sc.Batch().BatchHeader, sc.Batch().Pos))
	}
	if err := sc.Err(); err != nil {
		var ce *record.CorruptError
		if !errors.As(err, &ce) {
			return err
		}
		if ce.Pos == start && start < size {
			// What the entries point at is not a batch.
			return &index.CorruptError{File: s.indexPath(), Rule: fmt.Sprintf("the last entries point at no batch of %s (%v)", s.logPath(), err)}
		}
		// A bad batch further on ends the walk: the entries it covers
		// are checked; reads past it fail on the batch itself.
		v.Stop()
	}
	if errs := v.Finish(true, 1); len(errs) > 0 {
		return errs[0]
	}
	return nil
}

// noLogFile stands in, on a read-only log, for the .log of the empty
// segment that a writable open of a partition folder with no segment would
// create (see recovery): it holds nothing and refuses writes.
type noLogFile string

var _ vfs.File = noLogFile("")

func (f noLogFile) ReadAt(p []byte, off int64) (int, error) { return 0, io.EOF }
func (f noLogFile) WriteAt(p []byte, off int64) (int, error) {
	return 0, &os.PathError{Op: "write", Path: string(f), Err: ErrReadOnly}
}
func (f noLogFile) Close() error               { return nil }
func (f noLogFile) Name() string               { return string(f) }
func (f noLogFile) Stat() (os.FileInfo, error) { return noLogInfo{f}, nil }
func (f noLogFile) Sync() error                { return nil }
func (f noLogFile) Truncate(int64) error {
	return &os.PathError{Op: "truncate", Path: string(f), Err: ErrReadOnly}
}

type noLogInfo struct{ f noLogFile }

func (i noLogInfo) Name() string       { return string(i.f) }
func (i noLogInfo) Size() int64        { return 0 }
func (i noLogInfo) Mode() os.FileMode  { return 0o444 }
func (i noLogInfo) ModTime() time.Time { return time.Time{} }
func (i noLogInfo) IsDir() bool        { return false }
func (i noLogInfo) Sys() any           { return nil }
