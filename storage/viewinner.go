package storage

import (
	"sort"
	"sync"

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
// Marks live in memory only, per segment and format, for at most innerMax
// batches (a few hundred KiB for a segment of 1 GiB).
const (
	innerMin    = 64 << 10
	innerStep   = 8 << 10
	innerMax    = 4096
	innerWindow = 32 << 10
)

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

// walk decodes the batch's records from record number index on, which
// begins at byte off of the batch's records, reading them from the log
// innerWindow bytes (at least grow of them) at a time into *win, and calls
// fn with each until fn returns false or the batch ends. It returns where
// the record after the last one fn got begins: its number and its place.
func (ib *innerBatch) walk(s *segment, win *[]byte, index int32, off int, grow int, fn func(r *record.Record) bool) (int32, int, error) {
	data := int(ib.h.Size()) - record.HeaderSize
	w := max(innerWindow, grow)
	for index < ib.h.RecordCount {
		n := min(data-off, w)
		if cap(*win) < n {
			*win = make([]byte, n)
		}
		buf := (*win)[:n]
		if _, err := s.log.ReadAt(buf, int64(ib.pos)+record.HeaderSize+int64(off)); err != nil {
			return index, off, record.WithFile(err, s.logPath())
		}
		it := record.RecordsIn(&ib.h, ib.pos, buf, index)
		more := true
		for more && it.Next() {
			more = fn(it.Record())
		}
		if err := it.Err(); err != nil {
			return index, off, record.WithFile(err, s.logPath())
		}
		if it.Cut() && it.Off() == 0 {
			if n == data-off {
				return index, off, record.WithFile(&record.CorruptError{Pos: ib.pos, Reason: "a record runs past its batch", Err: record.ErrCorrupt}, s.logPath())
			}
			w *= 2 // one record longer than the window
			continue
		}
		index, off = it.Index(), off+it.Off()
		if !more || !it.Cut() {
			break
		}
	}
	return index, off, nil
}

// innerAt returns the marks of the batch at pos, if it has any.
func (v *viewIndex) innerAt(pos record.Position) *innerBatch {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.inner[pos]
}

// markBatch gives b, a batch just read whole and checked, whose rendering
// starts at rendered byte from of its segment (every batch counted), its
// marks, if it is big enough and has none.
func (v *viewIndex) markBatch(b *record.Batch, from int64, dec *record.Decoder) {
	if b.Attributes.Compression() != record.None || b.Attributes.Control() || len(b.Bytes)-record.HeaderSize < innerMin {
		return
	}
	v.mu.Lock()
	_, known := v.inner[b.Pos]
	full := len(v.inner) >= innerMax
	v.mu.Unlock()
	if known || full {
		return
	}
	it, err := dec.Records(b)
	if err != nil {
		return
	}
	ib := &innerBatch{h: b.BatchHeader, pos: b.Pos}
	at, last := from, from-innerStep
	var scratch []byte
	for {
		off, index := it.Off(), it.Index()
		if !it.Next() {
			break
		}
		r := it.Record()
		if at-last >= innerStep {
			ib.marks = append(ib.marks, innerMark{off: int32(off), index: index, offset: r.Offset, at: at})
			last = at
		}
		var k int64
		k, scratch = v.format.Size(r, scratch)
		at += k
	}
	if it.Err() != nil || len(ib.marks) == 0 {
		return
	}
	ib.to = at
	v.mu.Lock()
	if v.inner == nil {
		v.inner = make(map[record.Position]*innerBatch)
	}
	if len(v.inner) < innerMax {
		v.inner[b.Pos] = ib
	}
	v.mu.Unlock()
}
