package storage

import (
	"errors"
	"fmt"
	"math"
	"os"

	"github.com/logfs/logfs/index"
	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/vfs"
)

// ErrCheck is wrapped by every inconsistency Check reports.
var ErrCheck = errors.New("logfs/storage: check failed")

// Check verifies every partition of the log; see Partition.Check.
func (l *Log) Check() error { return l.CheckProgress(nil) }

// CheckProgress is Check that calls progress, if not nil, with the .log
// bytes checked since its last call: every checkProgressStep bytes of a
// segment's scan and at the end of each segment, so that a check of one
// big segment moves (logfs check's progress bar and log lines). The
// calls add up to the bytes of every segment checked. progress must not
// block: it may run under a partition's lock (the active segment's check
// holds it against appends).
func (l *Log) CheckProgress(progress func(bytes int64)) error {
	var errs []error
	for _, name := range l.Topics() {
		t, err := l.Topic(name)
		if err != nil {
			continue
		}
		for _, p := range t.Partitions() {
			errs = append(errs, p.check(progress))
		}
	}
	return errors.Join(errs...)
}

// Check reads the whole partition and verifies its invariants: segments in
// base-offset order; every batch valid (CRC, records decode) with offsets
// increasing across batches and segments, none below its segment's base;
// both indexes under the rule of index.Verifier (the one Kafka's writers of
// every version keep); view indexes agreeing with the rendering;
// the log end offset right after the last batch; in a gapless partition
// (Options.Gaps) no offset missing between batches or segments (a hole,
// ErrHole). It is meant for tests and
// `logfs check`, and costs a read of every byte.
func (p *Partition) Check() error { return p.check(nil) }

func (p *Partition) check(progress func(bytes int64)) error {
	resume, followErr := p.pauseFollow() // a followed log: caught up with its folder, and still while checked
	defer resume()
	segs := p.segments()
	errs := []error{followErr}
	fail := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: %s: "+format, append([]any{ErrCheck, p}, args...)...))
	}
	next := record.Offset(-1)
	// The log end as the active segment's check saw it, under the lock
	// that appends hold: read apart from the scan, an append between the
	// two would look like a log end past the log.
	logEnd, endSeen := record.Offset(0), false
	end := record.Offset(-1) // where the previous segment's offsets end
	gapless := p.gapless()
	for i, s := range segs {
		if !s.acquire() {
			continue
		}
		if i > 0 && s.base <= segs[i-1].base {
			fail("segment %d follows segment %d", s.base, segs[i-1].base)
		}
		if s.base < next {
			fail("segment %d starts below the previous segment's end %d", s.base, next)
		}
		if gapless && i > 0 && s.base > end {
			fail("hole: offsets %d to %d are missing before %s (%w)", end, s.base-1, s.logPath(), ErrHole)
		}
		var segNext record.Offset
		var err error
		if i == len(segs)-1 {
			// The active segment: no append meanwhile. Its time index has
			// its final entry when a roll sealed it since segs was taken,
			// or when the directory was shut down cleanly and nothing was
			// appended to it since (index.Sealed); after a crash it lacks
			// it, as Kafka's does.
			p.mu.Lock()
			segNext, err = s.check(fail, p.sealed(s), gapless, progress)
			// A roll since segs was taken: the log end lies in a segment
			// this check did not read.
			logEnd, endSeen = p.EndOffset(), p.active() == s
			p.mu.Unlock()
		} else {
			segNext, err = s.check(fail, p.sealed(s), gapless, progress)
		}
		if err != nil {
			errs = append(errs, err)
		}
		if segNext > 0 {
			next, end = segNext, segNext
		} else {
			end = max(end, s.base)
		}
		s.release()
	}
	last := segs[len(segs)-1]
	want := max(next, last.base)
	if endSeen && logEnd != want {
		fail("log end offset is %d, the log ends at %d", logEnd, want)
	}
	if start := p.StartOffset(); start < segs[0].base || start > p.EndOffset() {
		fail("log start offset %d is outside [%d, %d]", start, segs[0].base, p.EndOffset())
	}
	return errors.Join(errs...)
}

// sealed reports whether segment s's time index must have its final
// entry (index.Sealed): s is not the active segment, or the directory was
// shut down cleanly and s took no append since it was opened. For the
// active segment the caller holds p.mu (the appender sets s.writable).
func (p *Partition) sealed(s *segment) bool {
	if p.active() != s {
		return index.Sealed(false, false)
	}
	return index.Sealed(true, p.topic.log.shutDownCleanly && !s.writable)
}

// check verifies one segment and returns the offset after its last batch
// (0 when it has none). sealed says its time index has its final entry
// (Partition.sealed). progress, if not nil, gets the bytes scanned as
// CheckProgress says; its calls add up to the size checked, whatever the
// scan finds.
func (s *segment) check(fail func(string, ...any), sealed, gapless bool, progress func(int64)) (record.Offset, error) {
	size := record.Position(s.size.Load())
	reported := record.Position(0)
	if progress != nil {
		defer func() { progress(int64(size - reported)) }()
	}
	var verify *index.Verifier
	if !s.cfg.follow || s.frozen.Load() { // a followed broker is writing an active segment's index files
		verify = s.indexVerifier(fail, size)
	}
	var dec record.Decoder
	next := s.base
	batches := 0
	var rendered [numFormats]int64
	var scratch []byte
	sc := record.NewScanner(s.log, 0, size, record.ScanOptions{})
	for sc.Next() {
		b := sc.Batch()
		batches++
		if progress != nil && b.Pos-reported >= checkProgressStep {
			progress(int64(b.Pos - reported))
			reported = b.Pos
		}
		if b.BaseOffset < next {
			fail("%s: batch at %d has base offset %d, below %d", s.logPath(), b.Pos, b.BaseOffset, next)
		}
		if gapless && b.BaseOffset > next {
			fail("hole: offsets %d to %d are missing before the batch at %d of %s (%w)", next, b.BaseOffset-1, b.Pos, s.logPath(), ErrHole)
		}
		if verify != nil {
			verify.Batch(index.BatchOf(&b.BatchHeader, b.Pos))
		}
		it, err := dec.Records(b)
		if err != nil {
			return 0, record.WithFile(err, s.logPath())
		}
		prev := b.BaseOffset - 1
		for it.Next() {
			r := it.Record()
			if r.Offset <= prev {
				fail("%s: record offsets %d then %d in the batch at %d", s.logPath(), prev, r.Offset, b.Pos)
			}
			prev = r.Offset
			if !b.Attributes.Control() {
				for f := Format(0); f < numFormats; f++ {
					var k int64
					k, scratch = f.Size(r, scratch)
					rendered[f] += k
				}
			}
		}
		if err := it.Err(); err != nil {
			return 0, record.WithFile(err, s.logPath())
		}
		next = b.NextOffset()
	}
	if err := sc.Err(); err != nil {
		if verify != nil {
			verify.Stop()
			for _, err := range verify.Finish(sealed, maxIndexProblems) {
				fail("%v", err)
			}
		}
		return 0, record.WithFile(err, s.logPath())
	}
	if verify != nil {
		for _, err := range verify.Finish(sealed, maxIndexProblems) {
			fail("%v", err)
		}
	}
	for f := Format(0); f < numFormats; f++ {
		s.views.mu.Lock()
		v := s.views.byFormat[f]
		s.views.mu.Unlock()
		if v == nil {
			continue
		}
		if err := v.extend(s, size, math.MaxInt64); err != nil { // Check tests the offsets itself
			return 0, err
		}
		if _, total := v.snapshot(); total != rendered[f] {
			fail("%s: %v view index says %d rendered bytes, the log renders %d", s.logPath(), f, total, rendered[f])
		}
	}
	if batches == 0 {
		return 0, nil
	}
	return next, nil
}

// checkProgressStep is how many bytes of a segment Check scans between
// two calls of its progress function: at the few hundred MiB/s a check
// runs, several calls a second, and few enough to cost nothing.
var checkProgressStep record.Position = 4 << 20

// maxIndexProblems bounds how many entries at fault Check lists per
// segment.
const maxIndexProblems = 10

// indexVerifier reads the segment's index files as they are on disk (after
// the repair a reader would make, on a writable log) and returns a
// verifier of them against the log, or nil when the segment has none or
// they break a structural rule, which it reports.
func (s *segment) indexVerifier(fail func(string, ...any), size record.Position) *index.Verifier {
	s.repairIndexesForCheck()
	offData, err := vfs.ReadFileData(s.fs, s.indexPath(), index.OffsetEntrySize)
	if errors.Is(err, os.ErrNotExist) {
		return nil // indexed in memory; a writable open rebuilds it
	}
	if err != nil {
		fail("%v", err)
		return nil
	}
	timeData, err := vfs.ReadFileData(s.fs, s.timeIndexPath(), index.TimeEntrySize)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		fail("%v", err)
		return nil
	}
	// A writer beside a read-only log writes the entries of what it appends
	// after size: they point below the log's size now, taken after the
	// files were read, and are left out (see index.Options.Growing).
	limit := size
	if s.growing {
		now, err := s.logSizeNow()
		if err != nil {
			fail("%v", err)
			return nil
		}
		limit = max(size, now)
	}
	off, err := index.DecodeOffsetEntries(s.indexPath(), offData, s.base, limit)
	if err != nil {
		fail("%v", err)
		off = nil
	}
	tim, err := index.DecodeTimeEntries(s.timeIndexPath(), timeData, s.base, off)
	if err != nil {
		fail("%v", err)
		return nil
	}
	if limit > size {
		off, tim = index.Seen(off, tim, size, s.seenEnd)
	}
	if off == nil && len(offData) > 0 {
		return nil
	}
	return index.NewVerifier(s.indexPath(), off, s.timeIndexPath(), tim, 0)
}
