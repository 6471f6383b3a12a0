package storage

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/logfs/logfs/index"
	"github.com/logfs/logfs/record"
)

// varintSlack bounds how much larger a record is inside a batch than
// record.RecordSize(0, 0, ...) says: its timestamp delta takes up to 10
// bytes instead of 1, its offset delta up to 5 instead of 1, and its length
// one more.
const varintSlack = 14

// nextFits reports whether a record of these fields still fits a batch of
// limit bytes after the records b holds. Without headers its framing is
// bounded by its fields' lengths alone (maxFraming, and varintSlack for
// the deltas), which spares the ten thousand records of a 1 MiB write of
// 100-byte lines a sizing each: the append's user CPU went down a fifth
// (BenchmarkAppendValuesWrite). Append and AppendValues must split the
// same values at the same records (TestAppendValuesWritesWhatAppendWrites):
// both ask here.
func nextFits(b *record.Builder, key, value []byte, headers []record.Header, limit int64) bool {
	bound := len(key) + len(value) + maxFraming + varintSlack
	if headers != nil {
		bound = record.RecordSize(0, 0, key, value, headers) + varintSlack
	}
	return int64(b.Size()+bound) <= limit
}

// Append writes recs at the end of the partition and returns the offset of
// the first. It is atomic: readers see all of the records at once or none
// of them, and on any error (a record over max.message.bytes, a full disk,
// an I/O error at any write: the log, an index, a roll) nothing of them
// stays in the log, so that a retry of the same records never duplicates
// any. The records go into one batch when it fits max.message.bytes and
// segment.bytes, and otherwise into as few consecutive batches as do,
// rolling to new segments as it must. Each record must fit
// max.message.bytes in a batch of its own (ErrRecordTooLarge). They are
// durable after the next flush: Sync, flush.ms, flush.messages, a roll or a
// clean close.
func (p *Partition) Append(recs []Record) (record.Offset, error) {
	if len(recs) == 0 {
		return p.EndOffset(), nil
	}
	cfg := p.topic.Config()
	fit := cfg.SureFit()
	for i := range recs {
		r := &recs[i]
		if surelyFits(r, fit) {
			continue // what CheckRecord would find first, without the call
		}
		if err := cfg.CheckRecord(r); err != nil {
			return 0, fmt.Errorf("record %d: %w", i, err)
		}
	}
	return p.appendBatches(cfg, func(b *record.Builder, limit, nowMs int64) (rendered int64, more bool) {
		n := 0
		for ; n < len(recs); n++ {
			r := &recs[n]
			if n > 0 && !nextFits(b, r.Key, r.Value, r.Headers, limit) {
				break
			}
			ts := r.Timestamp
			if ts == 0 {
				ts = nowMs
			}
			if r.Key == nil && r.Headers == nil {
				b.AppendValue(ts, r.Value)
			} else {
				b.Append(ts, r.Key, r.Value, r.Headers)
			}
			rendered += int64(len(r.Value)) + 1
		}
		recs = recs[n:]
		return rendered, len(recs) > 0
	})
}

// AppendValues is Append of records that have a value only (nil is a null
// value), no key and no headers, at the wall clock's time: the lines of
// an append file. It takes the values as they are, where Append would take
// a Record of 80 bytes for each: ten thousand of them for a 1 MiB write of
// 100-byte lines, built and read again only to be encoded.
func (p *Partition) AppendValues(values [][]byte) (record.Offset, error) {
	if len(values) == 0 {
		return p.EndOffset(), nil
	}
	cfg := p.topic.Config()
	fit := cfg.SureFit()
	for i, v := range values {
		if len(v) <= fit {
			continue
		}
		if err := cfg.CheckRecord(&Record{Value: v}); err != nil {
			return 0, fmt.Errorf("record %d: %w", i, err)
		}
	}
	return p.appendBatches(cfg, func(b *record.Builder, limit, nowMs int64) (rendered int64, more bool) {
		n := 0
		for ; n < len(values); n++ {
			v := values[n]
			if n > 0 && !nextFits(b, nil, v, nil, limit) {
				break
			}
			b.AppendValue(nowMs, v)
			rendered += int64(len(v)) + 1
		}
		values = values[n:]
		return rendered, len(values) > 0
	})
}

// appendBatches is the atomic part of Append and AppendValues, for records
// already checked against cfg: fill puts the next records into b, which is
// empty, as many as fit a batch of limit bytes and at least one, and
// returns the batch's Values rendering and whether records are left.
func (p *Partition) appendBatches(cfg Config, fill func(b *record.Builder, limit, nowMs int64) (rendered int64, more bool)) (record.Offset, error) {
	limit, _ := cfg.RecordLimit()
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.writableLocked(); err != nil {
		return 0, err
	}
	// One reading of the clock per append, under the lock, so that
	// timestamps given here and the partition's mtime follow offset order
	// (reading the clock is a tenth of an unbatched append on this VM).
	now := p.topic.log.now()
	tx, err := p.beginAppend(cfg, now)
	if err != nil {
		return 0, err
	}
	b := &p.builder
	for more := true; more; {
		b.Reset()
		var rendered int64
		rendered, more = fill(b, limit, now.UnixMilli())
		raw, err := b.Build()
		if err == nil && int64(len(raw)) > cfg.SegmentBytes {
			err = fmt.Errorf("%w: a record in a batch of %d bytes, segment.bytes is %d", ErrRecordTooLarge, len(raw), cfg.SegmentBytes)
		}
		if err == nil {
			err = tx.add(raw, rendered, true)
		}
		if err != nil {
			return 0, tx.abort(err)
		}
	}
	return tx.commit()
}

// appendTx is one atomic append: the batches of one write, put down one
// after the other at the end of the log (rolling as they must), published
// to readers all at once by commit or taken back entirely by abort. The
// caller holds Partition.mu from beginAppend to commit or abort, and calls
// exactly one of them.
//
// Until commit, what the batches change on disk is invisible: the
// segments' published sizes, max timestamps, the segment list and the log
// end stay as they were. Index entries are added to the indexes as the
// batches go down (a reader that meets one past the published log only
// reads less, as with any bound; see index.Span), so that a full disk in
// an index is an error of the batch that needed it.
type appendTx struct {
	p     *Partition
	cfg   Config
	now   time.Time
	first record.Offset // the log end at the start: the offset of the first record
	end   record.Offset // the next offset to give
	// segs is the active segment at the start, then each segment rolled
	// into; the last takes the next batch.
	segs    []*txSegment
	batches []txBatch
}

// txSegment is what an append knows of one segment it writes to, and how
// to undo it.
type txSegment struct {
	s       *segment
	created bool // rolled into by this append: abort deletes it
	// Where the segment stood at the start (the first segment only).
	size0, offEntries0, timeEntries0 int64
	bytesSinceIndex0                 int64
	rollTS0                          int64
	rollTSKnown0                     bool
	// What the append made of it so far.
	size        int64 // bytes of .log written
	touched     bool  // a write reached the .log, if only in part
	maxTS       int64
	maxTSOffset record.Offset
	ready       bool // writable, with its timestamps known
	sealing     bool // a later segment follows: commit seals it
}

// txBatch is a batch the append wrote, for the views at commit.
type txBatch struct {
	seg      *segment
	h        record.BatchHeader
	pos      record.Position
	rendered int64 // its Values rendering, or <0 when not known
}

// beginAppend starts an append at the end of the log. The caller holds
// p.mu and has checked writableLocked.
func (p *Partition) beginAppend(cfg Config, now time.Time) (*appendTx, error) {
	end := p.EndOffset()
	tx := &appendTx{p: p, cfg: cfg, now: now, first: end, end: end}
	s := p.active()
	ts := &txSegment{s: s, size0: s.size.Load(), bytesSinceIndex0: s.bytesSinceIndex, rollTS0: s.rollTS, rollTSKnown0: s.rollTSKnown}
	ts.size = ts.size0
	tx.segs = []*txSegment{ts}
	return tx, nil
}

// ready makes the segment a batch is about to go to writable and learns
// what the append must know of it: the entries of its indexes, to take
// back what it adds, and its max timestamp. A roll alone does not need it
// (a reopened active segment is sealed as it is).
func (tx *appendTx) ready(ts *txSegment) error {
	if ts.ready {
		return nil
	}
	s := ts.s
	if err := s.makeWritable(); err != nil {
		return err
	}
	if err := s.loadTimestamps(); err != nil {
		return err
	}
	s.idxMu.RLock()
	off, err := s.offIdx.Entries()
	var tim int
	if err == nil {
		tim, err = s.timeIdx.Entries()
	}
	s.idxMu.RUnlock()
	if err != nil {
		return fmt.Errorf("indexes of %s: %w", s.logPath(), err)
	}
	ts.offEntries0, ts.timeEntries0 = int64(off), int64(tim)
	ts.maxTS, ts.maxTSOffset = s.maxTS.Load(), record.Offset(s.maxTSOffset.Load())
	ts.ready = true
	return nil
}

// add writes one encoded batch after the ones before it. With assign the
// batch gets the next offset as its base; without, it keeps its own,
// which must be at or past the next offset (a copy of another log's
// batches, which may skip offsets). rendered is the size of its Values
// rendering, or <0 when the caller does not know it. On an error the
// caller aborts.
func (tx *appendTx) add(raw []byte, rendered int64, assign bool) error {
	h, err := record.ParseHeader(raw, 0)
	if err != nil {
		return err
	}
	if assign {
		if !record.OffsetsFit(tx.end, h.LastOffsetDelta) {
			return fmt.Errorf("%d records from offset %d: %w", int64(h.LastOffsetDelta)+1, tx.end, ErrOffsetsExhausted)
		}
		record.SetBaseOffset(raw, tx.end)
		h.BaseOffset = tx.end
	} else if h.BaseOffset < tx.end {
		return fmt.Errorf("batch at offset %d below the log end %d: %w", h.BaseOffset, tx.end, record.ErrCorrupt)
	}
	cur := tx.segs[len(tx.segs)-1]
	if err := tx.ready(cur); err != nil {
		return err
	}
	roll, err := tx.shouldRoll(cur, int64(len(raw)), &h)
	if err != nil {
		return err
	}
	if roll {
		if cur, err = tx.roll(h.BaseOffset); err != nil {
			return err
		}
	}
	s := cur.s
	pos := cur.size
	cur.touched = true
	if _, err := s.log.WriteAt(raw, pos); err != nil {
		return fmt.Errorf("append to %s: %w", s.logPath(), err)
	}
	cur.size += int64(len(raw))
	if pos == 0 {
		s.rollTS, s.rollTSKnown = h.MaxTimestamp, true
	}
	if h.MaxTimestamp > cur.maxTS {
		cur.maxTS, cur.maxTSOffset = h.MaxTimestamp, h.LastOffset()
	}
	if s.bytesSinceIndex > s.cfg.indexInterval {
		if err := s.addIndexEntry(h.LastOffset(), record.Position(pos), cur.maxTS, cur.maxTSOffset); err != nil {
			return err
		}
		s.bytesSinceIndex = 0
	}
	s.bytesSinceIndex += int64(len(raw))
	tx.batches = append(tx.batches, txBatch{seg: s, h: h, pos: record.Position(pos), rendered: rendered})
	tx.end = h.NextOffset()
	return nil
}

// shouldRoll applies Kafka's roll conditions before a batch: it would not
// fit in segment.bytes, the segment is older than segment.ms, an index is
// full, or the batch's offsets would overflow a relative offset.
func (tx *appendTx) shouldRoll(ts *txSegment, batchSize int64, h *record.BatchHeader) (bool, error) {
	seg, size := ts.s, ts.size
	if size == 0 {
		return false, nil
	}
	if size > tx.cfg.SegmentBytes-batchSize {
		return true, nil
	}
	if err := seg.loadRollTimestamp(); err != nil {
		return false, err
	}
	waited := tx.now.Sub(seg.created).Milliseconds()
	if seg.rollTS >= 0 {
		waited = h.MaxTimestamp - seg.rollTS
	}
	if waited > tx.cfg.SegmentMs {
		return true, nil
	}
	return seg.indexFull() || !seg.checkRelativeOffset(h.LastOffset()), nil
}

// roll starts a new segment at base after the current one, which gets
// what sealing it needs written now, so that commit cannot fail to seal
// it. Neither is visible before commit.
func (tx *appendTx) roll(base record.Offset) (*txSegment, error) {
	p := tx.p
	old := tx.segs[len(tx.segs)-1]
	s, err := createSegment(p.topic.log.fs, p.dir, base, p.topic.segmentConfig(), p.topic.log.logger)
	if err != nil {
		return nil, fmt.Errorf("roll %s at offset %d: %w", p, base, err)
	}
	s.seq, s.layout = old.s.seq+1, old.s.layout
	ts := &txSegment{s: s, created: true, maxTS: record.NoTimestamp, maxTSOffset: base, ready: true}
	tx.segs = append(tx.segs, ts)
	old.sealing = true
	if old.ready {
		if err := old.s.prepareSeal(old.maxTS, old.maxTSOffset); err != nil {
			return nil, fmt.Errorf("roll %s: seal segment %d: %w", p, old.s.base, err)
		}
	}
	return ts, nil
}

// commit publishes what the append wrote, then does what follows it: the
// flush of flush.messages, and the background flush after a roll. It
// returns the offset of the first record. A flush.messages flush runs
// before anything is published, so that its failure too leaves nothing.
func (tx *appendTx) commit() (record.Offset, error) {
	p := tx.p
	rolled := len(tx.segs) > 1
	if len(tx.batches) == 0 && !rolled {
		return tx.first, nil
	}
	flush := tx.cfg.FlushMessages > 0 && int64(tx.end)-p.flushedTo.Load() >= tx.cfg.FlushMessages
	if flush {
		if err := tx.syncData(); err != nil {
			return 0, tx.abort(fmt.Errorf("flush after %d messages: %w", tx.cfg.FlushMessages, err))
		}
	}
	// The point of no return: from here on nothing fails.
	for _, ts := range tx.segs {
		s := ts.s
		if ts.ready && ts.maxTS > s.maxTS.Load() {
			s.maxTSOffset.Store(int64(ts.maxTSOffset))
			s.maxTS.Store(ts.maxTS)
		}
		s.size.Store(ts.size) // after the bytes it covers
	}
	for i := range tx.batches {
		b := &tx.batches[i]
		if b.rendered >= 0 {
			b.seg.views.appended(&b.h, b.pos, b.rendered)
		}
	}
	if rolled {
		segs := slices.Clone(p.segments())
		for _, ts := range tx.segs {
			if ts.sealing {
				ts.s.finishSeal()
				ts.s.views.sealed(ts.s)
			}
			if ts.created {
				segs = append(segs, ts.s)
			}
		}
		p.setSegments(segs)
		p.dirDirty.Store(true)
		p.topic.log.flushSoon(p)
		p.topic.log.logger.Debug("rolled segment", "partition", p.String(), "base", p.active().base)
	}
	p.end.Store(int64(tx.end)) // last: a reader that sees it sees the rest
	p.lastAppend.Store(tx.now.UnixNano())
	p.notify()
	if flush {
		// The records are durable: this moves the recovery point and
		// flushes the indexes of a segment the append sealed.
		if err := p.Sync(); err != nil {
			p.topic.log.logger.Error("flush after flush.messages", "partition", p.String(), "err", err)
		}
	}
	return tx.first, nil
}

// syncData makes the log bytes the append wrote durable, and the entries
// of the segments it created.
func (tx *appendTx) syncData() error {
	for _, ts := range tx.segs {
		if ts.touched || ts.created {
			if err := ts.s.log.Sync(); err != nil {
				return fmt.Errorf("flush %s: %w", ts.s.logPath(), err)
			}
		}
	}
	if len(tx.segs) > 1 {
		if err := tx.p.topic.log.fs.SyncDir(tx.p.dir); err != nil {
			return fmt.Errorf("sync %s: %w", tx.p.dir, err)
		}
	}
	return nil
}

// abort takes back everything the append did, newest first: the segments
// it rolled into are deleted, the first one's log and indexes are cut back
// to where they stood and its appender state restored. It returns err, or,
// if the undo failed too, an error wrapping ErrFailed that the partition
// then returns for every append until it is reopened (and recovered).
func (tx *appendTx) abort(err error) error {
	p := tx.p
	var undo []error
	for i := len(tx.segs) - 1; i >= 1; i-- {
		undo = append(undo, tx.segs[i].s.discard())
	}
	ts := tx.segs[0]
	s := ts.s
	s.bytesSinceIndex, s.rollTS, s.rollTSKnown = ts.bytesSinceIndex0, ts.rollTS0, ts.rollTSKnown0
	if ts.touched {
		if terr := s.log.Truncate(ts.size0); terr != nil {
			undo = append(undo, fmt.Errorf("cut %s back to %d bytes: %w", s.logPath(), ts.size0, terr))
		}
	}
	if ts.ready {
		s.idxMu.RLock()
		if s.offIdx != nil {
			undo = append(undo, s.offIdx.TruncateEntries(int(ts.offEntries0)))
		}
		if s.timeIdx != nil {
			undo = append(undo, s.timeIdx.TruncateEntries(int(ts.timeEntries0)))
		}
		s.idxMu.RUnlock()
		s.roomKnown.Store(false)
	}
	if uerr := errors.Join(undo...); uerr != nil {
		p.failed = fmt.Errorf("%w: %s: %w; undoing it: %v", ErrFailed, p, err, uerr)
		p.topic.log.logger.Error("append could not be undone; the partition refuses appends until it is reopened",
			"partition", p.String(), "err", err, "undo", uerr)
		return p.failed
	}
	return err
}

// rollLocked starts a new active segment at base and seals the old one,
// outside an append (retention rolls a condemned active segment).
func (p *Partition) rollLocked(base record.Offset) error {
	tx, err := p.beginAppend(p.topic.Config(), p.topic.log.now())
	if err != nil {
		return err
	}
	if _, err := tx.roll(base); err != nil {
		return tx.abort(err)
	}
	_, err = tx.commit()
	return err
}

// indexRuleErr reports whether err is an index refusing an entry by its
// rules (full, out of order, overflow) rather than failing to write it.
// Such an entry is left out: the index stays correct, only sparser.
func indexRuleErr(err error) bool {
	return errors.Is(err, index.ErrFull) || errors.Is(err, index.ErrInvalidOffset) ||
		errors.Is(err, index.ErrInvalidTimestamp) || errors.Is(err, index.ErrInvalidPosition) ||
		errors.Is(err, index.ErrOffsetOverflow)
}
