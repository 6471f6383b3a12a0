package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sync"

	"github.com/logfs/logfs/index"
	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/vfs"
)

// lookupReadAhead is how much of the log an offset lookup reads at a time
// while it walks batch headers from the index entry, when the index cannot
// say how far the next entry is: about two index intervals, so a lookup is
// usually one pread.
const lookupReadAhead = 8 << 10

// spanSlack is what a lookup reads past the next index entry: the header of
// the batch there and, for small batches, all of it, since the batch
// holding the target may be that one.
const spanSlack = 1 << 10

// mappedReadMax is the largest read copied out of the mapping; larger
// ones, which are a streaming Reader's once its reads have grown, and big
// batches, are read with pread, and so are all of a View's (the mount's).
// Three reasons:
//
//   - Memory (measured): every page read through the mapping stays
//     mapped, and counts in the process's RSS, until the segment goes: a
//     cat of a 1 GiB partition through the mount left 1 GiB of it. pread
//     leaves nothing.
//   - Cold data (not measured here): a read(2) gets the kernel's
//     sequential read-ahead; page faults through a mapping get less.
//   - Big copies (measured): in a virtual machine each page the TLB does not hold
//     costs a nested page walk, where the kernel's copy goes through its
//     direct map of huge pages: a lookup in 1 MiB batches took 333 us
//     through the mapping against 164 with pread.
//
// Reads up to 128 KiB (a lookup's batch of 64 records of 1 KiB, a Reader's
// first reads after a seek, which double from 8 KiB) keep the mapping: a
// lookup in 66 KB batches takes 14 us through it against 19 with pread,
// one over 100-byte records 0.9 against 2.9. A warm sequential read all
// through the mapping was 10-18 % faster; that is the price. The pages
// lookups touch stay mapped (the kernel reclaims them like any page cache)
// until the segment is deleted or the log closes; dropping them every few
// thousand lookups to bound that was measured, and made every lookup after
// a drop pay a page fault: 4 us instead of 0.9.
const mappedReadMax = 128 << 10

// indexLookup returns the offset-index span around target: the largest
// entry at or below it and the next one (see index.Span). An index that
// turns out to be corrupt or missing on first use is rebuilt on disk (see
// indexBroken), or on a read-only log replaced by an in-memory one built
// from the log, which gives spans without a next entry; the problem is
// logged once.
func (s *segment) indexLookup(target record.Offset) (index.Span, error) {
	s.checkIndexEnds()
	for try := 0; ; try++ {
		s.idxMu.RLock()
		if s.offIdx == nil || s.fallback != nil {
			s.idxMu.RUnlock()
			break
		}
		sp, err := s.offIdx.LookupSpan(target)
		s.idxMu.RUnlock()
		if err == nil {
			return sp, nil
		}
		if !indexUnusable(err) {
			return index.Span{}, err
		}
		if try > 0 || !s.indexBroken(err, 0) {
			break
		}
	}
	m, err := s.memIndex()
	if err != nil {
		return index.Span{}, err
	}
	return m.lookup(target, s.base), nil
}

// readSpan is how much of the log a pread lookup reads from sp.Pos: up to
// just past the next index entry, where the batch holding the target
// starts at the latest, or lookupReadAhead when there is no next entry.
func readSpan(sp index.Span) int {
	if sp.NextPos <= sp.Pos {
		return lookupReadAhead
	}
	return int(min(sp.NextPos-sp.Pos, 2*lookupReadAhead)) + spanSlack
}

// prefetchSpan is how much of the log from sp.Pos a walk of batch headers
// in the mapping fetches into the cache first (see index.LogMap.FindBatch):
// up to where target's batch should start if the offsets in the span are
// spread evenly over its bytes, plus an eighth of the span for uneven
// ones, and never past the next entry's header. A wrong guess costs time,
// not correctness: the walk goes on past what was fetched.
func prefetchSpan(sp index.Span, target record.Offset) int {
	if sp.NextPos <= sp.Pos || sp.NextOff <= sp.Off {
		return readSpan(sp)
	}
	bytes := int64(sp.NextPos - sp.Pos)
	spread := min(max(target, sp.Off), sp.NextOff) - sp.Off // a target below the span guesses its start
	guess := bytes*int64(spread)/int64(sp.NextOff-sp.Off) + bytes/8
	return int(min(guess, bytes) + record.HeaderSize)
}

// timeLookup returns the time-index entry to start a search by time from:
// the one with the largest timestamp at or below ts, or (-1, base).
func (s *segment) timeLookup(ts int64) (int64, record.Offset, error) {
	s.checkIndexEnds()
	for try := 0; ; try++ {
		s.idxMu.RLock()
		if s.timeIdx == nil || s.fallback != nil {
			s.idxMu.RUnlock()
			break
		}
		found, off, err := s.timeIdx.Lookup(ts)
		s.idxMu.RUnlock()
		if err == nil {
			return found, off, nil
		}
		if !indexUnusable(err) {
			return 0, 0, err
		}
		if try > 0 || !s.indexBroken(err, 0) {
			break
		}
	}
	m, err := s.memIndex()
	if err != nil {
		return 0, 0, err
	}
	found, off := m.timeLookup(ts, s.base)
	return found, off, nil
}

// indexFault is an offset-index entry that a lookup found to break the
// rule against the batch at its position (index.CheckEntryStart).
func (s *segment) indexFault(rule string) error {
	return &index.CorruptError{File: s.indexPath(), Rule: rule}
}

// seek positions sc at the first batch of s whose last offset is at or
// above target; see seekOnce. An index entry that breaks its rule against
// the batch at its position is either a wrong entry or a batch whose base
// offset is wrong (the CRC does not cover it): the seek is made again by a
// walk from the segment's start, which reports the batch if it is the
// one at fault, and otherwise makes the index be replaced (rebuilt, or on
// a read-only log indexed in memory).
func (s *segment) seek(sc *record.Scanner, target record.Offset, opts record.ScanOptions) (found bool, ended record.Offset, err error) {
	gen := s.idxGen.Load()
	found, ended, err = s.seekOnce(sc, target, opts, false)
	if fault, ok := entryFault(err); ok {
		if found, ended, err = s.seekOnce(sc, target, opts, true); err == nil {
			s.indexBroken(fault, gen)
		}
	}
	return found, ended, err
}

// resumeAfter finds the first valid batch after bad bytes at pos, below
// size, that may follow a batch that ended at ended (see record.Resync),
// for a read that asks for offsets past the bad bytes. It returns the
// batch's header and position.
func (s *segment) resumeAfter(pos record.Position, ended record.Offset, size record.Position) (record.Batch, bool, error) {
	limit := record.Offset(math.MaxInt64)
	b, ok, err := record.Resync(s.log, pos+1, size, 0, func(b *record.Batch) bool {
		return b.CheckFollows(s.base, ended, limit) == nil
	})
	if err != nil {
		return record.Batch{}, false, fmt.Errorf("%s: %w", s.logPath(), err)
	}
	b.Bytes = nil
	return b, ok, nil
}

// entryFault says whether err is an index entry proven wrong by a lookup.
func entryFault(err error) (*index.CorruptError, bool) {
	var ie *index.CorruptError
	return ie, errors.As(err, &ie)
}

// seekOnce positions sc at the first batch of s whose last offset is at or
// above target (the batch that holds target, or the next one after a
// compaction gap): the next sc.Next returns it, read with opts. It walks
// batch headers from the index entry with a small read, which usually also
// holds the batch. It reports false, with sc at the segment's end, when no
// batch qualifies. ended is the least base offset the batch at sc may
// have (where the batch before it ended, if the walk saw it; else the
// bound the index gives, index.Span.From): a batch walked over whose
// offsets go back is corrupt (record.Batch.CheckFollows), and is an error
// here. The batch at the entry's position must keep the entry's rule
// (index.CheckEntryStart), or the index is at fault: an *index.CorruptError.
// fromStart walks from the segment's start, without the index.
func (s *segment) seekOnce(sc *record.Scanner, target record.Offset, opts record.ScanOptions, fromStart bool) (found bool, ended record.Offset, err error) {
	sp := index.Span{Off: s.base, From: s.base, NextPos: -1}
	if !fromStart {
		if sp, err = s.indexLookup(target); err != nil {
			return false, s.base, err
		}
	}
	start := sp.Pos
	size := record.Position(s.size.Load())
	if start > size {
		start = 0
	}
	ended = max(s.base, sp.From)
	var r io.ReaderAt = s.log
	if m := s.mapping(); m != nil {
		// No system call: walk the headers in the mapping, then read the
		// batch alone, growing reads from there.
		at, next, found, err := m.FindBatch(start, size, target, ended, prefetchSpan(sp, target))
		if err != nil {
			return false, ended, err
		}
		if found && at == sp.Pos && sp.Pos > 0 {
			// The target is in the entry's own batch, or the batch claims
			// to start past it: the entry must not lie about its base.
			var b [8]byte
			if _, err := m.ReadAt(b[:], int64(at)); err != nil {
				return false, ended, err
			}
			if rule := index.CheckEntryStart(sp, record.Offset(binary.BigEndian.Uint64(b[:]))); rule != "" {
				return false, ended, s.indexFault(rule)
			}
		}
		if found {
			// Read no more than asked for: the header, then the batch.
			// (Reading the whole batch at once measured slower on 66 KB
			// batches, 17.5 against 14.4 us, and no faster on small ones.)
			opts.ReadAhead = 1
			sc.Reset(m, at, size, opts)
			return true, next, nil
		}
		r, start, ended = m, at, next // the scanner goes on, and says why the walk stopped
	}
	headers := record.ScanOptions{HeadersOnly: true, ReadAhead: readSpan(sp), MaxReadAhead: lookupReadAhead}
	sc.Reset(r, start, size, headers)
	for {
		var bad error
		var badAt record.Position
		for sc.Next() {
			b := sc.Batch()
			if b.Pos == sp.Pos {
				if rule := index.CheckEntryStart(sp, b.BaseOffset); rule != "" {
					return false, ended, s.indexFault(rule)
				}
			}
			if err := b.CheckFollows(s.base, ended, math.MaxInt64); err != nil {
				bad, badAt = record.WithFile(err, s.logPath()), b.Pos
				break
			}
			if b.LastOffset() >= target {
				sc.Seek(b.Pos, opts)
				return true, ended, nil
			}
			ended = b.NextOffset()
		}
		if bad == nil {
			if err := sc.Err(); err != nil {
				var ce *record.CorruptError
				if !errors.As(err, &ce) {
					return false, ended, record.WithFile(err, s.logPath())
				}
				bad, badAt = record.WithFile(err, s.logPath()), sc.Pos()
			}
		}
		if bad == nil {
			break
		}
		// Bad bytes: a target past what they held is found after them.
		q, ok, err := s.resumeAfter(badAt, ended, size)
		if err != nil {
			return false, ended, err
		}
		if !ok || q.BaseOffset > target {
			return false, ended, bad // the target is in them, or nothing follows
		}
		sc.Reset(s.reader(), q.Pos, size, headers)
	}
	sc.Seek(size, opts)
	return false, ended, nil
}

// findTime returns the first record at or after startOffset whose timestamp
// is at or above ts, following Kafka's findOffsetByTimestamp: the time
// index gives an entry (T, O), the offset index the position for
// max(O, startOffset), and a scan from there skips batches whose max
// timestamp is below ts. Every batch it passes must follow the one before
// it and end below limit, the next segment's base offset (see
// Reader.nextBatch). The entries used are checked against the batches the
// scan passes (index.CheckEntryStart, index.TimeEntryScan); when one breaks
// its rule, a scan from the segment's start answers and says whether the
// log or the index is at fault, as in seek.
func (s *segment) findTime(ts int64, startOffset, limit record.Offset) (record.Offset, bool, error) {
	gen := s.idxGen.Load()
	off, found, err := s.findTimeOnce(ts, startOffset, limit, false)
	if fault, ok := entryFault(err); ok {
		// As in seek: a scan from the start says which is at fault.
		if off, found, err = s.findTimeOnce(ts, startOffset, limit, true); err == nil {
			s.indexBroken(fault, gen)
		}
	}
	return off, found, err
}

func (s *segment) findTimeOnce(ts int64, startOffset, limit record.Offset, fromStart bool) (record.Offset, bool, error) {
	entryTS, entryOff := int64(-1), s.base
	sp := index.Span{Off: s.base, From: s.base, NextPos: -1}
	if !fromStart {
		var err error
		if entryTS, entryOff, err = s.timeLookup(ts); err != nil {
			return 0, false, err
		}
		if sp, err = s.indexLookup(max(entryOff, startOffset)); err != nil {
			return 0, false, err
		}
	}
	size := record.Position(s.size.Load())
	from := sp.Pos
	if from > size {
		from = 0
	}
	ended := max(s.base, sp.From)
	check := index.NewTimeEntryScan(-1, 0)
	if startOffset <= entryOff {
		check = index.NewTimeEntryScan(entryTS, entryOff) // the scan starts where the entry's rule is about
	}
	st := lookupStates.Get().(*lookupState)
	defer lookupStates.Put(st)
	headers := record.ScanOptions{HeadersOnly: true, ReadAhead: readSpan(sp), MaxReadAhead: readerMaxReadAhead}
	st.sc.Reset(s.reader(), from, size, headers)
	for st.sc.Next() {
		h := st.sc.Batch()
		if h.Pos == sp.Pos {
			if rule := index.CheckEntryStart(sp, h.BaseOffset); rule != "" {
				return 0, false, s.indexFault(rule)
			}
		}
		if err := h.CheckFollows(s.base, ended, limit); err != nil {
			return 0, false, record.WithFile(err, s.logPath())
		}
		ended = h.NextOffset()
		if !check.Batch(h.BaseOffset, h.MaxTimestamp) && check.Rule() != "" {
			return 0, false, &index.CorruptError{File: s.timeIndexPath(), Rule: check.Rule()}
		}
		if h.MaxTimestamp < ts || h.LastOffset() < startOffset {
			continue // skipped on its header alone
		}
		if h.RecordCount == 1 && h.LastOffsetDelta == 0 && h.BaseOffset >= startOffset &&
			(h.Attributes.LogAppendTime() || h.BaseTimestamp == h.MaxTimestamp) {
			// Found on its header too: the one record of the batch is at
			// the base offset and its timestamp is the batch's max. Not
			// when its base timestamp differs: a record stamped below -1
			// has the max -1 (Kafka's builder starts the max there).
			return h.BaseOffset, true, nil
		}
		st.sc.Seek(h.Pos, readerScan)
		if !st.sc.Next() {
			break
		}
		it, err := st.dec.Records(st.sc.Batch())
		if err != nil {
			return 0, false, record.WithFile(err, s.logPath())
		}
		for it.Next() {
			if r := it.Record(); r.Timestamp >= ts && r.Offset >= startOffset {
				return r.Offset, true, nil
			}
		}
		if err := it.Err(); err != nil {
			return 0, false, record.WithFile(err, s.logPath())
		}
		st.sc.Seek(st.sc.Pos(), headers)
	}
	return 0, false, record.WithFile(st.sc.Err(), s.logPath())
}

// lookupState is the scratch of a lookup by time, pooled so that lookups
// allocate nothing in the steady state.
type lookupState struct {
	sc  record.Scanner
	dec record.Decoder
}

var lookupStates = sync.Pool{New: func() any { return new(lookupState) }}

// memIndex is an offset and time index held in memory, built by one scan of
// a segment's batch headers. It stands in for index files that are missing
// or corrupt when they cannot be rebuilt on disk (a read-only log).
type memIndex struct {
	built       bool
	entries     []memEntry
	maxTS       int64
	maxTSOffset record.Offset
	// What the index covers, for a followed segment's, which grows
	// (follow.go): the log it scanned, its last entry, where its batches end.
	scanned   record.Position
	lastEntry record.Position
	ended     record.Offset
}

type memEntry struct {
	last        record.Offset   // last offset of the batch at pos
	pos         record.Position // batch start
	maxTS       int64           // running max timestamp up to and including the batch
	maxTSOffset record.Offset   // last offset of the batch where maxTS was first reached
}

// memIndex returns the segment's in-memory index, building it on first use.
// It covers the log as it was when built; lookups scan forward from an
// entry, so later appends are still found.
func (s *segment) memIndex() (*memIndex, error) {
	s.idxMu.Lock()
	defer s.idxMu.Unlock()
	size := record.Position(s.size.Load())
	if f := s.fallback; f != nil && f.built && !(s.cfg.follow && size-f.scanned > memIndexRegrow) {
		return f, nil
	}
	m := &memIndex{maxTS: record.NoTimestamp, maxTSOffset: s.base, ended: s.base}
	if f := s.fallback; f != nil && f.built {
		// A followed segment that grew: go on from where the index ended,
		// in a copy, as lookups read the old one without a lock.
		*m = *f
		m.entries = slices.Clone(f.entries)
	}
	sc := record.NewScanner(s.log, m.scanned, size, record.ScanOptions{HeadersOnly: true})
	lastEntry, ended := m.lastEntry, m.ended
	for {
		for sc.Next() {
			b := sc.Batch()
			if b.MaxTimestamp > m.maxTS {
				m.maxTS, m.maxTSOffset = b.MaxTimestamp, b.LastOffset()
			}
			if int64(b.Pos-lastEntry) > s.cfg.indexInterval {
				m.entries = append(m.entries, memEntry{last: b.LastOffset(), pos: b.Pos, maxTS: m.maxTS, maxTSOffset: m.maxTSOffset})
				lastEntry = b.Pos
			}
			ended = b.NextOffset()
		}
		err := sc.Err()
		if err == nil {
			break
		}
		var ce *record.CorruptError
		if !errors.As(err, &ce) {
			return nil, fmt.Errorf("index %s in memory: %w", s.logPath(), err)
		}
		// Bad bytes: reads before them are served, the read that reaches
		// them fails on them, and the index goes on after them, for reads
		// of what follows.
		s.logger.Error("corrupt batch; indexing the segment in memory around it", "segment", s.logPath(), "err", record.WithFile(err, s.logPath()))
		q, ok, err := s.resumeAfter(sc.Pos(), ended, size)
		if err != nil {
			return nil, err
		}
		if !ok {
			break
		}
		// An entry at the batch after the bad bytes, so that lookups past
		// them start there.
		if q.MaxTimestamp > m.maxTS {
			m.maxTS, m.maxTSOffset = q.MaxTimestamp, q.LastOffset()
		}
		m.entries = append(m.entries, memEntry{last: q.LastOffset(), pos: q.Pos, maxTS: m.maxTS, maxTSOffset: m.maxTSOffset})
		lastEntry = q.Pos
		sc.Reset(s.log, q.Pos, size, record.ScanOptions{HeadersOnly: true})
	}
	m.scanned, m.lastEntry, m.ended = sc.Pos(), lastEntry, ended
	m.built = true
	s.fallback = m
	return m, nil
}

// lookup returns the span around target, as index.OffsetIndex.LookupSpan
// would for these entries, without the next entry.
func (m *memIndex) lookup(target, base record.Offset) index.Span {
	lo, hi := 0, len(m.entries) // first entry with last > target
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if m.entries[mid].last <= target {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	sp := index.Span{Off: base, From: base, NextPos: -1}
	if lo > 0 {
		sp.Off, sp.Pos = m.entries[lo-1].last, m.entries[lo-1].pos
	}
	if lo > 1 {
		sp.From = m.entries[lo-2].last + 1
	}
	return sp
}

func (m *memIndex) timeLookup(ts int64, base record.Offset) (int64, record.Offset) {
	lo, hi := 0, len(m.entries) // first entry with maxTS > ts
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if m.entries[mid].maxTS <= ts {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo == 0 {
		return -1, base
	}
	return m.entries[lo-1].maxTS, m.entries[lo-1].maxTSOffset
}

// mappedLog reads a segment's .log through its mapping where the read is
// small (see mappedReadMax) and the mapping covers it, and with pread
// otherwise (a big read, or an active segment grown beyond segment.bytes,
// as a Kafka topic with a larger setting can).
type mappedLog struct {
	*index.LogMap
	f vfs.File
}

func (r *mappedLog) ReadAt(p []byte, off int64) (int, error) {
	if len(p) <= mappedReadMax && off+int64(len(p)) <= int64(r.Len()) {
		return r.LogMap.ReadAt(p, off)
	}
	return r.f.ReadAt(p, off)
}

// reader returns what to read the segment's log through: its mapping, or
// the file itself when it cannot be mapped.
func (s *segment) reader() io.ReaderAt {
	if m := s.mapping(); m != nil {
		return m
	}
	return s.log
}

// mapping returns the segment's .log mapped read-only, or nil when it
// cannot be mapped (not an OS file, empty, or out of address space or map
// count: pread works as well, only slower). Reads through it copy without a
// system call. It is made on first use: a sealed segment's as the file is,
// the active one's out to segment.bytes, past the end of the file, so that
// appends show through it without a remap (no byte past the published size
// is ever read, and a log only grows). The caller holds a reference to s,
// which keeps the mapping alive: it is unmapped when the last one goes.
func (s *segment) mapping() *mappedLog {
	if m := s.mapped.Load(); m != nil || s.noMap.Load() {
		return m
	}
	s.mapMu.Lock()
	defer s.mapMu.Unlock()
	if m := s.mapped.Load(); m != nil || s.noMap.Load() {
		return m
	}
	f, ok := s.log.(interface{ Fd() uintptr })
	frozen := s.frozen.Load() // before the size, so that a frozen size is final
	size := s.size.Load()
	length := size
	if !frozen {
		length = max(size, s.cfg.segmentBytes)
	}
	if !ok || length == 0 {
		s.noMap.Store(true)
		return nil
	}
	lm, err := index.MapLog(f.Fd(), s.logPath(), length)
	if err != nil {
		s.logger.Info("reading segment without a mapping", "segment", s.logPath(), "err", err)
		s.noMap.Store(true)
		return nil
	}
	m := &mappedLog{LogMap: lm, f: s.log}
	s.mapped.Store(m)
	return m
}
