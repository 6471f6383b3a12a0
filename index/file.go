package index

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"runtime/debug"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/vfs"
)

// Sizes that are part of the on-disk format or Kafka's defaults.
const (
	// DefaultMaxBytes is Kafka's segment.index.bytes: the capacity of an
	// active index when Options.MaxBytes is 0.
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
	// pendingBytes bounds the entries a writable index keeps in memory
	// before it writes them to its file: a page. One pwrite(2) per page
	// of entries instead of one per entry is what keeps an append that
	// adds an entry at a few nanoseconds (a pwrite of 8 bytes costs about
	// 0.9 µs on the reference VM, a 64-record batch of 100 B about 9 µs).
	pendingBytes = 4096
)

// Options say how to create or open an index.
type Options struct {
	// FS is the file system the index file is opened, written, renamed
	// and removed through; nil means vfs.Default. The file is mapped
	// through the descriptor its File gives (see vfs.File).
	FS vfs.FS
	// MaxBytes is segment.index.bytes, the capacity of an active index,
	// rounded down to a multiple of the entry size. 0 means
	// DefaultMaxBytes. Used by Create, and by Open when Writable. Nothing
	// is preallocated: the file holds only the entries written to it.
	MaxBytes int64
	// LogSize is the size of the segment's .log. Validation rejects an
	// offset-index position at or past it. A negative LogSize means unknown
	// and skips that rule; note that the zero value means an empty log.
	// The time index does not use it.
	LogSize record.Position
	// Growing, for an index opened without Writable, says that the caller
	// sees only the first LogSize bytes of a log that a writer in another
	// process may be appending to, and returns the log's size now. Those
	// bytes end at offset LogEnd (the offset after their last batch). The
	// writer writes index entries for the batches it appends after them,
	// so on first use an index whose log has grown leaves out, as it does
	// a zero tail, the entries for what the caller does not see: offset
	// entries at positions at or past LogSize, time entries at offsets at
	// or past LogEnd. The positions of all of them are judged against the
	// size now. A log that has not grown is judged by LogSize as ever.
	Growing func() (record.Position, error)
	// LogEnd: see Growing.
	LogEnd record.Offset
	// Writable opens an existing index as the active segment's: it is
	// read and validated at once and takes appends after its entries, up
	// to MaxBytes (never fewer than it holds). Without it Open maps nothing
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

// pending is the newest entries of a writable index, not yet written to
// its file. A full or flushed tail is replaced by a new one, never reused,
// so a reader that loaded it may go on reading it.
type pending struct {
	at  int64  // entries in the file; buf's first entry is slot at
	buf []byte // fixed length: room for pendingBytes of entries
	// prev is a copy of the entry before buf's first (entry at-1), so that
	// an append checks its order without reading the mapping. Zero when
	// at is 0.
	prev [TimeEntrySize]byte
	// n is the number of entries of the index: at plus those in buf. The
	// writer stores it after writing an entry's bytes.
	n atomic.Int64
}

// file is what both kinds of index share: the file, its mapping, the entry
// count, the lifecycle and the locks. OffsetIndex and TimeIndex embed it
// and add the meaning of an entry.
//
// Every byte reaches the file through vfs, with pwrite: the mapping is
// read-only and never covers a byte a reader may read before it is in the
// file, so a full disk is an error from a write, never a SIGBUS from a
// store into a page with no block behind it.
//
// Lock order: wmu, then mu. Lookups take only mu.RLock (and, on first use,
// wmu then mu to map the file). Append and MaybeAppend take neither: the
// owner never runs them during another writer, so nothing they read can
// change under them.
type file struct {
	*layout
	fs       vfs.FS
	base     record.Offset // immutable
	maxBytes int64         // immutable; a multiple of entrySize
	pendCap  int64         // immutable; entries a pending tail holds

	// wmu serialises the writers other than the appends: every method that
	// changes the mapping or the file takes it for its whole run, as does
	// the first use of a lazily opened index. Holding it is enough to read
	// the fields below.
	wmu sync.Mutex

	// mu guards the mapping. Readers hold it shared for as long as they
	// read data; the fields below change only with it held exclusively
	// (and wmu held too), so munmap never runs under a reader.
	mu   sync.RWMutex
	path string // GUARDED_BY(wmu, mu)
	// fd is open while the index is writable, and after Seal or a cut of
	// a sealed index until Flush has made the change durable. Readers
	// never use it; the writer's appends do. GUARDED_BY(wmu, mu).
	fd vfs.File
	// mapping is the whole read-only mapping, for munmap; nil when nothing
	// is mapped. A writable index maps its capacity, past the end of the
	// file: readers read only what pwrite has put in the file.
	mapping []byte // GUARDED_BY(wmu, mu)
	// data is what readers may index into: the entries of a sealed or
	// read-only index, the whole mapping of a writable one (of which only
	// the first pend.at entries are in the file).
	data     []byte // GUARDED_BY(wmu, mu)
	writable bool   // GUARDED_BY(wmu, mu); takes appends
	// untrimmed says the file of a writable index runs past its entries:
	// it was opened with a zero tail (Kafka's preallocated active index),
	// which Seal and Close cut. GUARDED_BY(wmu, mu).
	untrimmed bool
	closed    bool // GUARDED_BY(wmu, mu)
	// err is sticky: the *CorruptError found on first map, or the failure
	// that left no usable mapping. GUARDED_BY(wmu, mu).
	err error

	// pend is the writable index's tail of entries still in memory, nil
	// otherwise. The appender replaces it (without mu) when it writes the
	// tail to the file, only after the write; writer methods replace it
	// under mu.
	pend atomic.Pointer[pending]
	// entries is the number of entries of an index that is not writable.
	// INVARIANT: when err is nil and the index is loaded and not
	// writable, entries*entrySize <= len(data).
	entries atomic.Int64
	// loaded says first use is done: the file was mapped and validated,
	// or err was set. Set last, under wmu and mu.
	loaded atomic.Bool
	// logSize bounds offset-index positions, <0 unknown. An append at
	// position p raises it to p+1.
	logSize atomic.Int64
	// growing and logEnd are Options.Growing and Options.LogEnd.
	// Immutable.
	growing func() (record.Position, error)
	logEnd  record.Offset
}

// fder is what the index needs of a vfs.File to map it: the descriptor.
// The operating system's files have it; so do crashfs's, which pass on
// their base file's.
type fder interface{ Fd() uintptr }

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
	x.fs = o.FS
	if x.fs == nil {
		x.fs = vfs.Default
	}
	x.base = base
	x.maxBytes = maxBytes - maxBytes%int64(l.entrySize)
	x.pendCap = int64(pendingBytes / l.entrySize)
	x.path = path
	x.logSize.Store(max(int64(o.LogSize), -1))
	x.growing, x.logEnd = o.Growing, o.LogEnd
	return nil
}

// create makes a new, empty, writable index, replacing any file at path.
func (x *file) create() error {
	// The file system gives it its mode: storage's gives a file in a
	// data directory the permission bits of its folder.
	f, err := x.fs.OpenFile(x.path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if err := x.mapWritable(f, 0); err != nil {
		f.Close()
		return err
	}
	x.loaded.Store(true)
	return nil
}

// open opens an existing index. A read-only one is only looked at: it is
// mapped on first use. A writable one is read and validated now and takes
// appends after its entries, up to its capacity (KAFKA-6388: a trimmed
// index reopened as the active one must not look full).
func (x *file) open(writable bool) error {
	if !writable {
		st, err := x.fs.Stat(x.path)
		if err == nil && !st.Mode().IsRegular() {
			err = &os.PathError{Op: "open", Path: x.path, Err: errNotRegular}
		}
		return err
	}
	if err := x.firstMap(); err != nil {
		return err
	}
	if x.err != nil {
		return x.err
	}
	f, err := x.fs.OpenFile(x.path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	n := x.entries.Load()
	st, err := f.Stat()
	if err == nil {
		err = x.mapWritable(f, n)
	}
	if err != nil {
		f.Close()
		return err
	}
	// The entries the zero tail ends are all of them; new ones overwrite it.
	x.untrimmed = st.Size() > n*int64(x.entrySize)
	return nil
}

// errNotRegular is the cause of the error for an index path that is not a
// regular file (a directory, a device, a FIFO).
var errNotRegular = errors.New("not a regular file")

// mapWritable makes the index writable on f, which holds its n entries and
// nothing else: f's descriptor mapped read-only at the capacity, past the
// end of the file, and an empty pending tail after the entries. The caller
// owns the index or holds wmu and mu.
func (x *file) mapWritable(f vfs.File, n int64) error {
	x.unmap()
	size := max(x.maxBytes, n*int64(x.entrySize))
	if size > 0 {
		b, err := x.mmap(f, size)
		if err != nil {
			return err
		}
		x.mapping, x.data = b, b
	}
	var prev []byte
	if n > 0 {
		prev = make([]byte, x.entrySize)
		if _, err := f.ReadAt(prev, (n-1)*int64(x.entrySize)); err != nil {
			x.unmap()
			return fmt.Errorf("logfs/index: read the last entry of %s: %w", x.path, err)
		}
	}
	x.fd = f
	x.writable = true
	x.pend.Store(x.newPending(n, prev))
	return nil
}

// newPending returns an empty tail after at entries, the last of which is
// prev (nil when at is 0).
func (x *file) newPending(at int64, prev []byte) *pending {
	p := &pending{at: at, buf: make([]byte, x.pendCap*int64(x.entrySize))}
	copy(p.prev[:], prev)
	p.n.Store(at)
	return p
}

// lastW returns the last entry of a writable index, from memory: the
// newest pending entry, or the copy of the one before them. ok is false
// for an empty index. Only the writer calls it.
func (x *file) lastW() (e []byte, n int64, ok bool) {
	p := x.pend.Load()
	n = p.n.Load()
	es := int64(x.entrySize)
	switch {
	case n > p.at:
		return p.buf[(n-p.at-1)*es : (n-p.at)*es], n, true
	case n > 0:
		return p.prev[:es], n, true
	}
	return nil, 0, false
}

// catchFault, deferred with debug.SetPanicOnFault(true) as old, turns a
// memory fault in the mapping into ErrFault in *err: a mapped file cut by
// another process (or rewritten by a simulated crash) fails the read
// instead of killing the process with SIGBUS. Anything but a fault panics
// on.
func (x *file) catchFault(err *error, old bool) {
	debug.SetPanicOnFault(old)
	if r := recover(); r != nil {
		*err = faultError(r, x.path, -1)
	}
}

// mmap maps size bytes of f read-only.
func (x *file) mmap(f vfs.File, size int64) ([]byte, error) {
	if size > math.MaxInt {
		return nil, fmt.Errorf("logfs/index: %s: %d bytes is too large to map", x.path, size)
	}
	d, ok := f.(fder)
	if !ok {
		return nil, fmt.Errorf("logfs/index: %s: the file system gives no descriptor to map", x.path)
	}
	b, err := mmapFd(int(d.Fd()), x.path, int(size))
	if err != nil {
		// A File that can no longer be used says why better than mmap's
		// EBADF (crashfs after a crash).
		if _, serr := f.Stat(); serr != nil {
			return nil, serr
		}
	}
	return b, err
}

// unmap drops the mapping, if any. The caller owns the index or holds wmu
// and mu.
func (x *file) unmap() {
	if x.mapping != nil {
		// munmap of a mapping this package made fails only for a bad
		// address: nothing to do about it but lose the address space.
		_ = munmap(x.mapping)
	}
	x.mapping, x.data = nil, nil
}

// firstMap maps an index at its file's length, read-only, and runs the
// validation rules, once per index. A corrupt index is unmapped again and
// keeps its *CorruptError in err for every later call; an I/O error is
// returned and the next call tries again. The caller holds wmu and mu.
func (x *file) firstMap() (err error) {
	defer x.catchFault(&err, debug.SetPanicOnFault(true))
	f, err := x.fs.OpenFile(x.path, os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return &os.PathError{Op: "open", Path: x.path, Err: errNotRegular}
	}
	size := st.Size()
	es := int64(x.entrySize)
	if x.growing != nil {
		// A writer appending a page of entries has written part of one:
		// the rest is the writer's, as the entries past the log are.
		size -= size % es
	}
	if size%es != 0 {
		x.err = x.corrupt(fmt.Sprintf("%s: %d bytes, entries are %d", ruleLength, size, es))
		x.loaded.Store(true)
		return nil
	}
	if size > 0 {
		b, err := x.mmap(f, size)
		if err != nil {
			return err
		}
		x.mapping, x.data = b, b
	}
	// A zero tail (an untrimmed, preallocated file) ends the entries. A
	// hole reads as zeros: only up to the end of the file's last data is
	// checked, so that a sparse tail (Kafka preallocates with a hole; a
	// file made huge with truncate) is not read page by page.
	checked := x.data
	if end, ok := vfs.DataEnd(f, size); ok && end < size {
		checked = x.data[:(end+es-1)/es*es]
	}
	// The log's size is taken after the index file's: the writer of a
	// growing log writes an entry only after the batch it points at.
	logSize, err := x.sizeNow()
	if err != nil {
		x.unmap()
		return err
	}
	if n, rule := x.check(checked, logSize); rule != "" {
		x.err = x.corrupt(rule)
		x.unmap()
	} else {
		if logSize > x.logSize.Load() {
			n = x.seen(checked, n)
		}
		x.entries.Store(int64(n))
		x.data = x.data[:int64(n)*es]
	}
	x.loaded.Store(true)
	return nil
}

// sizeNow returns the log size that offset-index positions are judged
// against on first use: Options.LogSize, or, when the log is growing and
// has grown past it, its size now.
func (x *file) sizeNow() (int64, error) {
	size := x.logSize.Load()
	if x.growing == nil || size < 0 {
		return size, nil
	}
	now, err := x.growing()
	if err != nil {
		return 0, err
	}
	return max(size, int64(now)), nil
}

// seen returns how many of the first n entries of data are for the part
// of a growing log that the caller sees (see Options.Growing). Entries are
// in log order, so the others are a tail.
func (x *file) seen(data []byte, n int) int {
	return sort.Search(n, func(i int) bool { return x.unseen(data[i*x.entrySize:]) })
}

// unseen reports whether entry e of an index of a growing log is for what
// the caller does not see of it.
func (x *file) unseen(e []byte) bool {
	if x.layout == &offsetLayout {
		return int64(be.Uint32(e[4:])) >= x.logSize.Load()
	}
	return x.base+record.Offset(be.Uint32(e[x.relAt:])) >= x.logEnd
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
	if err := x.firstMap(); err != nil || x.err == nil || x.growing == nil {
		return err
	}
	// The writer of a growing log may be in the middle of writing a page
	// of entries: for a moment the file can end inside an entry, or hold
	// one half written. Such a file is judged again, once, before it is
	// taken for corrupt; one that is corrupt is so both times.
	x.err = nil
	x.loaded.Store(false)
	return x.firstMap()
}

// rlock maps the index if this is its first use and takes mu for reading.
// On success the caller reads the entries (see view), then calls
// mu.RUnlock.
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

// view returns the entries a reader may read, in order: those in the
// mapping, then those still in memory (only a writable index has any),
// and their number. The caller holds mu (rlock) or wmu.
func (x *file) view() (mapped, tail []byte, n int) {
	es := int64(x.entrySize)
	if p := x.pend.Load(); p != nil {
		n := p.n.Load()
		return x.data[:p.at*es], p.buf[:(n-p.at)*es], int(n)
	}
	k := x.entries.Load()
	return x.data[:k*es], nil, int(k)
}

// slot returns the bytes of entry i of a view.
func (x *file) slot(mapped, tail []byte, i int) []byte {
	at := i * x.entrySize
	if at < len(mapped) {
		return mapped[at : at+x.entrySize]
	}
	at -= len(mapped)
	return tail[at : at+x.entrySize]
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
// caller holds wmu. A writable index is always loaded, so this never maps.
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

// next returns the pending tail and the bytes of the slot for the next
// entry, first writing a full tail to the file. The caller fills the
// bytes and publishes the entry with p.n.Store(n+1). If the write fails,
// nothing changed and the error says why.
func (x *file) next() (p *pending, e []byte, err error) {
	p = x.pend.Load()
	k := p.n.Load() - p.at
	if k == x.pendCap {
		if err := x.writePending(); err != nil {
			return nil, nil, err
		}
		p, k = x.pend.Load(), 0
	}
	es := int64(x.entrySize)
	return p, p.buf[k*es : (k+1)*es], nil
}

// writePending writes the pending entries to the file, after those it
// holds, and starts an empty tail after them. Only then does it publish
// the new tail, so a reader never reads from the mapping an entry that is
// not in the file. On failure nothing changed: the entries stay pending
// and the next write tries again at the same place. Appends and the
// writer methods call it; never two at once.
func (x *file) writePending() error {
	p := x.pend.Load()
	n := p.n.Load()
	es := int64(x.entrySize)
	if n == p.at {
		return nil
	}
	if _, err := x.fd.WriteAt(p.buf[:(n-p.at)*es], p.at*es); err != nil {
		// A short write left a part of the entries after the file's
		// whole ones; the next try overwrites them. Cutting them now keeps
		// the file a valid index should the process die first; if the
		// cut fails too, recovery's checks catch them.
		_ = x.fd.Truncate(p.at * es)
		return fmt.Errorf("logfs/index: write %d entries to %s: %w", n-p.at, x.path, err)
	}
	x.pend.Store(x.newPending(n, p.buf[(n-p.at-1)*es:(n-p.at)*es]))
	return nil
}

// trimW cuts a zero tail the file was opened with, after writePending:
// the file then holds exactly the entries. Cutting needs no room. The
// caller holds wmu.
func (x *file) trimW() error {
	if !x.untrimmed {
		return nil
	}
	n := x.pend.Load().n.Load()
	if err := x.fd.Truncate(n * int64(x.entrySize)); err != nil {
		return fmt.Errorf("logfs/index: trim %s: %w", x.path, err)
	}
	x.untrimmed = false
	return nil
}

// lastEntry returns the index's last entry and the number of entries. An
// index not mapped yet is not mapped for this: its last entry is read with
// one pread, so asking a sealed segment for its max timestamp (retention,
// a listing of segments) costs no mapping. Such a read applies only the
// rules one entry can break (the file's length, the entry's relative
// offset, the zeros of a file never trimmed); the rest run when the index
// is first mapped. The caller decodes the entry.
func (x *file) lastEntry(buf []byte) (n int, err error) {
	defer x.catchFault(&err, debug.SetPanicOnFault(true))
	if !x.loaded.Load() {
		if n, err, ok := x.peekLast(buf); ok {
			return n, err
		}
	}
	if err := x.rlock(); err != nil {
		return 0, err
	}
	defer x.mu.RUnlock()
	m, t, n := x.view()
	if n > 0 {
		copy(buf, x.slot(m, t, n-1))
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
	f, err := x.fs.OpenFile(x.path, os.O_RDONLY, 0)
	if err != nil {
		return 0, err, true
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, err, true
	}
	es := int64(x.entrySize)
	if !st.Mode().IsRegular() || st.Size()%es != 0 {
		return 0, nil, false // not an index: let the full rules say so
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
	if x.growing != nil && x.unseen(buf[:es]) {
		return 0, nil, false // a writer's newer entry, or a bad one: the full rules
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
	_, _, n := x.view()
	x.mu.RUnlock()
	return n, nil
}

// MaxEntries returns the number of slots: the capacity of a writable
// index, the entries of a sealed one. It maps the index if this is its
// first use and returns 0 if it cannot be used.
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
	_, _, n := x.view()
	full := n >= len(x.data)/x.entrySize-x.reserve
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

func (x *file) checkWith(logSize int64) (err error) {
	defer x.catchFault(&err, debug.SetPanicOnFault(true))
	if err := x.rlock(); err != nil {
		return err
	}
	defer x.mu.RUnlock()
	m, t, _ := x.view()
	data := m
	if len(t) > 0 {
		data = append(append(make([]byte, 0, len(m)+len(t)), m...), t...)
	}
	if _, rule := x.check(data, logSize); rule != "" {
		return x.corrupt(rule)
	}
	return nil
}

// Reset drops every entry of a writable index, for recovery to rebuild it.
// To rebuild a sealed index, create it again.
func (x *file) Reset() error {
	x.wmu.Lock()
	defer x.wmu.Unlock()
	if err := x.writableW(); err != nil {
		return err
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if err := x.fd.Truncate(0); err != nil {
		return fmt.Errorf("logfs/index: reset %s: %w", x.path, err)
	}
	x.untrimmed = false
	x.pend.Store(x.newPending(0, nil))
	return nil
}

// TruncateTo drops every entry whose offset is >= off, as Kafka's
// truncateTo: when the log is cut at off. It cuts the file where the
// entries dropped were written; on failure nothing changed. A sealed index
// keeps the cut file open until Flush makes it durable.
func (x *file) TruncateTo(off record.Offset) (err error) {
	defer x.catchFault(&err, debug.SetPanicOnFault(true))
	x.wmu.Lock()
	defer x.wmu.Unlock()
	if err := x.usableW(); err != nil {
		return err
	}
	m, t, n := x.view()
	return x.cutW(x.countBelow(m, t, off, n), n)
}

// TruncateEntries keeps the first n entries and drops the rest, as
// TruncateTo does: how an append that failed takes back the entries it
// added, counted before it began. An index with n entries or fewer is
// left alone.
func (x *file) TruncateEntries(n int) (err error) {
	defer x.catchFault(&err, debug.SetPanicOnFault(true))
	x.wmu.Lock()
	defer x.wmu.Unlock()
	if err := x.usableW(); err != nil {
		return err
	}
	_, _, have := x.view()
	return x.cutW(max(min(n, have), 0), have)
}

// cutW keeps the first k of the index's n entries. The caller holds wmu.
func (x *file) cutW(k, n int) error {
	if k == n {
		return nil
	}
	es := int64(x.entrySize)
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.writable {
		p := x.pend.Load()
		if int64(k) >= p.at {
			p.n.Store(int64(k)) // readers are shut out: the tail shrinks in place
			return nil
		}
		var prev []byte
		if k > 0 {
			m, t, _ := x.view()
			prev = append(prev[:0], x.slot(m, t, k-1)...)
		}
		if err := x.fd.Truncate(int64(k) * es); err != nil {
			return fmt.Errorf("logfs/index: truncate %s: %w", x.path, err)
		}
		x.untrimmed = false
		x.pend.Store(x.newPending(int64(k), prev))
		return nil
	}
	f := x.fd
	if f == nil {
		var err error
		if f, err = x.fs.OpenFile(x.path, os.O_RDWR, 0); err != nil {
			return err
		}
	}
	if err := f.Truncate(int64(k) * es); err != nil {
		if f != x.fd {
			f.Close()
		}
		return fmt.Errorf("logfs/index: truncate %s: %w", x.path, err)
	}
	x.fd = f
	x.entries.Store(int64(k))
	if k == 0 {
		x.unmap()
	} else {
		x.data = x.data[:int64(k)*es]
	}
	return nil
}

// countBelow returns how many of the n entries of a view have an offset
// below off. Offsets never decrease from one entry to the next.
func (x *file) countBelow(mapped, tail []byte, off record.Offset, n int) int {
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
		if be.Uint32(x.slot(mapped, tail, mid)[x.relAt:]) < t {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// WritePending writes the entries of a writable index that are still in
// memory to its file (and cuts a zero tail it was opened with), without
// syncing it: the failable part of Seal, for
// a caller that must know that Seal cannot fail before it commits to it.
// On failure nothing changed. Like Append, it is a writer: the owner calls
// it when no other writer runs. On an index that is not writable it does
// nothing.
func (x *file) WritePending() error {
	x.wmu.Lock()
	defer x.wmu.Unlock()
	if x.closed {
		return ErrClosed
	}
	if !x.writable {
		return nil
	}
	if err := x.writePending(); err != nil {
		return err
	}
	return x.trimW()
}

// Seal is the roll: it writes the pending entries and makes the index
// read-only, its mapping covering its entries. Sealing a sealed or
// read-only index does nothing. If the write fails, the index stays
// writable and unchanged, and Seal can be called again. For the time
// index, append the segment's final entry (MaybeAppend with
// skipFullCheck) first. The file stays open until Flush.
func (x *file) Seal() error {
	x.wmu.Lock()
	defer x.wmu.Unlock()
	if x.closed {
		return ErrClosed
	}
	if !x.writable {
		return x.err
	}
	if err := x.writePending(); err != nil {
		return err
	}
	if err := x.trimW(); err != nil {
		return err
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	n := x.pend.Load().n.Load()
	x.entries.Store(n)
	x.pend.Store(nil)
	x.writable = false
	if n == 0 {
		x.unmap()
	} else {
		x.data = x.data[:n*int64(x.entrySize)]
	}
	return nil
}

// Flush makes the index's entries durable: it writes the pending ones of
// a writable index and fsyncs the file. On a writable index it is a
// writer, like Append: the owner calls it when no other writer runs. On a
// sealed index anyone may call it at any time, and after a flush the index
// holds no file open. An index that was not written since it was opened
// has nothing to flush.
func (x *file) Flush() error {
	x.wmu.Lock()
	defer x.wmu.Unlock()
	if x.closed {
		return ErrClosed
	}
	if x.fd == nil {
		return nil
	}
	if x.writable {
		if err := x.writePending(); err != nil {
			return err
		}
	}
	if err := x.fd.Sync(); err != nil {
		return fmt.Errorf("logfs/index: sync %s: %w", x.path, err)
	}
	if x.writable {
		return nil
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	err := x.fd.Close()
	x.fd = nil
	return err
}

// Close writes the pending entries of a writable index, unmaps it and
// closes its file. An index that was never used is closed without being
// mapped (KAFKA-9373). Close is idempotent; it does not sync (see Flush).
// If the pending entries cannot be written the index is closed anyway and
// the error says so: the file then holds fewer entries than the index had.
func (x *file) Close() error {
	x.wmu.Lock()
	defer x.wmu.Unlock()
	if x.closed {
		return nil
	}
	var err error
	if x.writable && x.err == nil {
		if err = x.writePending(); err == nil {
			err = x.trimW()
		}
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.closed = true
	return errors.Join(err, x.release())
}

// release unmaps the index and closes its file. The caller holds wmu and
// mu.
func (x *file) release() error {
	x.unmap()
	x.pend.Store(nil)
	x.writable = false
	if x.fd == nil {
		return nil
	}
	err := x.fd.Close()
	x.fd = nil
	return err
}

// Rename moves the index file to newPath without mapping it. A mapping,
// if any, stays valid. It works on a closed index too.
func (x *file) Rename(newPath string) error {
	x.wmu.Lock()
	defer x.wmu.Unlock()
	x.mu.Lock()
	defer x.mu.Unlock()
	if err := x.fs.Rename(x.path, newPath); err != nil {
		return err
	}
	x.path = newPath
	return nil
}

// Delete closes the index without writing or mapping it and removes its
// file. A file that is already gone is not an error.
func (x *file) Delete() error {
	x.wmu.Lock()
	defer x.wmu.Unlock()
	x.mu.Lock()
	defer x.mu.Unlock()
	x.closed = true
	err := x.release()
	if rerr := x.fs.Remove(x.path); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) && err == nil {
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
// that was never used does not, and neither does one whose file is empty
// and is not writable.
func (x *file) Mapped() bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.mapping != nil
}
