package index

import (
	"fmt"
	"math"
	"runtime"
	"runtime/debug"

	"github.com/logfs/logfs/record"
)

// timeWarmEntries is how many entries at the end of a time index make its
// warm section: 682 (8184 bytes).
const timeWarmEntries = warmBytes / TimeEntrySize

var timeLayout = layout{
	entrySize: TimeEntrySize,
	relAt:     8,
	reserve:   1,
	check:     checkTimeEntries,
}

// TimeIndex is a segment's .timeindex file: entries (T, O) saying that T
// is the largest timestamp up to offset O, and that any record with a
// timestamp above T is at an offset above O. See the package documentation
// for the layout, the lifecycle and who may call what concurrently.
type TimeIndex struct {
	file
}

// CreateTimeIndex creates an empty time index at path for the segment
// starting at base, replacing any file there, preallocated to o.MaxBytes
// and mapped read-write: the index of a new active segment.
func CreateTimeIndex(path string, base record.Offset, o Options) (*TimeIndex, error) {
	x := &TimeIndex{}
	if err := x.init(path, base, o, &timeLayout); err != nil {
		return nil, err
	}
	if err := x.create(); err != nil {
		return nil, err
	}
	return x, nil
}

// OpenTimeIndex opens the existing time index at path of the segment
// starting at base, lazily unless o.Writable, as OpenOffsetIndex.
// o.LogSize is not used.
func OpenTimeIndex(path string, base record.Offset, o Options) (*TimeIndex, error) {
	x := &TimeIndex{}
	if err := x.init(path, base, o, &timeLayout); err != nil {
		return nil, err
	}
	if err := x.open(o.Writable); err != nil {
		return nil, err
	}
	return x, nil
}

// Lookup returns the entry with the largest timestamp <= ts, or (-1, base)
// when there is none: the index is empty or ts is below its first entry.
func (x *TimeIndex) Lookup(ts int64) (_ int64, _ record.Offset, err error) {
	defer x.catchFault(&err, debug.SetPanicOnFault(true))
	if err := x.rlock(); err != nil {
		return 0, 0, err
	}
	defer x.mu.RUnlock()
	found, off := int64(-1), x.base
	m, tail, _ := x.view()
	if i := timeSlotIn(m, tail, ts); i >= 0 {
		e := x.slot(m, tail, i)
		found, off = int64(be.Uint64(e)), x.base+record.Offset(be.Uint32(e[8:]))
	}
	return found, off, nil
}

// timeSlotIn is timeSlot over a view, as offsetSlotIn.
func timeSlotIn(mapped, tail []byte, t int64) int {
	if len(tail) > 0 && int64(be.Uint64(tail)) <= t {
		return len(mapped)/TimeEntrySize + timeSearch(tail, 0, len(tail)/TimeEntrySize-1, t)
	}
	return timeSlot(mapped, len(mapped)/TimeEntrySize, t)
}

// timeSlot is offsetSlot for timestamps: the slot of the largest timestamp
// <= t among the first n entries of data, or -1, warm section first.
func timeSlot(data []byte, n int, t int64) int {
	if n == 0 {
		return -1
	}
	hot := max(0, n-1-timeWarmEntries)
	if int64(be.Uint64(data[hot*TimeEntrySize:])) < t {
		return timeSearch(data, hot, n-1, t)
	}
	if int64(be.Uint64(data)) > t {
		return -1
	}
	return timeSearchCold(data, 0, hot, t)
}

// timeSearch is offsetSearch for timestamps.
func timeSearch(data []byte, lo, hi int, t int64) int {
	for n := hi - lo + 1; n > 1; {
		half := n >> 1
		lo += half * oneIf(int64(be.Uint64(data[(lo+half)*TimeEntrySize:])) <= t)
		n -= half
	}
	return lo
}

// timeSearchCold is offsetSearchCold for timestamps.
func timeSearchCold(data []byte, lo, hi int, t int64) int {
	var touched byte
	for n := hi - lo + 1; n > 1; {
		half := n >> 1
		next := (n - half) >> 1
		touched += data[(lo+next)*TimeEntrySize] + data[(lo+half+next)*TimeEntrySize]
		lo += half * oneIf(int64(be.Uint64(data[(lo+half)*TimeEntrySize:])) <= t)
		n -= half
	}
	runtime.KeepAlive(touched)
	return lo
}

// MaybeAppend adds the entry (ts, off) if ts is above the last entry's
// timestamp (an empty index's is -1), as Kafka's maybeAppend: an equal
// timestamp, like the final entry appended twice, is skipped without an
// error. A timestamp below the last entry's is ErrInvalidTimestamp, an
// offset below its offset ErrInvalidOffset, an offset not within MaxInt32
// of the base ErrOffsetOverflow. Unless skipFullCheck, the last slot is
// kept back (ErrFull); roll and close use it for the segment's final
// entry. With no slot left at all the append is ErrFull either way.
//
// MaybeAppend takes no lock: call it from one goroutine at a time and never
// during another writer (see Concurrency in the package documentation).
func (x *TimeIndex) MaybeAppend(ts int64, off record.Offset, skipFullCheck bool) error {
	if err := x.appendErr(); err != nil {
		return err
	}
	last, n64, ok := x.lastW()
	n := int(n64)
	slots := len(x.data) / TimeEntrySize
	if !skipFullCheck && n >= slots-1 {
		return fmt.Errorf("append timestamp %d to %s with %d of %d entries: %w", ts, x.path, n, slots, ErrFull)
	}
	lastTs, lastOff := int64(-1), x.base
	if ok {
		lastTs, lastOff = int64(be.Uint64(last)), x.base+record.Offset(be.Uint32(last[8:]))
		if off < lastOff {
			return fmt.Errorf("append offset %d after %d: %w", off, lastOff, ErrInvalidOffset)
		}
		if ts < lastTs {
			return fmt.Errorf("append timestamp %d after %d: %w", ts, lastTs, ErrInvalidTimestamp)
		}
	}
	if ts <= lastTs {
		return nil
	}
	if off < x.base || off-x.base > math.MaxInt32 {
		return fmt.Errorf("append offset %d to base %d: %w", off, x.base, ErrOffsetOverflow)
	}
	if n >= slots {
		return fmt.Errorf("append timestamp %d to %s with %d of %d entries: %w", ts, x.path, n, slots, ErrFull)
	}
	p, e, err := x.next()
	if err != nil {
		return err
	}
	be.PutUint64(e, uint64(ts))
	be.PutUint32(e[8:], uint32(off-x.base))
	p.n.Store(int64(n + 1))
	return nil
}

// Entry returns entry i, 0 <= i < Entries().
func (x *TimeIndex) Entry(i int) (_ int64, _ record.Offset, err error) {
	defer x.catchFault(&err, debug.SetPanicOnFault(true))
	if err := x.rlock(); err != nil {
		return 0, 0, err
	}
	defer x.mu.RUnlock()
	m, tail, n := x.view()
	if i < 0 || i >= n {
		return 0, 0, fmt.Errorf("entry %d of %d: %w", i, n, ErrOutOfRange)
	}
	e := x.slot(m, tail, i)
	return int64(be.Uint64(e)), x.base + record.Offset(be.Uint32(e[8:])), nil
}

// LastEntry returns the last entry, or (-1, base) when the index is empty.
// After a clean roll or close it holds the segment's largest timestamp,
// which retention reads from here rather than from the log. An index not
// mapped yet stays unmapped: see (*file).lastEntry.
func (x *TimeIndex) LastEntry() (int64, record.Offset, error) {
	var e [TimeEntrySize]byte
	n, err := x.lastEntry(e[:])
	if err != nil {
		return 0, 0, err
	}
	if n == 0 {
		return -1, x.base, nil
	}
	ts := int64(be.Uint64(e[:]))
	if ts < 0 {
		return 0, 0, x.corrupt(fmt.Sprintf("last timestamp %d is negative", ts))
	}
	return ts, x.base + record.Offset(be.Uint32(e[8:])), nil
}
