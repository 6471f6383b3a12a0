package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/vfs"
)

// viewInterval is how many rendered bytes lie between two entries of a view
// index: a random read renders at most this much (plus one batch) before
// it reaches its first byte. 8 KiB (32 KiB before issue 16): a 4 KiB pread
// at a new position in batches of 64 records of 100 B took half the time
// with it (BenchmarkViewPreadSmallBatches), for an entry of 16 bytes in the
// sidecar (24 in memory) per 8 KiB of rendering, 0.3 %. The interval is not
// in the sidecar and need not be: an entry is only a batch start and the
// rendered bytes before it, so an index written with another interval
// (an older logfs's 32 KiB) is as right, only sparser or denser; it is used
// as it is, and entries added to it later follow this interval. A variable
// for tests.
var viewInterval int64 = 8 << 10

// viewEntry places a batch in a segment's rendering.
type viewEntry struct {
	pos      record.Position // batch start in the .log
	base     record.Offset   // the batch's base offset
	rendered int64           // rendered bytes of the segment before the batch
}

// viewIndex maps the rendering of one segment in one format to its log: the
// sparse sidecar that lets a view answer its size and a read at any byte
// position without rendering the segment from the start. Entries are added
// as batches are appended (the values format, kept by the appender) or as
// readers first cover them (every format); the values index is written to
// <base>.viewindex when the segment is sealed or the log closes, and read
// back on first use.
type viewIndex struct {
	format Format

	mu           sync.Mutex
	entries      []viewEntry     // entries[0] is the segment start; sorted by every field
	covered      record.Position // log bytes described
	total        int64           // rendered bytes of [0, covered)
	sinceEntry   int64           // rendered bytes since the last entry
	lastBatchPos record.Position // start and CRC of the last batch covered,
	lastBatchCRC uint32          // to recognise the same log later
	next         record.Offset   // where the last batch covered ended (see record.Batch.CheckFollows)
	persisted    record.Position // covered when last written to the sidecar, or -1
	dec          record.Decoder
	scratch      []byte
	inner        map[record.Position]*innerBatch // big batches' marks, see viewinner.go
	// retired says the index keeps no marks any more: it was replaced,
	// and views that still hold it read on with it (retire).
	retired bool

	// txns are the transactional data batches covered, in log order, and
	// txnBatches counts them and the transaction markers covered:
	// ReadCommitted views hide the aborted ones (see txnview.go).
	txns       []viewTxn
	txnBatches int
	vis        visibility

	// holes are the bad ranges of the log met so far, in log order: a view
	// whose records reach one stops there (see View.stop). Once one is
	// known, the index is not written to the sidecar.
	holes []viewHole

	// The budget of all indexes' entries (see viewbudget.go). seg is the
	// segment that holds the index, set before it is shared; sidecar says
	// its entries may be brought back from the segment's sidecar.
	seg     *segment
	sidecar bool
	used    atomic.Int64 // indexClock at the last lookup
	charged int64        // the entries' memory counted in indexBytes
	spacing int64        // 0 while whole; once thinned, the rendered bytes between entries, about
	// denseBytes is what the entries took before they were thinned, and
	// denseSum their entriesSum: a sidecar must hold the same to be taken.
	denseBytes int64
	denseSum   uint32
	gone       bool // out of the budget: replaced, or its segment closed
}

// viewHole is a bad range of a segment's log: bytes from pos on that are
// not a valid batch (a bad CRC, offsets that break the rules, records that
// do not decode), up to the next valid batch, if one was found.
type viewHole struct {
	pos      record.Position
	rendered int64 // rendered bytes of the segment before pos
	// resumeBase is the base offset of the first valid batch after the
	// bad bytes (an entry of the index starts there), or math.MaxInt64
	// when none was found or the hole was met by a render.
	resumeBase record.Offset
	err        error // why the bytes at pos are bad, naming the file
	// awaiting says no valid batch followed the bad bytes when they were
	// found: the first the log gains after them (appends after junk) is
	// where the hole ends.
	awaiting bool
	// noted says a render met the bad bytes inside what the index covered
	// without rendering it (see noteHole): rendered is known, resumeBase
	// is not.
	noted bool
	// gap says the hole is no bad bytes but offsets missing from a
	// gapless partition (ErrHole): the batch at pos, or, at the end of
	// the segment's log, the next segment, starts at resumeBase, past
	// where the batches before it end.
	gap bool
}

// errIndexReplaced says a view index met bad bytes it did not know of, in
// a part it had not rendered itself (a sidecar's or the appender's): its
// segment was given a fresh index, and the caller may try again with it.
var errIndexReplaced = errors.New("view index replaced")

func newViewIndex(f Format, base record.Offset) *viewIndex {
	return &viewIndex{format: f, entries: []viewEntry{{pos: 0, base: base, rendered: 0}}, persisted: -1, next: base}
}

// add accounts for one batch at the end of what the index covers. An
// entry starts at it once viewInterval rendered bytes came since the last
// one, and at every batch that can get marks (markableHeader), so that a
// read inside it finds them (View.locate) even right after small batches.
func (v *viewIndex) add(h *record.BatchHeader, pos record.Position, rendered int64, end record.Position) {
	if (v.sinceEntry >= viewInterval || markableHeader(h)) && pos > v.entries[len(v.entries)-1].pos {
		v.entries = append(v.entries, viewEntry{pos: pos, base: h.BaseOffset, rendered: v.total})
		v.sinceEntry = 0
	}
	if h.ProducerID >= 0 && (h.Attributes.Transactional() || h.Attributes.Control()) {
		v.txnBatches++
		if !h.Attributes.Control() {
			v.txns = append(v.txns, viewTxn{pos: pos, before: v.total, rendered: rendered})
		}
	}
	v.total += rendered
	v.sinceEntry += rendered
	v.covered = end
	v.lastBatchPos, v.lastBatchCRC = pos, h.CRC
	v.next = h.NextOffset()
}

// batchSize renders a batch to count its bytes. Control batches render as
// nothing.
func (v *viewIndex) batchSize(b *record.Batch) (int64, error) {
	if b.Attributes.Control() {
		return 0, nil
	}
	it, err := v.dec.Records(b)
	if err != nil {
		return 0, err
	}
	var n int64
	for it.Next() {
		var k int64
		k, v.scratch = v.format.Size(it.Record(), v.scratch)
		n += k
	}
	return n, it.Err()
}

// extend covers the log up to size, rendering what was not covered yet.
// limit is the next segment's base offset, or math.MaxInt64 when unknown.
// A bad batch does not fail it: the index records a hole there and goes on
// from the next valid batch it finds (record.Resync), or covers the rest
// of the log as bad; only an I/O error is an error.
func (v *viewIndex) extend(s *segment, size record.Position, limit record.Offset) error {
	defer keepIndexBudget(v) // after the unlock
	v.mu.Lock()
	defer v.mu.Unlock()
	defer v.chargeLocked()
	for v.covered < size {
		sc := record.NewScanner(s.log, v.covered, size, record.ScanOptions{})
		bad := false
		for sc.Next() {
			b := sc.Batch()
			err := b.CheckFollows(s.base, v.next, limit)
			var n int64
			if err == nil {
				n, err = v.batchSize(b)
			}
			if err != nil {
				if err := v.holeLocked(s, b.Pos, record.WithFile(err, s.logPath()), size, limit); err != nil {
					return err
				}
				bad = true
				break
			}
			if k := len(v.holes) - 1; k >= 0 && v.holes[k].awaiting {
				s.learnedHole()
				v.holes[k].resumeBase, v.holes[k].awaiting = b.BaseOffset, false
				v.entries = append(v.entries, viewEntry{pos: b.Pos, base: b.BaseOffset, rendered: v.total})
				v.sinceEntry = 0
			} else if b.BaseOffset > v.next && s.gapless() {
				v.gapLocked(s, b.Pos, b.BaseOffset)
			}
			v.add(&b.BatchHeader, b.Pos, n, sc.Pos())
		}
		if bad {
			continue
		}
		err := sc.Err()
		if err == nil {
			break
		}
		var ce *record.CorruptError
		if !errors.As(err, &ce) {
			return record.WithFile(err, s.logPath())
		}
		if err := v.holeLocked(s, sc.Pos(), record.WithFile(err, s.logPath()), size, limit); err != nil {
			return err
		}
	}
	return nil
}

// gapLocked records a hole of a gapless partition at pos, where a batch of
// base offset base starts past where the batches before it end (v.next):
// damage cut out the offsets between (see package recovery). The view
// stops there as at bad bytes; a view from base on starts after it, from
// an entry at pos (so that no render from before the hole crosses it). The
// caller holds mu.
func (v *viewIndex) gapLocked(s *segment, pos record.Position, base record.Offset) {
	s.learnedHole()
	v.holes = append(v.holes, viewHole{pos: pos, rendered: v.total, resumeBase: base, err: holeError(s, v.next, base, pos), gap: true})
	if last := &v.entries[len(v.entries)-1]; last.pos == pos {
		last.base = base // the segment's first batch: renders from it start there
	} else {
		v.entries = append(v.entries, viewEntry{pos: pos, base: base, rendered: v.total})
	}
	v.sinceEntry = 0
}

// gapAtEnd records a hole at the end of sealed segment s's log when the
// segment right after it (next in line: not one past segments retention
// deleted), of base offset limit, starts past where its batches end, in a
// gapless partition: a view stops at the segment's end. It costs a
// comparison, once the index covers the log.
func (v *viewIndex) gapAtEnd(s *segment, limit record.Offset) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.next >= limit || !s.gapless() || !s.frozen.Load() || v.covered < record.Position(s.size.Load()) {
		return
	}
	if k := len(v.holes) - 1; k >= 0 && (v.holes[k].awaiting || v.holes[k].pos >= v.covered) {
		return // the view stops at bad bytes before, or knows this hole
	}
	s.learnedHole()
	v.holes = append(v.holes, viewHole{pos: v.covered, rendered: v.total, resumeBase: limit,
		err: fmt.Errorf("%s: offsets %d to %d are missing after its last batch (the next segment starts at %d): %w", s.logPath(), v.next, limit-1, limit, ErrHole), gap: true})
}

// holeError is the error of a view that reaches offsets want to base-1,
// missing before the batch at pos of s's log, in a gapless partition.
func holeError(s *segment, want, base record.Offset, pos record.Position) error {
	return fmt.Errorf("%s: offsets %d to %d are missing before the batch at position %d: %w", s.logPath(), want, base-1, pos, ErrHole)
}

// holeLocked records the bad bytes at pos and moves what the index covers
// to the next valid batch of the log, or to the log's end (at least size,
// the end the caller asked for). The caller holds mu.
func (v *viewIndex) holeLocked(s *segment, pos record.Position, cause error, size record.Position, limit record.Offset) error {
	h := viewHole{pos: pos, rendered: v.total, resumeBase: math.MaxInt64, err: cause}
	s.learnedHole()
	ended := v.next
	size = max(size, record.Position(s.size.Load()))
	b, ok, err := record.Resync(s.log, pos+1, size, 0, func(b *record.Batch) bool {
		if b.CheckFollows(s.base, ended, limit) != nil {
			return false
		}
		_, err := v.batchSize(b)
		return err == nil
	})
	if err != nil {
		return err
	}
	if len(v.holes) == 0 || v.holes[len(v.holes)-1].pos < pos {
		v.holes = append(v.holes, h)
	}
	if !ok {
		v.holes[len(v.holes)-1].awaiting = true
		v.covered = size
		return nil
	}
	v.holes[len(v.holes)-1].resumeBase = b.BaseOffset
	v.entries = append(v.entries, viewEntry{pos: b.Pos, base: b.BaseOffset, rendered: v.total})
	v.sinceEntry = 0
	v.covered = b.Pos
	// The offsets the bad bytes held are the hole's (resumeBase): the batch
	// there is not a gap of its own.
	v.next = b.BaseOffset
	return nil
}

// noteHole records bad bytes that a render met at pos, rendered bytes of
// the segment into its rendering, in a part of the log the index covers
// without having rendered it (a sidecar's or the appender's): views that
// use the index stop there, and the segment gets a fresh index for new
// views, built from the log, holes and all (see errIndexReplaced).
func (v *viewIndex) noteHole(s *segment, pos record.Position, rendered int64, cause error) {
	var ce *record.CorruptError
	if !errors.As(cause, &ce) {
		return // an I/O error, not bad bytes
	}
	v.mu.Lock()
	known := false
	for _, h := range v.holes {
		known = known || h.pos == pos
	}
	if !known {
		s.learnedHole()
		k := sort.Search(len(v.holes), func(k int) bool { return v.holes[k].pos > pos })
		v.holes = append(v.holes, viewHole{})
		copy(v.holes[k+1:], v.holes[k:])
		v.holes[k] = viewHole{pos: pos, rendered: rendered, resumeBase: math.MaxInt64, err: cause, noted: true}
	}
	v.mu.Unlock()
	if !known {
		s.views.replace(s, v)
	}
}

// holeFor returns the first hole a view that starts at offset start,
// skip rendered bytes into the segment (first says it is the view's first
// segment), meets; ok is false when it meets none. A view meets every hole
// of the segments after its first; in its first, a hole whose offsets it
// starts before the end of (the records the bad bytes held, up to the
// first valid batch after them), or, for a hole a render met, one it
// starts at or before in the rendering.
func (v *viewIndex) holeFor(first bool, start record.Offset, skip int64) (viewHole, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, h := range v.holes {
		switch {
		case !first, h.noted && skip <= h.rendered, !h.noted && start < h.resumeBase:
			return h, true
		}
	}
	return viewHole{}, false
}

// appended accounts for a batch of rendered bytes that the appender just
// wrote at pos, if the index is up to date; otherwise a reader's extend
// will.
func (v *viewIndex) appended(h *record.BatchHeader, pos record.Position, rendered int64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.covered == pos {
		v.add(h, pos, rendered, pos+record.Position(h.Size()))
		v.chargeLocked()
	}
}

// hasHoles reports whether the index knows bad bytes in its log.
func (v *viewIndex) hasHoles() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.holes) > 0
}

// snapshot returns the covered size and total.
func (v *viewIndex) snapshot() (record.Position, int64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.covered, v.total
}

// locate returns the entry to start rendering from to reach rendered byte at.
func (v *viewIndex) locate(at int64) viewEntry {
	entries := v.lockEntries()
	defer v.unlockEntries()
	i := sort.Search(len(entries), func(i int) bool { return entries[i].rendered > at })
	return entries[max(i-1, 0)]
}

// startAfter returns where the first batch the index has an entry for
// whose rendering starts at or after rendered byte at begins in the log:
// every byte rendered before at lies in the batches before it. ok is false
// when the index has no entry that far.
func (v *viewIndex) startAfter(at int64) (pos record.Position, ok bool) {
	entries := v.lockEntries()
	defer v.unlockEntries()
	i := sort.Search(len(entries), func(i int) bool { return entries[i].rendered >= at })
	if i == len(entries) {
		return 0, false
	}
	return entries[i].pos, true
}

// locateOffset returns the entry to start rendering from to reach offset off.
func (v *viewIndex) locateOffset(off record.Offset) viewEntry {
	entries := v.lockEntries()
	defer v.unlockEntries()
	i := sort.Search(len(entries), func(i int) bool { return entries[i].base > off })
	return entries[max(i-1, 0)]
}

// renderedBefore returns the rendered bytes of the segment's records below
// offset off. limit is the next segment's base offset (math.MaxInt64 for
// the newest): the batches it passes are checked as View.scanned checks
// them, since a bad base offset would move where the view starts. sh, when
// not nil, is what a ReadCommitted view shows of the segment: its hidden
// batches are not counted.
func (v *viewIndex) renderedBefore(s *segment, off, limit record.Offset, sh *shown) (int64, error) {
	n, badAt, err := v.renderedBeforeOnce(s, off, limit, sh)
	var ce *record.CorruptError
	if err == nil || !errors.As(err, &ce) {
		return n, err
	}
	// Bad bytes before off: the index learns where they are, and where
	// valid batches start again.
	if err := v.extend(s, record.Position(s.size.Load()), limit); err != nil {
		return 0, err
	}
	if h, ok := v.holeAt(badAt); ok {
		if off < h.resumeBase {
			// off is at or before the bad bytes, or in what they held:
			// the view stops there (View.stop), at once.
			return h.rendered - sh.hiddenBefore(h.pos), nil
		}
		n, _, err := v.renderedBeforeOnce(s, off, limit, sh) // from the entry after them
		return n, err
	}
	// The index covered the bad bytes without rendering them.
	v.noteHole(s, badAt, n+sh.hiddenBefore(badAt), err)
	return 0, errIndexReplaced
}

// holeAt returns the hole that starts at pos, if the index knows one.
func (v *viewIndex) holeAt(pos record.Position) (viewHole, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, h := range v.holes {
		if h.pos == pos {
			return h, true
		}
	}
	return viewHole{}, false
}

// renderedToEnd returns the rendered bytes the index covers, and the log
// bytes, when off is the offset its last batch covered ends at and it
// knows no bad bytes.
func (v *viewIndex) renderedToEnd(off record.Offset) (int64, record.Position, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if off != v.next || len(v.holes) > 0 {
		return 0, 0, false
	}
	return v.total, v.covered, true
}

// renderedBeforeOnce is renderedBefore without learning holes: at a bad
// batch it returns the rendered count before it and where it starts, with
// the error.
func (v *viewIndex) renderedBeforeOnce(s *segment, off, limit record.Offset, sh *shown) (int64, record.Position, error) {
	if n, covered, ok := v.renderedToEnd(off); ok {
		// off is where the covered batches end (a view of the end, as
		// offset/latest): all of it, read nothing.
		return n - sh.hiddenBefore(covered), 0, nil
	}
	e := v.locateOffset(off)
	if ib := v.innerAt(e.pos); ib != nil && ib.h.BaseOffset < off && off <= ib.h.LastOffset() && !(ib.h.Attributes.Transactional() && len(sh.hidden) > 0) {
		// A batch with marks holds off: count from the mark below it.
		m := ib.markOffset(off)
		n := m.at - sh.hiddenBefore(ib.pos)
		win := getWindow()
		defer putWindow(win)
		var scratch []byte
		_, _, err := ib.walk(s, walkSource{win: win}, m.index, int(m.off), func(r *record.Record) bool {
			if r.Offset >= off {
				return false
			}
			var k int64
			k, scratch = v.format.Size(r, scratch)
			n += k
			return true
		}, nil)
		if err != nil {
			return e.rendered - sh.hiddenBefore(e.pos), ib.pos, record.WithFile(err, s.logPath())
		}
		return n, 0, nil
	}
	e.rendered -= sh.hiddenBefore(e.pos)
	size := record.Position(s.size.Load())
	// A header first: the batch at off (often the first, as entries lie
	// at batch starts) is left to the read that renders it. Every batch
	// before off is read whole and its CRC checked, control and hidden
	// ones too: a length outside the CRC could otherwise skip a batch
	// unseen, and a bad batch must be found where it starts.
	sc := record.NewScanner(s.log, e.pos, size, headerScan)
	var dec record.Decoder
	var scratch []byte
	n := e.rendered
	ended := e.base
	for sc.Next() {
		b := sc.Batch()
		if err := b.CheckFollows(s.base, ended, limit); err != nil {
			return n, b.Pos, record.WithFile(err, s.logPath())
		}
		if b.BaseOffset >= off {
			return n, 0, nil
		}
		if sc.Seek(b.Pos, readerScan); !sc.Next() {
			break // the scanner says why
		}
		sc.Seek(sc.Pos(), headerScan)
		ended = b.NextOffset()
		if b.Attributes.Control() || sh.hides(b) {
			continue
		}
		if b.LastOffset() >= off {
			// The batch that holds off: a big one gets marks, for the
			// next view or read that starts inside it.
			v.markBatch(b, n+sh.hiddenBefore(b.Pos), &dec)
		}
		it, err := dec.Records(b)
		if err != nil {
			return n, b.Pos, record.WithFile(err, s.logPath())
		}
		before := n
		for it.Next() {
			r := it.Record()
			if r.Offset >= off {
				return n, 0, nil
			}
			var k int64
			k, scratch = v.format.Size(r, scratch)
			n += k
		}
		if err := it.Err(); err != nil {
			return before, b.Pos, record.WithFile(err, s.logPath())
		}
	}
	return n, sc.Pos(), record.WithFile(sc.Err(), s.logPath())
}

// viewIndexes holds a segment's view indexes, made on first use.
type viewIndexes struct {
	mu       sync.Mutex
	byFormat [numFormats]*viewIndex
	// fresh says the sidecar is not to be read: an index was replaced
	// because the log holds bad bytes the sidecar did not know of.
	fresh bool
}

// replace drops the segment's index old, if it is still the one in use,
// so that the next get builds a fresh one from the log; views that hold
// old keep it. On a writable log the sidecar goes too.
func (vs *viewIndexes) replace(s *segment, old *viewIndex) {
	vs.mu.Lock()
	defer vs.mu.Unlock()
	if vs.byFormat[old.format] != old {
		return
	}
	vs.byFormat[old.format] = nil
	old.retire()
	old.unregister()
	vs.fresh = true
	s.logger.Error("bad bytes inside what a view index covered; indexing the segment's rendering again", "segment", s.logPath())
	if !s.cfg.readOnly && old.format == Values {
		if err := s.removeViewIndex(); err != nil {
			s.logger.Warn("removing the view index", "segment", s.logPath(), "err", err)
		}
	}
}

// get returns the segment's index for format f, reading the sidecar or
// starting an empty one on first use.
func (vs *viewIndexes) get(s *segment, f Format) *viewIndex {
	vs.mu.Lock()
	defer vs.mu.Unlock()
	if v := vs.byFormat[f]; v != nil {
		return v
	}
	v := newViewIndex(f, s.base)
	if f == Values && !vs.fresh {
		if loaded, err := readViewIndex(s); err == nil {
			v = loaded
		} else if !errors.Is(err, os.ErrNotExist) {
			s.logger.Warn("ignoring view index; rebuilding it from the log", "segment", s.logPath(), "err", err)
		}
	}
	v.sidecar = f == Values && !vs.fresh
	v.register(s)
	vs.byFormat[f] = v
	return v
}

// current reports whether v is the segment's index for its format now
// (not one replaced since a view took it).
func (vs *viewIndexes) current(v *viewIndex) bool {
	vs.mu.Lock()
	defer vs.mu.Unlock()
	return vs.byFormat[v.format] == v
}

// start gives a new segment an empty values index for the appender to keep.
func (vs *viewIndexes) start(s *segment) {
	vs.mu.Lock()
	defer vs.mu.Unlock()
	v := newViewIndex(Values, s.base)
	v.sidecar = true
	v.register(s)
	vs.byFormat[Values] = v
}

// appended is called by the appender after each batch, written at pos,
// with the size of its values rendering: the appender knows it from the
// records it encoded, so the batch is not decoded again.
func (vs *viewIndexes) appended(h *record.BatchHeader, pos record.Position, values int64) {
	vs.mu.Lock()
	v := vs.byFormat[Values]
	vs.mu.Unlock()
	if v != nil {
		v.appended(h, pos, values)
	}
}

// sealed and closing write the values index of a segment to its sidecar.
// Both are best effort: the index is derived data.
func (vs *viewIndexes) sealed(s *segment)  { vs.persist(s) }
func (vs *viewIndexes) closing(s *segment) { vs.persist(s) }

func (vs *viewIndexes) persist(s *segment) {
	vs.mu.Lock()
	v := vs.byFormat[Values]
	vs.mu.Unlock()
	if v == nil {
		return
	}
	size := record.Position(s.size.Load())
	if err := v.extend(s, size, math.MaxInt64); err != nil {
		return
	}
	if covered, _ := v.snapshot(); covered == v.persistedAt() {
		return // the sidecar on disk already says this
	}
	if v.hasHoles() {
		return // rebuilt from the log, holes and all, on the next open
	}
	if err := writeViewIndex(s, v); err != nil {
		s.logger.Warn("view index not written", "segment", s.logPath(), "err", err)
	}
}

// The sidecar, <base>.viewindex, is logfs's own file (big-endian):
//
//	magic "LGFSVIX2" | format u8 | pad [3] | count u32 | covered u64 | total u64 |
//	last batch pos u64 | last batch crc u32 | entries: { pos u32 | base delta u32 | rendered u64 } × count |
//	txn batches u32 | txn count u32 | txns: { pos u32 | rendered before u64 | rendered u64 } × txn count |
//	crc32c u32 of everything before it
//
// It is trusted only if its CRC matches, it covers no more than the .log
// holds, and the batch it names last is still there with the same CRC.
// Version 1 (LGFSVIX1) did not list transactional batches: it is rebuilt.
var (
	viewIndexMagic   = []byte("LGFSVIX2")
	viewIndexMagicV1 = []byte("LGFSVIX1")
)

const (
	viewHeaderSize = 8 + 4 + 4 + 8 + 8 + 8 + 4
	viewEntrySize  = 16
	viewTxnSize    = 4 + 8 + 8
)

var errBadViewIndex = errors.New("bad view index")

func (s *segment) removeViewIndex() error {
	if s.unlinked.Load() {
		return nil // the name may be another segment's sidecar (see segment.unlinked)
	}
	// A folder at the name is someone's, not a stale sidecar: it is left
	// alone (readers take the sidecar for missing, and the next write of
	// one moves the folder aside). Removing it would lose what it holds,
	// and failing would fail every roll onto its segment.
	p := s.viewIndexPath()
	isFolder := func() bool { st, err := s.fs.Stat(p); return err == nil && st.IsDir() }
	if isFolder() {
		reportPlanted(s.logger, p, vfs.ErrFolder)
		return nil
	}
	if err := s.fs.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		if isFolder() { // made since the look above
			return nil
		}
		return err
	}
	return nil
}

func writeViewIndex(s *segment, v *viewIndex) error {
	if s.cfg.readOnly {
		return nil
	}
	v.mu.Lock()
	if v.spacing > viewInterval {
		// Thinned to keep the budget (viewbudget.go): a sidecar of these
		// entries would be loaded as if whole, and stay sparse for good.
		v.mu.Unlock()
		return nil
	}
	buf := make([]byte, viewHeaderSize, viewHeaderSize+len(v.entries)*viewEntrySize+4)
	be := binary.BigEndian
	copy(buf, viewIndexMagic)
	buf[8] = byte(v.format)
	be.PutUint32(buf[12:], uint32(len(v.entries)))
	be.PutUint64(buf[16:], uint64(v.covered))
	be.PutUint64(buf[24:], uint64(v.total))
	be.PutUint64(buf[32:], uint64(v.lastBatchPos))
	be.PutUint32(buf[40:], v.lastBatchCRC)
	for _, e := range v.entries {
		buf = be.AppendUint32(buf, uint32(e.pos))
		buf = be.AppendUint32(buf, uint32(e.base-s.base))
		buf = be.AppendUint64(buf, uint64(e.rendered))
	}
	buf = be.AppendUint32(buf, uint32(v.txnBatches))
	buf = be.AppendUint32(buf, uint32(len(v.txns)))
	for _, t := range v.txns {
		buf = be.AppendUint32(buf, uint32(t.pos))
		buf = be.AppendUint64(buf, uint64(t.before))
		buf = be.AppendUint64(buf, uint64(t.rendered))
	}
	covered := v.covered
	v.mu.Unlock()
	buf = be.AppendUint32(buf, crc32.Checksum(buf, crc32.MakeTable(crc32.Castagnoli)))
	// Derived data, checked when read back: written without fsync, and a
	// crash that loses or tears it costs a rebuild, nothing more.
	tmp := s.viewIndexPath() + ".tmp"
	f, err := s.fs.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteAt(buf, 0)
	if err = errors.Join(err, f.Close()); err == nil {
		err = s.fs.Rename(tmp, s.viewIndexPath())
	}
	if err != nil {
		// On a full disk the blocks a torn copy took are better free; the
		// next open would remove it anyway.
		_ = s.fs.Remove(tmp)
		return err
	}
	v.mu.Lock()
	v.persisted = covered
	v.mu.Unlock()
	return nil
}

func (v *viewIndex) persistedAt() record.Position {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.persisted
}

func readViewIndex(s *segment) (*viewIndex, error) {
	if s.unlinked.Load() {
		// Its sidecar is renamed or gone, and the name may be another
		// segment's (see segment.unlinked): index from the log.
		return nil, os.ErrNotExist
	}
	data, err := vfs.ReadFile(s.fs, s.viewIndexPath())
	if err != nil {
		return nil, err
	}
	be := binary.BigEndian
	bad := func(why string) error { return fmt.Errorf("%w: %s: %s", errBadViewIndex, s.viewIndexPath(), why) }
	if len(data) >= 8 && string(data[:8]) == string(viewIndexMagicV1) {
		return nil, os.ErrNotExist // written before it listed transactions: rebuilt quietly
	}
	if len(data) < viewHeaderSize+4 || string(data[:8]) != string(viewIndexMagic) {
		return nil, bad("no header")
	}
	body, sum := data[:len(data)-4], be.Uint32(data[len(data)-4:])
	if crc32.Checksum(body, crc32.MakeTable(crc32.Castagnoli)) != sum {
		return nil, bad("crc mismatch")
	}
	count := int(be.Uint32(body[12:]))
	txnsAt := viewHeaderSize + count*viewEntrySize
	if Format(body[8]) != Values || count < 1 || count > len(body)/viewEntrySize || len(body) < txnsAt+8 {
		return nil, bad("wrong shape")
	}
	txnBatches, txnCount := int(be.Uint32(body[txnsAt:])), int(be.Uint32(body[txnsAt+4:]))
	if txnCount > txnBatches || len(body) != txnsAt+8+txnCount*viewTxnSize {
		return nil, bad("wrong shape")
	}
	v := newViewIndex(Values, s.base)
	v.covered = record.Position(be.Uint64(body[16:]))
	v.total = int64(be.Uint64(body[24:]))
	v.lastBatchPos = record.Position(be.Uint64(body[32:]))
	v.lastBatchCRC = be.Uint32(body[40:])
	if size := record.Position(s.size.Load()); v.covered > size && s.growing {
		// A writer beside this read-only log wrote it when it sealed or
		// closed the segment, which has grown past what this log sees.
		if now, err := s.logSizeNow(); err == nil && v.covered <= now {
			return nil, os.ErrNotExist // not for this log: rebuilt quietly
		}
	}
	if v.covered > record.Position(s.size.Load()) || v.total < 0 || v.covered > math.MaxInt32 {
		return nil, bad("covers more than the log")
	}
	v.entries = make([]viewEntry, count)
	for i := range v.entries {
		p := body[viewHeaderSize+i*viewEntrySize:]
		v.entries[i] = viewEntry{pos: record.Position(be.Uint32(p)), base: s.base + record.Offset(be.Uint32(p[4:])), rendered: int64(be.Uint64(p[8:]))}
		if i > 0 && (v.entries[i].pos <= v.entries[i-1].pos || v.entries[i].rendered <= v.entries[i-1].rendered || v.entries[i].base < v.entries[i-1].base) ||
			v.entries[i].pos >= max(v.covered, 1) || v.entries[i].rendered > v.total {
			return nil, bad("entries out of order")
		}
	}
	if v.entries[0] != (viewEntry{pos: 0, base: s.base}) {
		return nil, bad("first entry is not the segment start")
	}
	v.txnBatches, v.txns = txnBatches, make([]viewTxn, txnCount)
	for i := range v.txns {
		p := body[txnsAt+8+i*viewTxnSize:]
		t := viewTxn{pos: record.Position(be.Uint32(p)), before: int64(be.Uint64(p[4:])), rendered: int64(be.Uint64(p[12:]))}
		if i > 0 && t.pos <= v.txns[i-1].pos || t.pos >= max(v.covered, 1) || t.before < 0 || t.rendered < 0 || t.before+t.rendered > v.total {
			return nil, bad("transactional batches out of order")
		}
		v.txns[i] = t
	}
	if v.covered > 0 {
		var hdr [record.HeaderSize]byte
		if _, err := s.log.ReadAt(hdr[:], int64(v.lastBatchPos)); err != nil {
			return nil, bad("last batch unreadable")
		}
		h, err := record.ParseHeader(hdr[:], v.lastBatchPos)
		if err != nil || h.CRC != v.lastBatchCRC || v.lastBatchPos+record.Position(h.Size()) != v.covered {
			return nil, bad("log changed since it was written")
		}
		v.next = h.NextOffset()
	}
	v.persisted = v.covered
	return v, nil
}
