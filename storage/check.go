package storage

import (
	"errors"
	"fmt"
	"math"

	"github.com/logfs/logfs/record"
)

// ErrCheck is wrapped by every inconsistency Check reports.
var ErrCheck = errors.New("logfs/storage: check failed")

// Check verifies every partition of the log; see Partition.Check.
func (l *Log) Check() error { return l.CheckProgress(nil) }

// CheckProgress is Check that calls progress, if not nil, with the .log
// bytes of each segment once it is checked (logfs check's progress bar).
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
// every offset-index entry keyed by the last offset of the batch at its
// position; every time-index entry naming a batch whose max timestamp it
// holds, timestamps increasing; view indexes agreeing with the rendering;
// the log end offset right after the last batch. It is meant for tests and
// `logfs check`, and costs a read of every byte.
func (p *Partition) Check() error { return p.check(nil) }

func (p *Partition) check(progress func(bytes int64)) error {
	segs := p.segments()
	var errs []error
	fail := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: %s: %s", ErrCheck, p, fmt.Sprintf(format, args...)))
	}
	next := record.Offset(-1)
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
		segNext, err := s.check(fail)
		if err != nil {
			errs = append(errs, err)
		}
		if segNext > 0 {
			next = segNext
		}
		if progress != nil {
			progress(s.size.Load())
		}
		s.release()
	}
	last := segs[len(segs)-1]
	want := max(next, last.base)
	if end := p.EndOffset(); end != want {
		fail("log end offset is %d, the log ends at %d", end, want)
	}
	if start := p.StartOffset(); start < segs[0].base || start > p.EndOffset() {
		fail("log start offset %d is outside [%d, %d]", start, segs[0].base, p.EndOffset())
	}
	return errors.Join(errs...)
}

// check verifies one segment and returns the offset after its last batch
// (0 when it has none).
func (s *segment) check(fail func(string, ...any)) (record.Offset, error) {
	size := record.Position(s.size.Load())
	lastAt := map[record.Position]record.Offset{}
	maxAt := map[record.Offset]int64{}
	var dec record.Decoder
	next := s.base
	batches := 0
	var rendered [numFormats]int64
	var scratch []byte
	sc := record.NewScanner(s.log, 0, size, record.ScanOptions{})
	for sc.Next() {
		b := sc.Batch()
		batches++
		if b.BaseOffset < next {
			fail("%s: batch at %d has base offset %d, below %d", s.logPath(), b.Pos, b.BaseOffset, next)
		}
		lastAt[b.Pos] = b.LastOffset()
		maxAt[b.LastOffset()] = b.MaxTimestamp
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
		return 0, record.WithFile(err, s.logPath())
	}
	s.checkIndexes(fail, lastAt, maxAt)
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

func (s *segment) checkIndexes(fail func(string, ...any), lastAt map[record.Position]record.Offset, maxAt map[record.Offset]int64) {
	s.repairIndexesForCheck()
	s.idxMu.RLock()
	defer s.idxMu.RUnlock()
	if s.offIdx != nil {
		if err := s.offIdx.Check(); err != nil {
			fail("%v", err)
			return
		}
		n, _ := s.offIdx.Entries()
		for i := 0; i < n; i++ {
			off, pos, err := s.offIdx.Entry(i)
			if err != nil {
				fail("%v", err)
				return
			}
			if last, ok := lastAt[pos]; !ok || last != off {
				fail("%s: offset index entry %d (%d at %d) does not match the batch there", s.indexPath(), i, off, pos)
			}
		}
	}
	if s.timeIdx != nil {
		if err := s.timeIdx.Check(); err != nil {
			fail("%v", err)
			return
		}
		n, _ := s.timeIdx.Entries()
		for i := 0; i < n; i++ {
			ts, off, err := s.timeIdx.Entry(i)
			if err != nil {
				fail("%v", err)
				return
			}
			if mt, ok := maxAt[off]; !ok || mt != ts {
				fail("%s: time index entry %d (%d, %d) does not name a batch with that max timestamp", s.timeIndexPath(), i, ts, off)
			}
		}
	}
}
