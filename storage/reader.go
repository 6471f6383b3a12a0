package storage

import (
	"context"
	"fmt"
	"io"
	"math"

	"github.com/logfs/logfs/record"
)

// readerMaxReadAhead bounds how much a Reader reads at a time once it is
// streaming: its reads start at one index interval and double up to this.
const readerMaxReadAhead = 256 << 10

var readerScan = record.ScanOptions{ReadAhead: lookupReadAhead, MaxReadAhead: readerMaxReadAhead}

// headerScan is readerScan for a walk that needs batch headers only: no
// batch is read whole or has its CRC checked.
var headerScan = record.ScanOptions{HeadersOnly: true, ReadAhead: lookupReadAhead, MaxReadAhead: readerMaxReadAhead}

// Reader reads a partition's records in offset order, across segments,
// from a starting offset. Control records (transaction markers) are
// skipped. A Reader is used by one goroutine; any number of Readers run
// alongside the appender. Seek reuses a Reader's buffers, so a lookup
// allocates nothing.
type Reader struct {
	p    *Partition
	next record.Offset      // records below it are skipped
	scan record.ScanOptions // readerScan, or headerScan for a walk of headers (Partition.refuseHole)

	seg     *segment // pinned
	sc      record.Scanner
	ended   record.Offset   // where the last batch read from sc ended, or a lower bound for the next
	lastPos record.Position // the position of that batch
	limit   record.Offset   // the next segment's base offset, or 0 when not looked up yet
	err     error           // a corrupt batch, or a failed Seek: returned until the next Seek
	dec     record.Decoder
	it      record.RecordIter
	inBatch bool
	closed  bool
}

// NewReader returns a reader positioned at offset from, which must lie
// between the log start and end offsets (the end itself is allowed: the
// reader waits there for new records).
func (p *Partition) NewReader(from record.Offset) (*Reader, error) {
	return p.newReader(from, readerScan)
}

// newReader is NewReader with the scan options of its batches: headerScan
// gives a reader whose nextBatch returns headers only, for a caller that
// wants to know where the batches are, not what they hold.
func (p *Partition) newReader(from record.Offset, scan record.ScanOptions) (*Reader, error) {
	r := &Reader{p: p, scan: scan}
	if err := r.Seek(from); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// Seek moves the reader to offset from, with the same rules as NewReader:
// one binary search over the segments, one over the segment's index, and
// a walk of batch headers from the entry found.
func (r *Reader) Seek(from record.Offset) error {
	if r.closed {
		return ErrClosed
	}
	p := r.p
	if start, end := p.StartOffset(), p.EndOffset(); from < start || from > end {
		return fmt.Errorf("%s offset %d (log holds %d to %d): %w", p, from, start, end, ErrOffsetOutOfRange)
	}
	r.next, r.inBatch, r.err = from, false, nil
	for {
		segs := p.segments()
		if lo := p.StartOffset(); from < lo {
			// Retention ran since the check above: it raises the start
			// before it publishes the shorter list.
			r.err = fmt.Errorf("%s offset %d (log starts at %d): %w", p, from, lo, ErrOffsetOutOfRange)
			return r.err
		}
		s := segs[max(floorSegment(segs, from), 0)]
		if s != r.seg {
			if !s.acquire() {
				if p.isClosed() { // every segment is gone for good
					r.err = fmt.Errorf("%s: %w", p, ErrClosed)
					return r.err
				}
				continue // deleted by retention under us; look again
			}
			if r.seg != nil {
				r.seg.release()
			}
			r.seg = s
		}
		_, ended, err := s.seek(&r.sc, from, r.scan)
		r.ended, r.err, r.limit = ended, err, 0 // a Seek that failed fails the reads after it too
		return err
	}
}

// Next returns the next record, or io.EOF when the reader has caught up
// with the log end. The record and its slices are valid until the next
// call. A corrupt batch is an error wrapping record.ErrCorrupt that names
// the file and position.
func (r *Reader) Next() (*record.Record, error) {
	if r.closed {
		return nil, ErrClosed
	}
	for {
		if r.inBatch {
			if r.it.Next() {
				rec := r.it.Record()
				if rec.Offset < r.next {
					continue
				}
				r.next = rec.Offset + 1
				return rec, nil
			}
			r.inBatch = false
			if err := r.it.Err(); err != nil {
				r.err = record.WithFile(err, r.seg.logPath())
				return nil, r.err
			}
			continue
		}
		b, err := r.nextBatch()
		if err != nil {
			return nil, err
		}
		if b.Attributes.Control() || b.LastOffset() < r.next {
			r.next = max(r.next, b.NextOffset())
			continue
		}
		if r.it, err = r.dec.Records(b); err != nil {
			r.err = record.WithFile(err, r.seg.logPath())
			return nil, r.err
		}
		r.inBatch = true
	}
}

// nextBatch returns the next batch, moving to the next segment at the end of
// one, or io.EOF at the end of the log. A batch whose offsets cannot follow
// the one before it (record.Batch.CheckFollows) is corrupt.
func (r *Reader) nextBatch() (*record.Batch, error) {
	if r.err != nil {
		return nil, r.err
	}
	for {
		size := record.Position(r.seg.size.Load())
		r.sc.Extend(size)
		if r.sc.Next() {
			b := r.sc.Batch()
			if r.seg.isCut(r.sc.Pos() - 1) {
				r.err = r.seg.cutErr()
				return nil, r.err
			}
			if err := b.CheckFollows(r.seg.base, r.ended, r.segmentLimit()); err != nil {
				r.err = record.WithFile(err, r.seg.logPath())
				return nil, r.err
			}
			if want := max(r.next, r.ended); b.BaseOffset > want && r.p.gapless() {
				r.err = r.p.holeErr(want, b.BaseOffset, r.seg.logPath(), b.Pos)
				return nil, r.err
			}
			r.ended, r.lastPos = b.NextOffset(), b.Pos
			return b, nil
		}
		if err := r.sc.Err(); err != nil {
			return nil, record.WithFile(err, r.seg.logPath())
		}
		next := r.p.segmentAfter(r.seg.base)
		if next == nil {
			return nil, io.EOF
		}
		if record.Position(r.seg.size.Load()) > size {
			continue // the segment grew before it was rolled
		}
		if r.ended > next.base {
			// The last batch read claims offsets of the next segment,
			// which was not there yet when it was read.
			r.err = record.WithFile(record.BeyondSegment(r.lastPos, r.ended-1, next.base), r.seg.logPath())
			return nil, r.err
		}
		if next.seq != r.seg.seq+1 {
			r.err = fmt.Errorf("%s after offset %d: %w", r.p, r.ended-1, ErrDeleted)
			return nil, r.err
		}
		if want := max(r.next, r.ended); want < next.base && r.p.gapless() {
			r.err = r.p.holeErr(want, next.base, next.logPath(), 0)
			return nil, r.err
		}
		if !next.acquire() {
			if r.p.isClosed() {
				// Every segment the reader does not hold is gone for
				// good (its topic deleted, or the log closed), and the
				// list no longer changes: looking again would spin.
				r.err = fmt.Errorf("%s after offset %d: %w", r.p, r.ended-1, ErrClosed)
				return nil, r.err
			}
			continue // deleted by retention under us; look again
		}
		r.seg.release()
		r.seg, r.ended, r.limit = next, next.base, 0
		r.sc.Reset(next.reader(), 0, record.Position(next.size.Load()), r.scan)
	}
}

// segmentLimit returns the base offset of the segment after the reader's,
// below which every offset of its segment lies; math.MaxInt64 while it is
// the newest (looked up again then, as it may have rolled).
func (r *Reader) segmentLimit() record.Offset {
	if r.limit == 0 || r.limit == math.MaxInt64 {
		r.limit = math.MaxInt64
		if next := r.p.segmentAfter(r.seg.base); next != nil {
			r.limit = next.base
		}
	}
	return r.limit
}

// Wait blocks until a record past the reader's position may be there, the
// partition closes, or ctx is done.
func (r *Reader) Wait(ctx context.Context) error {
	return r.p.Wait(ctx, r.next)
}

// Close releases the reader's segment.
func (r *Reader) Close() error {
	if !r.closed {
		r.closed = true
		if r.seg != nil {
			r.seg.release()
		}
	}
	return nil
}

// segmentAfter returns the segment following the one with base offset base.
func (p *Partition) segmentAfter(base record.Offset) *segment {
	segs := p.segments()
	i := floorSegment(segs, base) + 1
	if i < len(segs) && segs[i].base > base {
		return segs[i]
	}
	return nil
}

// gapless says the partition never has offset gaps (Options.Gaps).
func (p *Partition) gapless() bool { return p.topic.log.gapless }

// holeErr is the error of a read that wanted offset want and found the
// next batch at base, in a gapless partition.
func (p *Partition) holeErr(want, base record.Offset, file string, pos record.Position) error {
	return fmt.Errorf("%s: offsets %d to %d are missing (next batch in %s at position %d): %w", p, want, base-1, file, pos, ErrHole)
}
