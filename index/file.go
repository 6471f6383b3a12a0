package index

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/logfs/logfs/record"
)

// Sizes that are part of the on-disk format or Kafka's defaults.
const (
	// DefaultMaxBytes is Kafka's segment.index.bytes: the size an active
	// index is preallocated to when Options.MaxBytes is 0.
	DefaultMaxBytes = 10 << 20
	// OffsetEntrySize is the size of an offset-index entry. Part of the
	// on-disk format; do not change.
	OffsetEntrySize = 8
	// TimeEntrySize is the size of a time-index entry. Part of the on-disk
	// format; do not change.
	TimeEntrySize = 12
	// warmBytes is the size of the warm section at the end of an index
	// that every lookup searches first (KAFKA-6432).
	warmBytes = 8192
)

// Options say how to create or open an index.
type Options struct {
	// MaxBytes is segment.index.bytes, the size an active index is
	// preallocated to, rounded down to a multiple of the entry size. 0
	// means DefaultMaxBytes. Used by Create, and by Open when Writable.
	MaxBytes int64
	// LogSize is the size of the segment's .log. Validation rejects an
	// offset-index position at or past it. A negative LogSize means unknown
	// and skips that rule; note that the zero value means an empty log.
	// The time index does not use it.
	LogSize record.Position
	// Writable opens an existing index as the active segment's: it is
	// mapped and validated at once, then extended to MaxBytes (never below
	// its entries) and mapped read-write. Without it Open maps nothing
	// until the index is first used, and then maps it read-only.
	Writable bool
}

// layout is what distinguishes the two kinds of index.
type layout struct {
	entrySize int // bytes per entry
	relAt     int // where the relative offset sits inside an entry
	reserve   int // slots that ordinary appends may not use (time index: 1)
	// check runs the validation rules over whole entries and returns how
	// many entries there are (a zero tail ends them) and the broken rule,
	// or "".
	check func(data []byte, logSize int64) (int, string)
}

// mapMode is what remap leaves behind.
type mapMode int

const (
	mapNone  mapMode = iota // no mapping and no open file
	mapRead                 // a read-only mapping, no open file
	mapWrite                // a read-write mapping and the file kept open for resizing
)

// file is what both kinds of index share: the file, its mapping, the entry
// count, the lifecycle and the locks. OffsetIndex and TimeIndex embed it
// and add the meaning of an entry.
//
// Lock order: wmu, then mu. Lookups take only mu.RLock (and, on first use,
// wmu then mu to map the file). Append and MaybeAppend take neither: the
// owner never runs them during another writer, so nothing they read can
// change under them.
type file struct {
	*layout
	base     record.Offset // immutable
	maxBytes int64         // immutable; a multiple of entrySize

	// wmu serialises the writers other than the appends: every method that
	// changes the mapping or the file takes it for its whole run, as does
	// the first use of a lazily opened index. Holding it is enough to read
	// the fields below.
	wmu sync.Mutex

	// mu guards the mapping. Readers hold it shared for as long as they
	// read data; the fields below change only with it held exclusively
	// (and wmu held too), so munmap never runs under a reader.
	mu       sync.RWMutex
	path     string   // GUARDED_BY(wmu, mu)
	fd       *os.File // GUARDED_BY(wmu, mu); open only while writable
	data     []byte   // GUARDED_BY(wmu, mu); the mapping, nil when unmapped or the file is empty
	size     int64    // GUARDED_BY(wmu, mu); the file's length as last set or seen
	writable bool     // GUARDED_BY(wmu, mu); data is read-write and preallocated
	closed   bool     // GUARDED_BY(wmu, mu)
	resized  bool     // GUARDED_BY(wmu, mu); this index changed the file's length
	// err is sticky: the *CorruptError found on first map, or the failure
	// of a remap that left no usable mapping. GUARDED_BY(wmu, mu).
	err error

	// entries is the number of valid entries. The writer stores it after
	// writing an entry's bytes and readers load it before reading them, so
	// a reader never sees a half-written entry. INVARIANT: when err is nil
	// and the index is loaded, entries*entrySize <= len(data), and in a
	// writable index every byte past the entries is zero.
	entries atomic.Int64
	// loaded says first use is done: the file was mapped and validated,
	// or err was set. Set last, under wmu and mu.
	loaded atomic.Bool
	// logSize bounds offset-index positions, <0 unknown. An append at
	// position p raises it to p+1.
	logSize atomic.Int64
}

// init fills in what is known before any file is touched. Until the
// constructor returns the index, no other goroutine can see it, so the
// constructors set guarded fields without the locks.
func (x *file) init(path string, base record.Offset, o Options, l *layout) error {
	if base < 0 {
		return fmt.Errorf("base offset %d: %w", base, ErrInvalidArgument)
	}
	if o.MaxBytes < 0 {
		return fmt.Errorf("MaxBytes %d: %w", o.MaxBytes, ErrInvalidArgument)
	}
	maxBytes := o.MaxBytes
	if maxBytes == 0 {
		maxBytes = DefaultMaxBytes
	}
	x.layout = l
	x.base = base
	x.maxBytes = maxBytes - maxBytes%int64(l.entrySize)
	x.path = path
	x.logSize.Store(max(int64(o.LogSize), -1))
	return nil
}

// create makes a new, empty, preallocated index, replacing any file at
// path.
func (x *file) create() error {
	// An index takes the permission bits of its folder, without x, as
	// every file storage creates in a data directory does.
	dir, err := os.Stat(filepath.Dir(x.path))
	if err != nil {
		return err
	}
	f, err := os.OpenFile(x.path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, dir.Mode().Perm()&^0o111)
	if err != nil {
		return err
	}
	x.fd = f
	if err := x.remap(x.maxBytes, mapWrite); err != nil {
		return err
	}
	x.loaded.Store(true)
	return nil
}

// open opens an existing index. A read-only one is only looked at: it is
// mapped on first use. A writable one is mapped and validated now, then
// extended to its preallocated size (KAFKA-6388: a trimmed index reopened
// as the active one must not look full).
func (x *file) open(writable bool) error {
	if !writable {
		_, err := os.Stat(x.path)
		return err
	}
	if err := x.firstMap(); err != nil {
		return err
	}
	if x.err != nil {
		return x.err
	}
	n := x.entries.Load()
	return x.remap(max(x.maxBytes, n*int64(x.entrySize)), mapWrite)
}

// remap is the mapping policy, the one place that sizes an index file and
// maps it. The caller holds wmu and mu (or owns the index outright).
//
// It drops the current mapping first, so no mapping ever extends past the
// end of the file; then, when size >= 0, cuts or extends the file to size
// bytes (size < 0 keeps the file's length); then maps the whole file as
// mode says. An empty file is never mapped: mmap rejects length 0, and an
// index with no entries needs no bytes. Only a writable index keeps its
// file open, for the next resize: a sealed index costs a mapping but no
// file descriptor, and an unused one costs neither.
func (x *file) remap(size int64, mode mapMode) (err error) {
	if x.data != nil {
		if err := munmap(x.data); err != nil {
			return err
		}
		x.data = nil
	}
	x.writable = false
	f := x.fd
	if f == nil {
		if size < 0 && mode == mapNone {
			return nil
		}
		flag := os.O_RDONLY
		if size >= 0 || mode == mapWrite {
			flag = os.O_RDWR
		}
		if f, err = os.OpenFile(x.path, flag, 0); err != nil {
			return err
		}
	}
	defer func() {
		if mode == mapWrite && err == nil {
			x.fd = f
			return
		}
		x.fd = nil
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	if size < 0 {
		st, serr := f.Stat()
		if serr != nil {
			return serr
		}
		size = st.Size()
	} else {
		if err := f.Truncate(size); err != nil {
			return err
		}
		if size != x.size {
			x.resized = true
		}
	}
	x.size = size
	if mode == mapNone {
		return nil
	}
	if size > 0 {
		if size > math.MaxInt {
			return fmt.Errorf("logfs/index: %s: %d bytes is too large to map", x.path, size)
		}
		if x.data, err = mmap(f, int(size), mode == mapWrite); err != nil {
			return err
		}
	}
	x.writable = mode == mapWrite
	return nil
}

// firstMap maps an index at its file's length, read-only, and runs the
// validation rules, once per index. A corrupt index is unmapped again and
// keeps its *CorruptError in err for every later call; an I/O error is
// returned and the next call tries again. The caller holds wmu and mu.
func (x *file) firstMap() error {
	if err := x.remap(-1, mapRead); err != nil {
		return err
	}
	es := int64(x.entrySize)
	var rule string
	var n int
	if x.size%es != 0 {
		rule = fmt.Sprintf("%s: %d bytes, entries are %d", ruleLength, x.size, es)
	} else {
		n, rule = x.check(x.data, x.logSize.Load())
	}
	if rule != "" {
		x.err = x.corrupt(rule)
		if err := x.remap(-1, mapNone); err != nil {
			return err
		}
	} else {
		x.entries.Store(int64(n))
	}
	x.loaded.Store(true)
	return nil
}

func (x *file) corrupt(rule string) *CorruptError {
	return &CorruptError{File: x.path, Rule: rule}
}

// load maps the index on first use: the mutex-and-double-check of
// KAFKA-9156, so two first users cannot both map it.
func (x *file) load() error {
	x.wmu.Lock()
	defer x.wmu.Unlock()
	return x.loadW()
}

// loadW is load for a caller that holds wmu.
func (x *file) loadW() error {
	if x.loaded.Load() {
		return nil
	}
	if x.closed {
		return ErrClosed
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.firstMap()
}

// rlock maps the index if this is its first use and takes mu for reading.
// On success the caller reads data and entries, then calls mu.RUnlock.
func (x *file) rlock() error {
	if !x.loaded.Load() {
		if err := x.load(); err != nil {
			return err
		}
	}
	x.mu.RLock()
	if x.closed || x.err != nil {
		err := x.err
		if x.closed {
			err = ErrClosed
		}
		x.mu.RUnlock()
		return err
	}
	return nil
}

// usableW maps the index if this is its first use and says why it cannot
// be used, if it cannot. The caller holds wmu.
func (x *file) usableW() error {
	if x.closed {
		return ErrClosed
	}
	if err := x.loadW(); err != nil {
		return err
	}
	return x.err
}

// writableW says why entries cannot be written, if they cannot. The
// caller holds wmu. A writable index is always mapped, so this never maps.
func (x *file) writableW() error {
	switch {
	case x.closed:
		return ErrClosed
	case x.err != nil:
		return x.err
	case !x.writable:
		return ErrReadOnly
	}
	return nil
}

// appendErr says why entries cannot be appended, if they cannot. It is
// the check at the top of Append and MaybeAppend, which take no lock: the
// caller runs them one at a time and never during another writer (see the
// package documentation), so the fields it reads cannot change under it.
// A reader's first use of a lazily opened index does write them; the
// atomic loaded flag is read first, and such an index is read-only anyway.
func (x *file) appendErr() error {
	switch {
	case x.closed:
		return ErrClosed
	case !x.loaded.Load():
		return ErrReadOnly
	case x.err != nil:
		return x.err
	case !x.writable:
		return ErrReadOnly
	}
	return nil
}

// broken makes a failed remap sticky: the index has no usable mapping.
func (x *file) broken(op string, err error) error {
	x.err = fmt.Errorf("logfs/index: %s %s: %w", op, x.path, err)
	return x.err
}

// relAtSlot decodes the relative offset of slot i.
func (x *file) relAtSlot(i int) uint32 {
	return be.Uint32(x.data[i*x.entrySize+x.relAt:])
}

// lastEntry returns the index's last entry and the number of entries. An
// index not mapped yet is not mapped for this: its last entry is read with
// one pread, so asking a sealed segment for its max timestamp (retention,
// a listing of segments) costs no mapping. Such a read applies only the
// rules one entry can break (the file's length, the entry's relative
// offset, the zeros of a file never trimmed); the rest run when the index
// is first mapped. The caller decodes the entry.
func (x *file) lastEntry(buf []byte) (int, error) {
	if !x.loaded.Load() {
		if n, err, ok := x.peekLast(buf); ok {
			return n, err
		}
	}
	if err := x.rlock(); err != nil {
		return 0, err
	}
	defer x.mu.RUnlock()
	n := int(x.entries.Load())
	if n > 0 {
		copy(buf, x.data[(n-1)*x.entrySize:])
	}
	return n, nil
}

// peekLast reads the last entry of an index not yet mapped. ok is false
// when the index got mapped meanwhile or the answer needs the full rules.
func (x *file) peekLast(buf []byte) (n int, err error, ok bool) {
	x.wmu.Lock()
	defer x.wmu.Unlock()
	if x.loaded.Load() || x.closed {
		return 0, nil, false
	}
	f, err := os.Open(x.path)
	if err != nil {
		return 0, err, true
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, err, true
	}
	es := int64(x.entrySize)
	if st.Size()%es != 0 {
		return 0, nil, false // corrupt: let the full rules say so
	}
	n = int(st.Size() / es)
	if n == 0 {
		return 0, nil, true
	}
	if _, err := f.ReadAt(buf[:es], st.Size()-es); err != nil {
		return 0, err, true
	}
	if allZero(buf[:es]) || be.Uint32(buf[x.relAt:]) > math.MaxInt32 {
		return 0, nil, false // zero padding or a bad entry: the full rules
	}
	return n, nil, true
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// Entries returns the number of entries, mapping the index if this is its
// first use.
func (x *file) Entries() (int, error) {
	if err := x.rlock(); err != nil {
		return 0, err
	}
	n := x.entries.Load()
	x.mu.RUnlock()
	return int(n), nil
}

// MaxEntries returns the number of slots: the preallocated capacity of a
// writable index, the entries of a sealed one. It maps the index if this
// is its first use and returns 0 if it cannot be used.
func (x *file) MaxEntries() int {
	if x.rlock() != nil {
		return 0
	}
	m := len(x.data) / x.entrySize
	x.mu.RUnlock()
	return m
}

// IsFull reports whether an ordinary append has no slot left: entries >=
// MaxEntries for the offset index, entries >= MaxEntries-1 for the time
// index, whose last slot is kept for the entry written at roll and close.
// A sealed index is full; so is one that cannot be used.
func (x *file) IsFull() bool {
	if x.rlock() != nil {
		return true
	}
	full := int(x.entries.Load()) >= len(x.data)/x.entrySize-x.reserve
	x.mu.RUnlock()
	return full
}

// Check runs the validation rules over the entries, mapping the index if
// this is its first use. It returns nil or a *CorruptError (or ErrClosed,
// or the I/O error that prevented mapping). An offset index checks
// positions against Options.LogSize, raised by every Append past it.
func (x *file) Check() error {
	return x.checkWith(x.logSize.Load())
}

func (x *file) checkWith(logSize int64) error {
	if err := x.rlock(); err != nil {
		return err
	}
	defer x.mu.RUnlock()
	n := int(x.entries.Load())
	if _, rule := x.check(x.data[:n*x.entrySize], logSize); rule != "" {
		return x.corrupt(rule)
	}
	return nil
}

// Reset drops every entry of a writable index and keeps its preallocated
// size, for recovery to rebuild it. To rebuild a sealed index, create it
// again.
func (x *file) Reset() error {
	x.wmu.Lock()
	defer x.wmu.Unlock()
	if err := x.writableW(); err != nil {
		return err
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	clear(x.data[:x.entries.Load()*int64(x.entrySize)])
	x.entries.Store(0)
	return nil
}

// TruncateTo drops every entry whose offset is >= off, as Kafka's
// truncateTo: when the log is cut at off. A writable index zeroes the
// dropped slots and keeps its size; a sealed one cuts its file.
func (x *file) TruncateTo(off record.Offset) error {
	x.wmu.Lock()
	defer x.wmu.Unlock()
	if err := x.usableW(); err != nil {
		return err
	}
	n := int(x.entries.Load())
	k := x.countBelow(off, n)
	if k == n {
		return nil
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.entries.Store(int64(k))
	if x.writable {
		clear(x.data[k*x.entrySize : n*x.entrySize])
		return nil
	}
	if err := x.remap(int64(k*x.entrySize), mapRead); err != nil {
		return x.broken("truncate", err)
	}
	return nil
}

// countBelow returns how many of the first n entries have an offset below
// off. Offsets never decrease from one entry to the next.
func (x *file) countBelow(off record.Offset, n int) int {
	if off <= x.base {
		return 0
	}
	if off-x.base > math.MaxUint32 {
		return n
	}
	t := uint32(off - x.base)
	lo, hi := 0, n
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if x.relAtSlot(mid) < t {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// Seal is the roll: it trims a writable index to its entries and maps it
// read-only. Sealing a sealed or read-only index does nothing. For the
// time index, append the segment's final entry (MaybeAppend with
// skipFullCheck) first.
func (x *file) Seal() error {
	x.wmu.Lock()
	defer x.wmu.Unlock()
	if x.closed {
		return ErrClosed
	}
	if !x.writable {
		return x.err
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if err := x.remap(x.entries.Load()*int64(x.entrySize), mapRead); err != nil {
		return x.broken("seal", err)
	}
	return nil
}

// Flush writes the index's dirty pages to disk and waits (msync). It takes
// only the read lock, so appends go on meanwhile; an entry appended during
// Flush may or may not be durable when it returns. An index that was never
// used has nothing to flush.
func (x *file) Flush() error {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if x.closed {
		return ErrClosed
	}
	if x.data != nil {
		return msync(x.data)
	}
	if !x.resized {
		return nil
	}
	// Trimmed to nothing: only the new length has to reach the disk.
	if x.fd != nil {
		return x.fd.Sync()
	}
	f, err := os.Open(x.path)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Close trims a writable index to its entries, unmaps it and closes its
// file. An index that was never used is closed without being mapped
// (KAFKA-9373). Close is idempotent; it does not sync (see Flush).
func (x *file) Close() error {
	x.wmu.Lock()
	defer x.wmu.Unlock()
	if x.closed {
		return nil
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.closed = true
	trim := int64(-1)
	if x.writable && x.err == nil {
		trim = x.entries.Load() * int64(x.entrySize)
	}
	return x.remap(trim, mapNone)
}

// Rename moves the index file to newPath without mapping it. A mapping,
// if any, stays valid. It works on a closed index too.
func (x *file) Rename(newPath string) error {
	x.wmu.Lock()
	defer x.wmu.Unlock()
	x.mu.Lock()
	defer x.mu.Unlock()
	if err := os.Rename(x.path, newPath); err != nil {
		return err
	}
	x.path = newPath
	return nil
}

// Delete closes the index without trimming or mapping it and removes its
// file. A file that is already gone is not an error.
func (x *file) Delete() error {
	x.wmu.Lock()
	defer x.wmu.Unlock()
	x.mu.Lock()
	defer x.mu.Unlock()
	x.closed = true
	err := x.remap(-1, mapNone)
	if rerr := os.Remove(x.path); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) && err == nil {
		err = rerr
	}
	return err
}

// Path returns the index file's path.
func (x *file) Path() string {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.path
}

// Base returns the segment's base offset, which relative offsets are
// relative to.
func (x *file) Base() record.Offset { return x.base }

// Mapped reports whether the index holds a memory mapping now. An index
// that was never used does not, and neither does one whose file is empty.
func (x *file) Mapped() bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.data != nil
}
