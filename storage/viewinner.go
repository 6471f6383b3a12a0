package storage

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/logfs/logfs/record"
)

// A view index places batches in a segment's rendering, an entry every
// viewInterval rendered bytes at most, so a read at a random position
// starts rendering at the start of the batch that holds it. A batch written
// by one 1 MiB write (cat >> append, logfs produce) holds a thousand 1 KiB
// records or ten thousand of 100 B: reading and checking it whole for every
// 4 KiB read is most of the read's cost. So an uncompressed batch of at
// least innerMin bytes gets marks, the first time a read renders it or
// looks inside it: where its records start, every innerStep rendered
// bytes. Marks are made only once the whole batch was read and its CRC
// checked (its bytes never change: a log is only appended to), so a later
// read inside it reads innerWindow bytes from the mark before the wanted
// byte and decodes from there (record.RecordsIn), and does not check the
// CRC again, as a read through the kernel's page cache does not either.
//
// Marks live in memory only, per segment and format: about 1.5 KiB for a
// MiB of batches, for at most innerMax batches of a segment and
// innerBudget bytes in all (about 21 GiB of batches). Past innerMax, a
// batch that gets marks drops those of another batch of its segment;
// past innerBudget, those of a batch of any segment (makeRoom), so that
// segments read first do not keep the budget from the ones read later.
const (
	innerMin    = 64 << 10
	innerStep   = 16 << 10
	innerWindow = 32 << 10
)

// innerBudget is the memory all marks may take (a variable for tests).
var innerBudget int64 = 32 << 20

// innerMax is the most batches of a segment with marks (a variable for
// tests): every batch big enough to get them, in a segment of the largest
// size Kafka allows (segment.bytes is an int32: 2 GiB / innerMin). It was
// 1024 once, and a default 1 GiB segment of 1 MiB writes of 100 B records
// holds about 1,150 such batches: random reads then kept dropping the
// marks of one batch to make another's, reading 0.9 MiB for a 4 KiB
// read one time in ten.
var innerMax = (1 << 31) / innerMin

// innerBytes is the memory all marks take now, about.
var innerBytes atomic.Int64

func (ib *innerBatch) bytes() int64 {
	return int64(unsafe.Sizeof(*ib)) + int64(cap(ib.marks))*int64(unsafe.Sizeof(innerMark{}))
}

// windows recycles the buffers batches are read into from a mark, which
// views and the lookups that open them use for a moment each.
var windows sync.Pool

func getWindow() *[]byte {
	if b, ok := windows.Get().(*[]byte); ok {
		return b
	}
	b := make([]byte, 0, innerWindow)
	return &b
}

func putWindow(b *[]byte) { windows.Put(b) }

// innerMark is where a record of a batch starts.
type innerMark struct {
	off    int32         // in the batch's records (the bytes after its header)
	index  int32         // its number in the batch
	offset record.Offset // its offset
	at     int64         // rendered bytes of the segment before it, every batch counted
}

// innerBatch is a checked batch with its marks. It does not change once
// made.
type innerBatch struct {
	h     record.BatchHeader
	pos   record.Position
	to    int64       // rendered bytes of the segment up to the batch's end, every batch counted
	marks []innerMark // marks[0] is the batch's first record
}

func (ib *innerBatch) end() record.Position { return ib.pos + record.Position(ib.h.Size()) }
func (ib *innerBatch) from() int64          { return ib.marks[0].at }

// markAt returns the last mark at or before rendered byte at (counted as
// marks are).
func (ib *innerBatch) markAt(at int64) innerMark {
	i := sort.Search(len(ib.marks), func(i int) bool { return ib.marks[i].at > at })
	return ib.marks[max(i-1, 0)]
}

// markOffset returns the last mark of a record at or below offset off.
func (ib *innerBatch) markOffset(off record.Offset) innerMark {
	i := sort.Search(len(ib.marks), func(i int) bool { return ib.marks[i].offset > off })
	return ib.marks[max(i-1, 0)]
}

// walkSource is where a walk gets a batch's records from: mem, when a read
// of the whole batch (which checked it) has them in memory already; or
// else the log, read into *win, need bytes first (about what the walk is
// to decode; 0 when that is not known, for innerWindow), then windows of
// at least innerWindow bytes, twice as large for a record longer than
// one. need only sizes the reads: a walk that wants more reads on.
type walkSource struct {
	mem  []byte
	win  *[]byte
	need int
}

// span estimates how many bytes of the batch's records, from the record
// at byte off of them, whose rendering starts at rendered byte at, render
// to rendered byte upto: the batch's own ratio of record bytes to
// rendered ones, with slack for uneven records, so that a read from a
// mark reads about what it decodes, not a whole window.
func (ib *innerBatch) span(off int, at, upto int64) int {
	data := int64(ib.h.Size()) - record.HeaderSize
	rendered := ib.to - ib.from()
	if rendered <= 0 || upto <= at {
		return 0
	}
	est := (upto - at) * data / rendered
	est = max(est+est/8+512, 4<<10)
	// A batch of big keys and small values renders a byte for every few
	// KiB of records: read it in windows, not in one read of the rest of
	// it, which could be the size of the batch.
	est = min(est, max(innerWindow, 2*(upto-at)))
	return int(min(est, data-int64(off)))
}

// walk decodes the batch's records from record number index on, which
// begins at byte off of the batch's records, from src, and calls fn with
// each until fn returns false or the batch ends. It returns where the
// record after the last one fn got begins: its number and its place (on
// an error, somewhere before the bad bytes: callers do not use it then).
//
// fast, if not nil, is called before each record is decoded for fn, with
// the iterator: it may take records itself (record.RecordIter.AppendValues)
// and, like fn, returns false to stop the walk.
func (ib *innerBatch) walk(s *segment, src walkSource, index int32, off int, fn func(r *record.Record) bool, fast func(it *record.RecordIter) bool) (int32, int, error) {
	data := int(ib.h.Size()) - record.HeaderSize
	w := innerWindow
	if src.need > 0 {
		w = src.need
	}
	for index < ib.h.RecordCount {
		var buf []byte
		n := min(data-off, w)
		if src.mem != nil {
			buf = src.mem[off:data]
			n = len(buf)
		} else {
			if cap(*src.win) < n {
				*src.win = make([]byte, n)
			}
			buf = (*src.win)[:n]
			if _, err := s.log.ReadAt(buf, int64(ib.pos)+record.HeaderSize+int64(off)); err != nil {
				return index, off, record.WithFile(err, s.logPath())
			}
		}
		it := record.RecordsIn(&ib.h, ib.pos, buf, index)
		more := true
		for more {
			if fast != nil && !fast(&it) {
				more = false
				break
			}
			if !it.Next() {
				break
			}
			more = fn(it.Record())
		}
		if err := it.Err(); err != nil {
			return index, off, record.WithFile(err, s.logPath())
		}
		if it.Cut() && it.Off() == 0 {
			if n == data-off {
				return index, off, record.WithFile(&record.CorruptError{Pos: ib.pos, Reason: "a record runs past its batch", Err: record.ErrCorrupt}, s.logPath())
			}
			w = max(2*w, innerWindow) // one record longer than the window
			continue
		}
		index, off = it.Index(), off+it.Off()
		if !more || !it.Cut() {
			break
		}
		w = max(w, innerWindow) // need fell short: read on in windows
	}
	if index == ib.h.RecordCount && off != data {
		// As a read of the whole batch finds (record.RecordIter.Next).
		return index, off, record.WithFile(&record.CorruptError{Pos: ib.pos, Reason: fmt.Sprintf("%d bytes after the last of %d records", data-off, ib.h.RecordCount), Err: record.ErrCorrupt}, s.logPath())
	}
	return index, off, nil
}

// innerAt returns the marks of the batch at pos, if it has any.
func (v *viewIndex) innerAt(pos record.Position) *innerBatch {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.inner[pos]
}

// markable reports whether batch b gets marks once read: uncompressed, not
// a control batch, and big.
func markable(b *record.Batch) bool { return markableHeader(&b.BatchHeader) }

func markableHeader(h *record.BatchHeader) bool {
	return h.Attributes.Compression() == record.None && !h.Attributes.Control() && int(h.Size())-record.HeaderSize >= innerMin
}

// markBatch gives b, a batch just read whole and checked, whose rendering
// starts at rendered byte from of its segment (every batch counted), its
// marks, if it is big enough and has none.
func (v *viewIndex) markBatch(b *record.Batch, from int64, dec *record.Decoder) {
	if !markable(b) || v.innerAt(b.Pos) != nil {
		return
	}
	it, err := dec.Records(b)
	if err != nil {
		return
	}
	m := newMarker(b, from)
	var scratch []byte
	for {
		if v.format == Values {
			m.skip(it.SkipValues(m.unmarked())) // up to the next mark
		}
		off, index := it.Off(), it.Index()
		if !it.Next() {
			break
		}
		r := it.Record()
		var k int64
		k, scratch = v.format.Size(r, scratch)
		m.note(off, index, r.Offset, k)
	}
	if it.Err() != nil {
		return
	}
	v.addInner(m.done())
}

// marker makes the marks of a batch as its records are read, in order.
type marker struct {
	ib       *innerBatch
	at, last int64
}

// newMarker starts the marks of b, whose rendering starts at rendered byte
// from of its segment (every batch counted).
func newMarker(b *record.Batch, from int64) marker {
	return marker{ib: &innerBatch{h: b.BatchHeader, pos: b.Pos}, at: from, last: from - innerStep}
}

// unmarked returns how many rendered bytes of records from here on skip
// may count without note: the next mark is due at the first record that
// starts innerStep or more after the last mark, and records that end by
// then cannot be it.
func (m *marker) unmarked() int64 { return max(m.last+innerStep-m.at, 0) }

// skip counts records of size rendered bytes in all, which end within
// unmarked and so need no mark.
func (m *marker) skip(size int64) { m.at += size }

// note counts the next record: it begins at byte off of the batch's
// records, is number index, has offset offset, and renders as size bytes.
func (m *marker) note(off int, index int32, offset record.Offset, size int64) {
	if m.at-m.last >= innerStep {
		m.ib.marks = append(m.ib.marks, innerMark{off: int32(off), index: index, offset: offset, at: m.at})
		m.last = m.at
	}
	m.at += size
}

// done returns the batch with its marks, once note has counted every one
// of its records.
func (m *marker) done() *innerBatch {
	m.ib.to = m.at
	m.ib.marks = slices.Clip(m.ib.marks)
	return m.ib
}

// addInner keeps ib's marks, unless the batch has some already, making
// room in the index and in innerBudget as the package comment says.
func (v *viewIndex) addInner(ib *innerBatch) {
	if len(ib.marks) == 0 {
		return
	}
	if innerBytes.Load()+ib.bytes() > innerBudget {
		makeRoom(ib.bytes(), v)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.retired {
		return
	}
	if v.inner == nil {
		v.inner = make(map[record.Position]*innerBatch)
	}
	if _, known := v.inner[ib.pos]; known {
		return
	}
	for pos, other := range v.inner { // in no particular order: a batch at random
		if len(v.inner) < innerMax && innerBytes.Load()+ib.bytes() <= innerBudget {
			break
		}
		v.forgetLocked(pos, other)
	}
	if innerBytes.Load()+ib.bytes() > innerBudget {
		return // taken meanwhile by marks that other reads made
	}
	v.inner[ib.pos] = ib
	innerBytes.Add(ib.bytes())
	withMarks.add(v)
}

// withMarks is every view index that may hold marks, for makeRoom.
// Lock order: a viewIndex's mu, then withMarks' lock.
var withMarks = newIndexSet()

// makeRoom drops the marks of batches of other indexes than keep, the one
// that needs room, a batch from each in turn, in random order, until need
// more bytes fit in innerBudget or none are left; addInner then drops
// keep's own if need be. It is called with no view index's lock held; the
// budget holds about, not exactly, as reads of other segments may add
// marks meanwhile.
//
// Keep was among the others once, in the map's order. In a run of
// TestViewMarksAcrossSegments after other tests (one in five under
// -logfs.index-budget=0), keep came first nine reads in a row: the last
// segment kept one batch with marks, dropping its own each time, while the
// first segment kept the rest. Go's order of a small map is not a fair
// draw; the shuffle is.
func makeRoom(need int64, keep *viewIndex) {
	indexes := withMarks.others(keep)
	rand.Shuffle(len(indexes), func(i, j int) { indexes[i], indexes[j] = indexes[j], indexes[i] })
	for i := 0; len(indexes) > 0 && innerBytes.Load()+need > innerBudget; {
		i %= len(indexes) // round and round, a batch from each in turn
		if indexes[i].dropOne() {
			i++
		} else {
			indexes = slices.Delete(indexes, i, i+1)
		}
	}
}

// dropOne drops the marks of one of the index's batches, and reports
// whether it had any; an index without any leaves withMarks.
func (v *viewIndex) dropOne() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	for pos, ib := range v.inner {
		v.forgetLocked(pos, ib)
		return true
	}
	withMarks.remove(v)
	return false
}

// dropInner forgets the index's marks (its segment is going).
func (v *viewIndex) dropInner() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.dropInnerLocked()
}

// forgetLocked drops the marks of the batch at pos, ib. The caller holds
// mu.
func (v *viewIndex) forgetLocked(pos record.Position, ib *innerBatch) {
	delete(v.inner, pos)
	innerBytes.Add(-ib.bytes())
}

func (v *viewIndex) dropInnerLocked() {
	for pos, ib := range v.inner {
		v.forgetLocked(pos, ib)
	}
	withMarks.remove(v)
}

// retire forgets the index's marks for good: it was replaced, and the
// views that still hold it read on without them. Marks they made would
// count in innerBudget with nothing to drop them.
func (v *viewIndex) retire() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.retired = true
	v.dropInnerLocked()
}

// dropInner forgets the marks of every format, and takes the indexes out
// of the budget of entries: the segment is closed.
func (vs *viewIndexes) dropInner() {
	vs.mu.Lock()
	defer vs.mu.Unlock()
	for _, v := range vs.byFormat {
		if v != nil {
			v.dropInner()
			v.unregister()
		}
	}
}
