package index

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
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
	// check runs the validation rules over whole entries and returns the
	// broken rule, or "".
	check func(data []byte, logSize int64) string
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
func (c *file) init(path string, base record.Offset, o Options, l *layout) error {
	if base < 0 {
		return fmt.Errorf("%w: base offset %d", ErrInvalidArgument, base)
	}
	if o.MaxBytes < 0 {
		return fmt.Errorf("%w: MaxBytes %d", ErrInvalidArgument, o.MaxBytes)
	}
	maxBytes := o.MaxBytes
	if maxBytes == 0 {
		maxBytes = DefaultMaxBytes
	}
	c.layout = l
	c.base = base
	c.maxBytes = maxBytes - maxBytes%int64(l.entrySize)
	c.path = path
	c.logSize.Store(max(int64(o.LogSize), -1))
	return nil
}

// create makes a new, empty, preallocated index, replacing any file at
// path.
func (c *file) create() error {
	f, err := os.OpenFile(c.path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	c.fd = f
	if err := c.remap(c.maxBytes, mapWrite); err != nil {
		return err
	}
	c.loaded.Store(true)
	return nil
}

// open opens an existing index. A read-only one is only looked at: it is
// mapped on first use. A writable one is mapped and validated now, then
// extended to its preallocated size (KAFKA-6388: a trimmed index reopened
// as the active one must not look full).
func (c *file) open(writable bool) error {
	if !writable {
		_, err := os.Stat(c.path)
		return err
	}
	if err := c.firstMap(); err != nil {
		return err
	}
	if c.err != nil {
		return c.err
	}
	n := c.entries.Load()
	return c.remap(max(c.maxBytes, n*int64(c.entrySize)), mapWrite)
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
func (c *file) remap(size int64, mode mapMode) (err error) {
	if c.data != nil {
		if err := munmap(c.data); err != nil {
			return err
		}
		c.data = nil
	}
	c.writable = false
	f := c.fd
	if f == nil {
		if size < 0 && mode == mapNone {
			return nil
		}
		flag := os.O_RDONLY
		if size >= 0 || mode == mapWrite {
			flag = os.O_RDWR
		}
		if f, err = os.OpenFile(c.path, flag, 0); err != nil {
			return err
		}
	}
	defer func() {
		if mode == mapWrite && err == nil {
			c.fd = f
			return
		}
		c.fd = nil
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
		if size != c.size {
			c.resized = true
		}
	}
	c.size = size
	if mode == mapNone {
		return nil
	}
	if size > 0 {
		if size > math.MaxInt {
			return fmt.Errorf("logfs/index: %s: %d bytes is too large to map", c.path, size)
		}
		if c.data, err = mmap(f, int(size), mode == mapWrite); err != nil {
			return err
		}
	}
	c.writable = mode == mapWrite
	return nil
}

// firstMap maps an index at its file's length, read-only, and runs the
// validation rules, once per index. A corrupt index is unmapped again and
// keeps its *CorruptError in err for every later call; an I/O error is
// returned and the next call tries again. The caller holds wmu and mu.
func (c *file) firstMap() error {
	if err := c.remap(-1, mapRead); err != nil {
		return err
	}
	es := int64(c.entrySize)
	var rule string
	if c.size%es != 0 {
		rule = fmt.Sprintf("%s: %d bytes, entries are %d", ruleLength, c.size, es)
	} else {
		rule = c.check(c.data, c.logSize.Load())
	}
	if rule != "" {
		c.err = c.corrupt(rule)
		if err := c.remap(-1, mapNone); err != nil {
			return err
		}
	} else {
		c.entries.Store(c.size / es)
	}
	c.loaded.Store(true)
	return nil
}

func (c *file) corrupt(rule string) *CorruptError {
	return &CorruptError{File: c.path, Rule: rule}
}

// load maps the index on first use: the mutex-and-double-check of
// KAFKA-9156, so two first users cannot both map it.
func (c *file) load() error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.loadW()
}

// loadW is load for a caller that holds wmu.
func (c *file) loadW() error {
	if c.loaded.Load() {
		return nil
	}
	if c.closed {
		return ErrClosed
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.firstMap()
}

// rlock maps the index if this is its first use and takes mu for reading.
// On success the caller reads data and entries, then calls mu.RUnlock.
func (c *file) rlock() error {
	if !c.loaded.Load() {
		if err := c.load(); err != nil {
			return err
		}
	}
	c.mu.RLock()
	if c.closed || c.err != nil {
		err := c.err
		if c.closed {
			err = ErrClosed
		}
		c.mu.RUnlock()
		return err
	}
	return nil
}

// usableW maps the index if this is its first use and says why it cannot
// be used, if it cannot. The caller holds wmu.
func (c *file) usableW() error {
	if c.closed {
		return ErrClosed
	}
	if err := c.loadW(); err != nil {
		return err
	}
	return c.err
}

// writableW says why entries cannot be written, if they cannot. The
// caller holds wmu. A writable index is always mapped, so this never maps.
func (c *file) writableW() error {
	switch {
	case c.closed:
		return ErrClosed
	case c.err != nil:
		return c.err
	case !c.writable:
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
func (c *file) appendErr() error {
	switch {
	case c.closed:
		return ErrClosed
	case !c.loaded.Load():
		return ErrReadOnly
	case c.err != nil:
		return c.err
	case !c.writable:
		return ErrReadOnly
	}
	return nil
}

// broken makes a failed remap sticky: the index has no usable mapping.
func (c *file) broken(op string, err error) error {
	c.err = fmt.Errorf("logfs/index: %s %s: %w", op, c.path, err)
	return c.err
}

// relAtSlot decodes the relative offset of slot i.
func (c *file) relAtSlot(i int) uint32 {
	return be.Uint32(c.data[i*c.entrySize+c.relAt:])
}

// Entries returns the number of entries, mapping the index if this is its
// first use.
func (c *file) Entries() (int, error) {
	if err := c.rlock(); err != nil {
		return 0, err
	}
	n := c.entries.Load()
	c.mu.RUnlock()
	return int(n), nil
}

// MaxEntries returns the number of slots: the preallocated capacity of a
// writable index, the entries of a sealed one. It maps the index if this
// is its first use and returns 0 if it cannot be used.
func (c *file) MaxEntries() int {
	if c.rlock() != nil {
		return 0
	}
	m := len(c.data) / c.entrySize
	c.mu.RUnlock()
	return m
}

// IsFull reports whether an ordinary append has no slot left: entries >=
// MaxEntries for the offset index, entries >= MaxEntries-1 for the time
// index, whose last slot is kept for the entry written at roll and close.
// A sealed index is full; so is one that cannot be used.
func (c *file) IsFull() bool {
	if c.rlock() != nil {
		return true
	}
	full := int(c.entries.Load()) >= len(c.data)/c.entrySize-c.reserve
	c.mu.RUnlock()
	return full
}

// Check runs the validation rules over the entries, mapping the index if
// this is its first use. It returns nil or a *CorruptError (or ErrClosed,
// or the I/O error that prevented mapping). An offset index checks
// positions against Options.LogSize, raised by every Append past it.
func (c *file) Check() error {
	return c.checkWith(c.logSize.Load())
}

func (c *file) checkWith(logSize int64) error {
	if err := c.rlock(); err != nil {
		return err
	}
	defer c.mu.RUnlock()
	n := int(c.entries.Load())
	if rule := c.check(c.data[:n*c.entrySize], logSize); rule != "" {
		return c.corrupt(rule)
	}
	return nil
}

// Reset drops every entry of a writable index and keeps its preallocated
// size, for recovery to rebuild it. To rebuild a sealed index, create it
// again.
func (c *file) Reset() error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.writableW(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.data[:c.entries.Load()*int64(c.entrySize)])
	c.entries.Store(0)
	return nil
}

// TruncateTo drops every entry whose offset is >= off, as Kafka's
// truncateTo: when the log is cut at off. A writable index zeroes the
// dropped slots and keeps its size; a sealed one cuts its file.
func (c *file) TruncateTo(off record.Offset) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.usableW(); err != nil {
		return err
	}
	n := int(c.entries.Load())
	k := c.countBelow(off, n)
	if k == n {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries.Store(int64(k))
	if c.writable {
		clear(c.data[k*c.entrySize : n*c.entrySize])
		return nil
	}
	if err := c.remap(int64(k*c.entrySize), mapRead); err != nil {
		return c.broken("truncate", err)
	}
	return nil
}

// countBelow returns how many of the first n entries have an offset below
// off. Offsets never decrease from one entry to the next.
func (c *file) countBelow(off record.Offset, n int) int {
	if off <= c.base {
		return 0
	}
	if off-c.base > math.MaxUint32 {
		return n
	}
	t := uint32(off - c.base)
	lo, hi := 0, n
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if c.relAtSlot(mid) < t {
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
func (c *file) Seal() error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.closed {
		return ErrClosed
	}
	if !c.writable {
		return c.err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.remap(c.entries.Load()*int64(c.entrySize), mapRead); err != nil {
		return c.broken("seal", err)
	}
	return nil
}

// Flush writes the index's dirty pages to disk and waits (msync). It takes
// only the read lock, so appends go on meanwhile; an entry appended during
// Flush may or may not be durable when it returns. An index that was never
// used has nothing to flush.
func (c *file) Flush() error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		return ErrClosed
	}
	if c.data != nil {
		return msync(c.data)
	}
	if !c.resized {
		return nil
	}
	// Trimmed to nothing: only the new length has to reach the disk.
	if c.fd != nil {
		return c.fd.Sync()
	}
	f, err := os.Open(c.path)
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
func (c *file) Close() error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.closed {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	trim := int64(-1)
	if c.writable && c.err == nil {
		trim = c.entries.Load() * int64(c.entrySize)
	}
	return c.remap(trim, mapNone)
}

// Rename moves the index file to newPath without mapping it. A mapping,
// if any, stays valid. It works on a closed index too.
func (c *file) Rename(newPath string) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := os.Rename(c.path, newPath); err != nil {
		return err
	}
	c.path = newPath
	return nil
}

// Delete closes the index without trimming or mapping it and removes its
// file. A file that is already gone is not an error.
func (c *file) Delete() error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	err := c.remap(-1, mapNone)
	if rerr := os.Remove(c.path); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) && err == nil {
		err = rerr
	}
	return err
}

// Path returns the index file's path.
func (c *file) Path() string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.path
}

// Base returns the segment's base offset, which relative offsets are
// relative to.
func (c *file) Base() record.Offset { return c.base }

// Mapped reports whether the index holds a memory mapping now. An index
// that was never used does not, and neither does one whose file is empty.
func (c *file) Mapped() bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.data != nil
}
