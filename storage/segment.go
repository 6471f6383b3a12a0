package storage

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/logfs/logfs/index"
	"github.com/logfs/logfs/layout"
	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/vfs"
)

// segment is one .log file and its two indexes.
//
// The appender, holding Partition.mu, is the only writer. Readers use the
// published atomics: size is stored after the bytes it covers are written,
// so a reader that reads [0, size) never sees part of a batch.
type segment struct {
	base record.Offset
	// seq numbers the partition's segments in order, one apart, as they
	// were opened or rolled: a reader that finds the next segment more
	// than one on knows that retention deleted some it had not read.
	seq uint64
	// layout says which numbering seq belongs to: a follower copy that
	// grows backwards or is reset numbers new segments with numbers that
	// segments it dropped had, and gives them a new layout (see
	// Partition.layouts); a rolled segment keeps its predecessor's. The
	// cached view sizes (sizeRun) name segments by layout and number.
	layout uint64
	dir    string
	stem   string // dir/<base>: the files' path without a suffix
	fs     vfs.FS
	log    vfs.File
	cfg    *segmentConfig

	// idxMu guards the index handles themselves, which are replaced when
	// the active segment's indexes are opened for writing or rebuilt.
	idxMu   sync.RWMutex
	offIdx  *index.OffsetIndex // GUARDED_BY(idxMu)
	timeIdx *index.TimeIndex   // GUARDED_BY(idxMu)
	// fallback replaces both indexes when they are unusable on a read-only
	// log: entries built in memory by one scan of the log.
	fallback *memIndex // GUARDED_BY(idxMu)
	// endsChecked says the last entry of each index was checked against
	// the log (or the indexes were built from it in this process); see
	// checkIndexEnds in repair.go.
	endsChecked atomic.Bool
	// idxGen counts the times the index handles were rebuilt or replaced
	// by the fallback, from 1: see indexBroken.
	idxGen atomic.Uint64
	// unlinked says the files may no longer be found at the segment's
	// names (its stem) in a folder of its partition: markDeleted renamed
	// them, or the partition closed (see leavePaths), after which its
	// topic's delete renames the folder away and a topic created again
	// under the name makes files of the same names there, or, after
	// Log.Close, another process owns the directory. A reader that still
	// holds the segment then reads its open .log only: nothing is opened,
	// rebuilt or removed by those names (indexBroken, readViewIndex,
	// removeViewIndex).
	unlinked atomic.Bool

	// growing says the segment was the last of a read-only log when it
	// opened: a writer in another process may be appending to it, after
	// seenEnd, the offset after the last batch this log sees (see
	// index.Options.Growing).
	growing bool
	seenEnd record.Offset

	size    atomic.Int64 // committed bytes of the .log
	durable atomic.Bool  // sealed and flushed: no flush needs to touch it again
	frozen  atomic.Bool  // sealed: no more appends, size final, indexes trimmed

	// maxTS and maxTSOffset are the largest batch max timestamp and the
	// last offset of its batch, loaded lazily for segments opened from disk.
	tsOnce      sync.Once
	maxTS       atomic.Int64
	maxTSOffset atomic.Int64
	tsErr       error

	// Appender state, GUARDED_BY(Partition.mu).
	writable bool // indexes open read-write, preallocated
	// roomKnown says the indexes had room for an entry when last asked
	// and have gained none since: shouldRoll then skips asking them. Only
	// an added entry or new index handles can fill them.
	roomKnown       atomic.Bool
	bytesSinceIndex int64 // log bytes since the last index entry
	rollTS          int64 // max timestamp of the first batch, or NoTimestamp
	rollTSKnown     bool
	created         time.Time

	// refs counts the partition's reference (1 while the segment is in the
	// partition) plus readers that pinned it. At 0 the files are closed.
	refs atomic.Int32

	// mapped is the .log mapped read-only on first read (see mapping);
	// mapMu serialises making it, and noMap records that it cannot be.
	mapMu  sync.Mutex
	mapped atomic.Pointer[mappedLog]
	noMap  atomic.Bool

	views viewIndexes
	txn   segTxn // what its log says about transactions (see txn.go)

	// Following a broker (follow.go): the file's inode, where a
	// truncation cut it (position+1, 0 for none), the high watermark's
	// position, and, GUARDED_BY(Partition.mu), where its batches end.
	ino        uint64
	cut        atomic.Int64
	hwMemo     atomic.Pointer[[2]int64]
	followNext record.Offset
	followOK   bool
	followSigs batchSigs // GUARDED_BY(Partition.mu)

	logger *slog.Logger
}

// segmentConfig is what a segment needs from its topic's settings.
type segmentConfig struct {
	indexBytes    int64
	indexInterval int64
	segmentBytes  int64 // roll size: what the active segment's mapping covers
	readOnly      bool
	follow        bool // a followed broker's (follow.go)
	// gapless says the partition never has offset gaps (Options.Gaps):
	// a missing offset is a hole, where views stop (viewindex.go).
	gapless bool
	// holes is the topic's count of bad ranges learned (Topic.holes);
	// nil in tests that build a segment by hand.
	holes *atomic.Uint64
}

// holesLearned returns the count of bad ranges the view indexes of the
// segment's topic have learned.
func (s *segment) holesLearned() uint64 {
	if s.cfg == nil || s.cfg.holes == nil {
		return 0
	}
	return s.cfg.holes.Load()
}

// gapless says the segment's partition never has offset gaps.
func (s *segment) gapless() bool { return s.cfg != nil && s.cfg.gapless }

// learnedHole is called when one of the segment's view indexes learns a
// bad range: sizes summed before it are stale (see sizeCache).
func (s *segment) learnedHole() {
	if s.cfg != nil && s.cfg.holes != nil {
		s.cfg.holes.Add(1)
	}
}

// The segment's file names share a stem, dir/<base, 20 digits>, formatted
// once: opening a data directory of 10,000 segments is mostly opens and
// stats, and formatting each name several times was a tenth of it.
func (s *segment) logPath() string       { return s.stem + layout.LogSuffix }
func (s *segment) indexPath() string     { return s.stem + layout.IndexSuffix }
func (s *segment) timeIndexPath() string { return s.stem + layout.TimeIndexSuffix }
func (s *segment) viewIndexPath() string { return s.stem + layout.ViewIndexSuffix }

// createSegment makes a new, empty active segment. Stale files that already
// carry its name (left by a crash between roll and checkpoint) are replaced.
// If it fails, it removes what it created: an empty .log left behind would
// be a segment to the next start.
func createSegment(fs vfs.FS, dir string, base record.Offset, cfg *segmentConfig, logger *slog.Logger) (*segment, error) {
	s := &segment{base: base, dir: dir, stem: layout.SegmentPath(dir, base, ""), fs: fs, cfg: cfg, logger: logger, created: time.Now(), rollTS: record.NoTimestamp, rollTSKnown: true}
	f, err := fs.OpenFile(s.logPath(), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	s.log = f
	s.refs.Store(1)
	fail := func(err error) (*segment, error) {
		if derr := s.discard(); derr != nil {
			logger.Warn("removing the files of a segment that could not be created", "segment", s.logPath(), "err", derr)
		}
		return nil, err
	}
	opts := index.Options{FS: fs, MaxBytes: cfg.indexBytes, LogSize: 0, Writable: true}
	if s.offIdx, err = index.CreateOffsetIndex(s.indexPath(), base, opts); err != nil {
		return fail(err)
	}
	if s.timeIdx, err = index.CreateTimeIndex(s.timeIndexPath(), base, opts); err != nil {
		return fail(err)
	}
	if err := s.removeViewIndex(); err != nil {
		return fail(err)
	}
	s.writable = true
	s.endsChecked.Store(true)
	s.idxGen.Store(1)
	s.tsOnce.Do(func() {})
	s.maxTS.Store(record.NoTimestamp)
	s.maxTSOffset.Store(int64(base))
	s.views.start(s)
	return s, nil
}

// openSegment opens an existing segment whose .log holds logSize valid
// bytes. Its indexes are opened lazily: nothing is mapped until a read or an
// append needs it. seenEnd is, on a read-only log, the offset after the
// last batch of its last segment, which a writer in another process may
// still be appending to; -1 for every other segment.
func openSegment(fs vfs.FS, dir string, base record.Offset, logSize record.Position, seenEnd record.Offset, cfg *segmentConfig, indexMissing bool, logger *slog.Logger) (*segment, error) {
	s := &segment{base: base, dir: dir, stem: layout.SegmentPath(dir, base, ""), fs: fs, cfg: cfg, logger: logger}
	s.growing, s.seenEnd = seenEnd >= 0, seenEnd
	flag := os.O_RDWR
	if cfg.readOnly {
		flag = os.O_RDONLY
	}
	f, err := fs.OpenFile(s.logPath(), flag, 0)
	if err != nil && cfg.readOnly && logSize == 0 && errors.Is(err, os.ErrNotExist) {
		f, err = noLogFile(s.logPath()), nil // recovery would create it
	}
	if err != nil {
		return nil, err
	}
	s.log = f
	st, err := f.Stat()
	if logSize < 0 {
		// A segment a clean load trusted without looking: the file's length.
		if err != nil {
			f.Close()
			return nil, err
		}
		logSize = record.Position(st.Size())
	}
	s.size.Store(int64(logSize))
	if err == nil {
		s.created = st.ModTime()
	}
	s.refs.Store(1)
	s.idxGen.Store(1)
	if indexMissing {
		// Recovery could not vouch for the index files (a read-only load
		// of an unclean directory): index in memory on first use.
		s.fallback = &memIndex{}
		return s, nil
	}
	opts := index.Options{FS: fs, MaxBytes: cfg.indexBytes, LogSize: logSize}
	if s.growing {
		// This log sees logSize bytes. The writer's index entries for what
		// it appends after them are not corrupt, and not this log's.
		opts.Growing, opts.LogEnd = s.logSizeNow, seenEnd
	}
	s.offIdx, err = index.OpenOffsetIndex(s.indexPath(), base, opts)
	if err == nil {
		s.timeIdx, err = index.OpenTimeIndex(s.timeIndexPath(), base, opts)
	}
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) && !vfs.IsPlanted(err) {
			s.closeFiles()
			return nil, err
		}
		// A missing index (or a link planted in its place): recovery
		// rebuilds it on a writable log; a read-only log indexes in
		// memory on first use.
		s.closeIndexes()
		s.fallback = &memIndex{}
		s.logger.Warn("segment index missing; indexing in memory on first read", "segment", s.logPath())
	}
	return s, nil
}

// logSizeNow returns the size of the segment's .log file now, which a
// writer in another process may have made larger than s.size.
func (s *segment) logSizeNow() (record.Position, error) {
	st, err := s.log.Stat()
	if err != nil {
		return 0, err
	}
	return record.Position(st.Size()), nil
}

// acquire pins the segment for a reader; it fails once the segment is gone.
func (s *segment) acquire() bool {
	for {
		n := s.refs.Load()
		if n <= 0 {
			return false
		}
		if s.refs.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// release drops a reference; the last one closes the files.
func (s *segment) release() {
	if s.refs.Add(-1) == 0 {
		s.closeFiles()
	}
}

func (s *segment) closeIndexes() {
	s.idxMu.Lock()
	defer s.idxMu.Unlock()
	s.closeIndexHandlesLocked()
}

func (s *segment) closeFiles() error {
	s.closeIndexes()
	s.views.dropInner()
	if m := s.mapped.Swap(nil); m != nil {
		m.Close()
	}
	if s.log == nil {
		return nil
	}
	return s.log.Close()
}

// makeWritable reopens the indexes of the active segment read-write and
// preallocated, as Kafka does after loading a log (KAFKA-6388), rebuilding
// them first if they are missing or broken, and learns the appender state
// that a reopened segment lost.
func (s *segment) makeWritable() error {
	if s.writable {
		return nil
	}
	s.idxMu.Lock()
	defer s.idxMu.Unlock()
	if err := s.openWritableIndexesLocked(); err != nil {
		return fmt.Errorf("open indexes of active segment %s: %w", s.logPath(), err)
	}
	s.fallback = nil
	s.writable = true
	// Kafka starts a reopened segment's index interval afresh.
	s.bytesSinceIndex = 0
	return nil
}

// loadTimestamps learns the segment's max timestamp from the last entry of
// its time index, which roll and close always write.
func (s *segment) loadTimestamps() error {
	s.tsOnce.Do(func() {
		s.checkIndexEnds()
		s.idxMu.RLock()
		defer s.idxMu.RUnlock()
		ts, off := record.NoTimestamp, s.base
		if s.timeIdx != nil && s.fallback == nil {
			var err error
			ts, off, err = s.timeIdx.LastEntry()
			if err == nil && ts < 0 && s.size.Load() > 0 {
				// No entry in the index of a segment that has batches
				// says only that none is stamped above -1, or that the one
				// entry was (0, base), which reads as a zero tail: the
				// batch headers say which.
				s.idxMu.RUnlock()
				var serr error
				ts, off, serr = s.scanMaxTimestamp()
				s.idxMu.RLock()
				if serr != nil {
					err = serr // bad bytes: the in-memory index, below, goes around them
				}
			}
			if err == nil {
				s.maxTS.Store(ts)
				s.maxTSOffset.Store(int64(off))
				return
			}
			if _, bad := errors.AsType[*record.CorruptError](err); !bad && !indexUnusable(err) {
				s.tsErr = err
				return
			}
			s.idxMu.RUnlock()
			repaired := indexUnusable(err) && s.indexBroken(err, 0)
			s.idxMu.RLock()
			if repaired && s.timeIdx != nil && s.fallback == nil {
				if ts, off, err = s.timeIdx.LastEntry(); err == nil {
					s.maxTS.Store(ts)
					s.maxTSOffset.Store(int64(off))
					return
				}
			}
		}
		// No usable time index: the in-memory index's scan learns it.
		s.idxMu.RUnlock()
		m, err := s.memIndex()
		s.idxMu.RLock()
		if err != nil {
			s.tsErr = err
			return
		}
		ts, off = m.maxTS, m.maxTSOffset
		s.maxTS.Store(ts)
		s.maxTSOffset.Store(int64(off))
	})
	return s.tsErr
}

// scanMaxTimestamp reads the batch headers of the whole segment for its
// largest max timestamp and the last offset of the batch that first has it.
func (s *segment) scanMaxTimestamp() (int64, record.Offset, error) {
	ts, off := record.NoTimestamp, s.base
	sc := record.NewScanner(s.log, 0, record.Position(s.size.Load()), record.ScanOptions{HeadersOnly: true})
	for sc.Next() {
		if b := sc.Batch(); b.MaxTimestamp > ts {
			ts, off = b.MaxTimestamp, b.LastOffset()
		}
	}
	return ts, off, record.WithFile(sc.Err(), s.logPath())
}

// maxTimestamp returns the largest batch max timestamp in the segment, or
// NoTimestamp when no batch carries one.
func (s *segment) maxTimestamp() (int64, error) {
	if err := s.loadTimestamps(); err != nil {
		return 0, err
	}
	return s.maxTS.Load(), nil
}

// addIndexEntry adds an index entry for the batch whose last offset is
// last, at pos, with the segment's max timestamp so far. An entry the
// index refuses by its rules is left out (logged): the index stays
// correct, only sparser. A failure to write is returned: the append that
// needed the entry fails with it.
func (s *segment) addIndexEntry(last record.Offset, pos record.Position, maxTS int64, maxTSOffset record.Offset) error {
	s.roomKnown.Store(false)
	s.idxMu.RLock()
	defer s.idxMu.RUnlock()
	if err := s.offIdx.Append(last, pos); err != nil {
		if !indexRuleErr(err) {
			return err
		}
		s.logger.Warn("offset index entry not added", "segment", s.logPath(), "err", err)
		return nil
	}
	if err := s.timeIdx.MaybeAppend(maxTS, maxTSOffset, false); err != nil {
		if !indexRuleErr(err) {
			return err
		}
		s.logger.Warn("time index entry not added", "segment", s.logPath(), "err", err)
	}
	return nil
}

// indexFull reports whether either index has no room for another entry.
func (s *segment) indexFull() bool {
	if s.roomKnown.Load() {
		return false
	}
	s.idxMu.RLock()
	defer s.idxMu.RUnlock()
	full := s.offIdx != nil && s.offIdx.IsFull() || s.timeIdx != nil && s.timeIdx.IsFull()
	s.roomKnown.Store(!full) // under idxMu: handles cannot change meanwhile
	return full
}

// loadRollTimestamp reads the first batch's max timestamp, which segment.ms
// measures from, for a segment reopened from disk.
func (s *segment) loadRollTimestamp() error {
	if s.rollTSKnown {
		return nil
	}
	if s.size.Load() == 0 {
		s.rollTS, s.rollTSKnown = record.NoTimestamp, true
		return nil
	}
	sc := record.NewScanner(s.log, 0, record.Position(s.size.Load()), record.ScanOptions{HeadersOnly: true, ReadAhead: record.HeaderSize})
	if !sc.Next() {
		return record.WithFile(sc.Err(), s.logPath())
	}
	s.rollTS, s.rollTSKnown = sc.Batch().MaxTimestamp, true
	return nil
}

// appendBatch writes one encoded batch at the end of a segment that no
// reader sees yet (a follower's prepended segment, see Prepend), and
// publishes its size and max timestamp at once; appends to a partition's
// segments go through appendTx instead. On a failed write the log is cut
// back; the caller discards the segment on any error.
func (s *segment) appendBatch(raw []byte, h *record.BatchHeader) error {
	pos := s.size.Load()
	if _, err := s.log.WriteAt(raw, pos); err != nil {
		_ = s.log.Truncate(pos)
		return fmt.Errorf("append to %s: %w", s.logPath(), err)
	}
	if pos == 0 {
		s.rollTS, s.rollTSKnown = h.MaxTimestamp, true
	}
	if h.MaxTimestamp > s.maxTS.Load() {
		s.maxTSOffset.Store(int64(h.LastOffset()))
		s.maxTS.Store(h.MaxTimestamp)
	}
	s.size.Store(pos + int64(len(raw)))
	if s.bytesSinceIndex > s.cfg.indexInterval {
		if err := s.addIndexEntry(h.LastOffset(), record.Position(pos), s.maxTS.Load(), record.Offset(s.maxTSOffset.Load())); err != nil {
			return err
		}
		s.bytesSinceIndex = 0
	}
	s.bytesSinceIndex += int64(len(raw))
	return nil
}

// seal is prepareSeal then finishSeal, for a segment no reader sees yet.
func (s *segment) seal() error {
	if err := s.prepareSeal(s.maxTS.Load(), record.Offset(s.maxTSOffset.Load())); err != nil {
		return err
	}
	s.finishSeal()
	return nil
}

// prepareSeal writes what sealing the segment needs on disk: the final
// time-index entry, for the segment's max timestamp (maxTS, reached by the
// batch ending at maxTSOffset, as the append that rolls it knows them),
// then every index entry still in memory. After it finishSeal cannot
// fail. A segment reopened and never appended to needs nothing: its
// indexes are as the last close or recovery left them, trimmed and final.
func (s *segment) prepareSeal(maxTS int64, maxTSOffset record.Offset) error {
	if !s.writable {
		return nil
	}
	s.idxMu.RLock()
	defer s.idxMu.RUnlock()
	if s.timeIdx != nil {
		if err := s.timeIdx.MaybeAppend(maxTS, maxTSOffset, true); err != nil {
			return err
		}
		if err := s.timeIdx.WritePending(); err != nil {
			return err
		}
	}
	if s.offIdx != nil {
		if err := s.offIdx.WritePending(); err != nil {
			return err
		}
	}
	return nil
}

// finishSeal makes the segment read-only, after prepareSeal: its indexes
// trimmed and mapped read-only, as Kafka's onBecomeInactiveSegment, and no
// more appends. It writes nothing.
func (s *segment) finishSeal() {
	if s.writable {
		s.idxMu.Lock()
		for _, x := range []interface{ Seal() error }{s.timeIdx, s.offIdx} {
			if x == nil {
				continue
			}
			if err := x.Seal(); err != nil { // nothing left to write: only a closed index fails
				s.logger.Error("seal index", "segment", s.logPath(), "err", err)
			}
		}
		s.idxMu.Unlock()
		s.writable = false
	}
	s.frozen.Store(true)
}

// discard deletes a segment that an append created and is taking back:
// its files are removed (the .log emptied first, so that even a file that
// cannot be removed holds nothing) and its handles closed.
func (s *segment) discard() error {
	var errs []error
	s.idxMu.Lock()
	if s.offIdx != nil {
		errs = append(errs, s.offIdx.Delete())
	}
	if s.timeIdx != nil {
		errs = append(errs, s.timeIdx.Delete())
	}
	s.idxMu.Unlock()
	if err := s.log.Truncate(0); err != nil {
		errs = append(errs, fmt.Errorf("empty %s: %w", s.logPath(), err))
	}
	// Closed first: a create that failed for want of files (EMFILE) has
	// one to remove the log with, which may need a folder opened.
	s.release()
	if err := s.fs.Remove(s.logPath()); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// flush makes the segment's log and indexes durable.
func (s *segment) flush(indexes bool) error {
	if err := s.log.Sync(); err != nil {
		return err
	}
	if !indexes {
		return nil
	}
	s.idxMu.RLock()
	defer s.idxMu.RUnlock()
	// Flush never maps an index that was not used; one trimmed to nothing
	// is not mapped but its new length must reach the disk too.
	if s.offIdx != nil {
		if err := s.offIdx.Flush(); err != nil {
			return err
		}
	}
	if s.timeIdx != nil {
		if err := s.timeIdx.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// close is the clean-shutdown close of a segment: the active one gets its
// final time-index entry and both indexes are trimmed and made durable, so
// that the clean-shutdown marker written after it vouches for them; then
// everything is closed once no reader holds it.
func (s *segment) close() error {
	var err error
	if s.writable { // the active segment: seal clears writable
		err = s.loadTimestamps()
		s.idxMu.Lock()
		if s.timeIdx != nil && err == nil {
			err = s.timeIdx.MaybeAppend(s.maxTS.Load(), record.Offset(s.maxTSOffset.Load()), true)
		}
		if s.timeIdx != nil && err == nil {
			err = errors.Join(s.timeIdx.Seal(), s.timeIdx.Flush())
		}
		if s.offIdx != nil && err == nil {
			err = errors.Join(s.offIdx.Seal(), s.offIdx.Flush())
		}
		s.idxMu.Unlock()
	}
	s.release()
	return err
}

// markDeleted renames the segment's files to *.deleted, as Kafka does before
// the delayed unlink, so a reader in the middle of the segment finishes it.
func (s *segment) markDeleted() error {
	s.unlinked.Store(true) // index handles follow the rename; the stem's names do not
	var errs []error
	rename := func(p string) {
		if err := s.fs.Rename(p, p+layout.DeletedSuffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	rename(s.logPath())
	s.idxMu.Lock()
	if s.offIdx != nil {
		errs = append(errs, s.offIdx.Rename(s.indexPath()+layout.DeletedSuffix))
	} else {
		rename(s.indexPath())
	}
	if s.timeIdx != nil {
		errs = append(errs, s.timeIdx.Rename(s.timeIndexPath()+layout.DeletedSuffix))
	} else {
		rename(s.timeIndexPath())
	}
	s.idxMu.Unlock()
	rename(s.viewIndexPath())
	return errors.Join(errs...)
}

// leavePaths marks the segment unlinked when its partition closes, and
// replaces index handles that have not mapped their files yet, which would
// open them by name on first use, by an index of the open .log built in
// memory (as on a read-only log): a reader that holds the segment after
// its topic was deleted and created again would otherwise read, and find
// wrong for its log, and rebuild from the new topic's .log, the new
// topic's index files of the same names. Readers use the handles under
// idxMu, so none is in the middle of using them.
func (s *segment) leavePaths() {
	s.idxMu.Lock()
	defer s.idxMu.Unlock()
	s.unlinked.Store(true)
	if s.fallback != nil || s.offIdx != nil && s.offIdx.Mapped() && s.timeIdx != nil && s.timeIdx.Mapped() {
		return
	}
	s.closeIndexHandlesLocked()
	s.fallback = &memIndex{}
	s.idxGen.Add(1)
}

// removeDeletedFiles unlinks the *.deleted files. Open descriptors keep
// working until their readers finish.
func (s *segment) removeDeletedFiles() error {
	var errs []error
	for _, p := range []string{s.logPath(), s.indexPath(), s.timeIndexPath(), s.viewIndexPath()} {
		if err := s.fs.Remove(p + layout.DeletedSuffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// checkRelativeOffset reports whether offset fits a relative offset of the
// segment, as Kafka requires before appending to it.
func (s *segment) checkRelativeOffset(off record.Offset) bool {
	rel := off - s.base
	return rel >= 0 && rel <= math.MaxInt32
}
