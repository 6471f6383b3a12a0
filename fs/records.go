package fs

import (
	"context"
	"errors"
	"io"
	"path"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/storage"
)

// jsonlSuffix selects the JSON Lines rendering of a record file.
const jsonlSuffix = ".jsonl"

// splitFormat cuts the .jsonl suffix off a record file name.
func splitFormat(name string) (string, storage.Format) {
	if base, ok := strings.CutSuffix(name, jsonlSuffix); ok {
		return base, storage.JSONL
	}
	return name, storage.Values
}

func formatKind(f storage.Format) kind {
	if f == storage.JSONL {
		return kindJSONL
	}
	return kindValues
}

func formatName(base string, f storage.Format) string {
	if f == storage.JSONL {
		return base + jsonlSuffix
	}
	return base
}

// parseOffset reads a decimal offset; leading zeros are allowed, so the
// 20-digit base offsets of segment file names work too.
func parseOffset(s string) (record.Offset, bool) {
	if s == "" || len(s) > 20 {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return record.Offset(n), err == nil
}

// offsetDir is offset/: any decimal offset between the log start and end
// resolves, with or without .jsonl; ls shows the segment base offsets and
// earliest and latest.
type offsetDir struct {
	gofs.Inode
	fixedDir
	ps *partState
}

var (
	_ = (gofs.NodeLookuper)((*offsetDir)(nil))
	_ = (gofs.NodeReaddirer)((*offsetDir)(nil))
	_ = (gofs.NodeGetattrer)((*offsetDir)(nil))
)

func (d *offsetDir) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	d.f.setAttr(&out.Attr, d.ps.ino(kindOffsetDir, 0), modeDir, 0, d.ps.p.ModTime())
	out.SetTimeout(d.f.opts.AttrTimeout)
	return 0
}

func (d *offsetDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	base, format := splitFormat(name)
	var off record.Offset
	stable := true
	switch base {
	case "earliest", "latest":
		start, end, err := d.ps.offsets(ctx)
		if err != nil {
			return nil, d.f.errno(err, "lookup", d.ps.path("offset/"+name))
		}
		off, stable = start, false
		if base == "latest" {
			off = end
		}
	default:
		var ok bool
		if off, ok = parseOffset(base); !ok {
			return nil, syscall.ENOENT
		}
	}
	return d.ps.lookupRecord(ctx, &d.Inode, "offset/"+name, format, off, stable, out)
}

func (d *offsetDir) Readdir(ctx context.Context) (gofs.DirStream, syscall.Errno) {
	p := d.ps.p
	start, end, err := d.ps.offsets(ctx)
	if err != nil {
		return nil, d.f.errno(err, "readdir", d.ps.path("offset"))
	}
	var entries []fuse.DirEntry
	add := func(name string, off record.Offset) {
		entries = append(entries, fuse.DirEntry{Name: name, Mode: syscall.S_IFREG, Ino: d.ps.ino(kindValues, off)})
	}
	last := record.Offset(-1)
	for _, b := range p.SegmentBases() {
		// The first segment may begin below the log start offset (a
		// start moved by Kafka's DeleteRecords); list what resolves.
		b = max(b, start)
		if b > last && b <= end {
			add(strconv.FormatInt(int64(b), 10), b)
			last = b
		}
	}
	add("earliest", start)
	add("latest", end)
	return gofs.NewListDirStream(entries), 0
}

// timeDir is time/: any timestamp resolves, as unix seconds, unix
// milliseconds, RFC 3339 or a date, with or without .jsonl. It lists nothing.
type timeDir struct {
	gofs.Inode
	fixedDir
	ps *partState
}

var (
	_ = (gofs.NodeLookuper)((*timeDir)(nil))
	_ = (gofs.NodeReaddirer)((*timeDir)(nil))
	_ = (gofs.NodeGetattrer)((*timeDir)(nil))
)

func (d *timeDir) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	d.f.setAttr(&out.Attr, d.ps.ino(kindTimeDir, 0), modeDir, 0, d.ps.p.ModTime())
	out.SetTimeout(d.f.opts.AttrTimeout)
	return 0
}

func (d *timeDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	base, format := splitFormat(name)
	ts, err := storage.ParseTimeBound(base)
	if err != nil {
		return nil, syscall.ENOENT // a name that cannot exist
	}
	_, end, err := d.ps.offsets(ctx) // first: see timeNode.resolve
	if err != nil {
		return nil, d.f.errno(err, "lookup", d.ps.path("time/"+name))
	}
	off, err := d.ps.offsetForTime(ctx, ts)
	if err != nil {
		return nil, d.f.errno(err, "lookup", d.ps.path("time/"+name))
	}
	if off >= end { // no record stamped ts or later yet (timefile.go)
		return d.ps.lookupPendingTime(ctx, &d.Inode, name, format, ts, out)
	}
	return d.ps.lookupRecord(ctx, &d.Inode, "time/"+name, format, off, false, out)
}

func (d *timeDir) Readdir(ctx context.Context) (gofs.DirStream, syscall.Errno) {
	return gofs.NewListDirStream(nil), 0
}

// lookupRecord answers a lookup of a record file starting at off, which
// must lie between the log start and end offsets (ENOENT otherwise). A
// name whose meaning can change (earliest, latest, time/T) is not cached
// by the kernel; offset/N is. time/T resolves to the same inode as
// offset/N for the offset it finds, since it shows the same bytes.
func (ps *partState) lookupRecord(ctx context.Context, parent *gofs.Inode, name string, format storage.Format, off record.Offset, stable bool, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	start, end, err := ps.offsets(ctx)
	if err != nil {
		return nil, ps.f.errno(err, "lookup", ps.path(name))
	}
	if off < start || off > end {
		return nil, syscall.ENOENT
	}
	ino := ps.ino(formatKind(format), off)
	ps.mu.Lock()
	n, known := ps.records[ino]
	if known && (n.format != format || n.start != off) {
		ps.mu.Unlock()
		ps.f.log.Error("logfs: inode number collision", "path", ps.path(name), "ino", ino, "other", n.name())
		return nil, syscall.EIO
	}
	if !known {
		n = &recordNode{ps: ps, ino: ino, format: format, start: off}
		parent.NewInode(ctx, n, gofs.StableAttr{Mode: syscall.S_IFREG, Ino: ino})
		ps.records[ino] = n
	}
	ps.mu.Unlock()
	size, err := n.size(ctx, nil)
	if err != nil {
		if !known {
			ps.forget(&n.Inode)
		}
		if errors.Is(err, storage.ErrOffsetOutOfRange) {
			return nil, syscall.ENOENT
		}
		return nil, ps.f.errno(err, "lookup", ps.path(name))
	}
	ps.f.entry(out, ino, modeRead, size, ps.p.ModTime(), stable)
	// The size is never cached (see doc.go, Caching).
	out.SetAttrTimeout(0)
	ps.f.names.handedOut(parent, path.Base(name)) // bounded: nodecache.go
	return &n.Inode, 0
}

// recordNode is a record file: the rendering of a partition's records from
// a starting offset on, a regular file with an exact, growing size. Each
// open gets views of its own (recordHandle); the node holds none, so a
// node the kernel keeps in its cache pins no segment.
type recordNode struct {
	gofs.Inode
	ps     *partState
	ino    uint64
	format storage.Format
	start  record.Offset

	tail tailPage // reads served short, see cache.go
	// reported is the largest size the kernel was told of the file (by
	// Getattr, Lookup or a drop's store), so that a read never ends short
	// of it: the kernel would keep the rest of the page as zeros within
	// the file. Raised under tail.gate held exclusively, or before the
	// store that tells the kernel.
	reported atomic.Int64

	hmu     sync.Mutex
	handles map[*recordHandle]struct{} // open through the page cache, GUARDED_BY(hmu)
	// gen is the partition's Rewrites when an open last dropped the
	// kernel's pages of the file (see cacheState), GUARDED_BY(hmu).
	gen uint64
}

// cacheState says how an open of the file may use the kernel's pages of
// it, given the partition's Rewrites now (gen). They are kept
// (FOPEN_KEEP_CACHE) while no record they may hold was replaced since an
// open last dropped them. Once one may have been (a followed broker's
// cleaner or a truncation, a cluster copy reset), the open drops them (no
// FOPEN_KEEP_CACHE), unless a file opened before is still open through
// them: its views may still read the old records into them, so this open
// reads with direct I/O instead.
func (n *recordNode) cacheState() (gen uint64, direct, keep bool) {
	gen = n.ps.p.Rewrites()
	n.hmu.Lock()
	defer n.hmu.Unlock()
	switch {
	case n.gen == gen:
		return gen, false, true
	case len(n.handles) == 0:
		return gen, false, false
	default:
		return gen, true, false
	}
}

// openHandles returns the handles open through the page cache.
func (n *recordNode) openHandles() []*recordHandle {
	n.hmu.Lock()
	defer n.hmu.Unlock()
	hs := make([]*recordHandle, 0, len(n.handles))
	for h := range n.handles {
		hs = append(hs, h)
	}
	return hs
}

var (
	_ = (gofs.NodeGetattrer)((*recordNode)(nil))
	_ = (gofs.NodeOpener)((*recordNode)(nil))
	_ = (gofs.NodeOnForgetter)((*recordNode)(nil))
	_ = (gofs.NodeSetattrer)((*recordNode)(nil))
)

// Setattr refuses every change, as fixedDir.Setattr does.
func (n *recordNode) Setattr(ctx context.Context, fh gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	return n.ps.f.denied()
}

// size returns the file's current size, for the kernel: from a view of
// the open handle when there is one (it pins the segments, so it answers
// even after retention deleted the start), else from a view opened for the
// question (on a cluster, once the copy holds what the file shows now).
// It returns only once the kernel's pages past the end of a read served
// short are dropped, if the size has moved past it (see cache.go).
func (n *recordNode) size(ctx context.Context, fh gofs.FileHandle) (int64, error) {
	n.tail.gate.Lock()
	size, err := n.viewSize(ctx, fh)
	var wait <-chan struct{}
	kick := false
	if err == nil {
		wait, kick = n.tail.beforeSize(size)
		n.report(size)
		// The kernel zeroes the page that holds a size it is told, past
		// that size (truncate_pagecache, as a file extended by truncate
		// gets), though a read may have filled it with records past it;
		// so that page is dropped before a larger size is told, as a short
		// read's last page is.
		n.tail.noteSize(size)
	}
	n.tail.gate.Unlock()
	if err != nil {
		return 0, err
	}
	// A drop under way when the size was taken ends with a store that may
	// end inside a page short of size, cached with zeros past its end:
	// that end is dropped too before size is told. Each drop renders the
	// end as it is then, at or past size, so one more is enough, but at a
	// gap retention left a store can end short of it again; a few rounds
	// then, not forever (a read there fails).
	for round := 0; wait != nil; round++ {
		if kick {
			n.ps.noted(n) // a kept end may have become the note
			n.ps.kickDrop()
		}
		if err := waitFor(ctx, wait); err != nil {
			return 0, err
		}
		if round == 3 {
			break
		}
		wait, kick = n.tail.beforeSize(size)
	}
	return size, nil
}

// report notes that the kernel is told the file is size bytes long.
func (n *recordNode) report(size int64) {
	for {
		old := n.reported.Load()
		if size <= old || n.reported.CompareAndSwap(old, size) {
			return
		}
	}
}

func (n *recordNode) viewSize(ctx context.Context, fh gofs.FileHandle) (int64, error) {
	if h, ok := fh.(*recordHandle); ok {
		return h.size()
	}
	release, err := n.ps.hold(ctx, n.start)
	if err != nil {
		return 0, err
	}
	defer release()
	size, stopped, err := n.ps.p.ViewSize(n.format, n.start)
	return kernelSize(size, stopped), err
}

// kernelSize is the size the kernel is told of a view whose size is size:
// one byte more when the view stops at bad bytes, so that a reader through
// the page cache asks for the page that holds them and gets EIO instead of
// an end of file (see storage.View.Stopped).
func kernelSize(size int64, stopped bool) int64 {
	if stopped {
		size++
	}
	return size
}

// getattrHook, when set (by a test, before mounting), is called by a
// record file's Getattr with the size it is about to reply: a test holds
// the reply back with it.
var getattrHook func(n *recordNode, size int64)

func (n *recordNode) name() string {
	return "offset/" + formatName(strconv.FormatInt(int64(n.start), 10), n.format)
}

func (n *recordNode) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	n.ps.recordHandedOut(n)
	size, err := n.size(ctx, fh)
	if err != nil {
		return n.ps.f.errno(err, "getattr", n.ps.path(n.name()))
	}
	if getattrHook != nil {
		getattrHook(n, size)
	}
	n.ps.f.setAttr(&out.Attr, n.ino, modeRead, size, n.ps.p.ModTime())
	// Never cached: a read past the size the kernel knows then asks for it
	// again (see doc.go, Caching).
	out.SetTimeout(0)
	return 0
}

// Open gives the reader views of its own. By default reads go through the
// page cache, which the kernel keeps from one open to the next
// (FOPEN_KEEP_CACHE): the bytes of a record file never change, it only
// grows, and the one page that can go stale, a last page served short, is
// dropped before the kernel learns that the file grew (tailPage). With Options.DirectIO every
// read(2) reaches Read instead (FOPEN_DIRECT_IO). FOPEN_NOFLUSH spares the
// FLUSH a close would send: there is nothing to flush. See doc.go for the
// measurements.
func (n *recordNode) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	if flags&syscall.O_ACCMODE != syscall.O_RDONLY {
		return nil, 0, syscall.EACCES
	}
	directIO, keep, gen := n.ps.f.opts.DirectIO, true, uint64(0)
	if !directIO {
		gen, directIO, keep = n.cacheState()
	}
	h, err := n.open(ctx, directIO)
	if err != nil {
		return nil, 0, n.ps.f.errno(err, "open", n.ps.path(n.name()))
	}
	if h.directIO {
		return h, fuse.FOPEN_DIRECT_IO | fuse.FOPEN_NOFLUSH, 0
	}
	if !keep {
		// The kernel drops the file's pages as it opens it.
		n.hmu.Lock()
		n.gen = max(n.gen, gen)
		n.hmu.Unlock()
		return h, fuse.FOPEN_NOFLUSH, 0
	}
	return h, fuse.FOPEN_KEEP_CACHE | fuse.FOPEN_NOFLUSH, 0
}

// open makes the handle Open returns, for direct I/O or the page cache.
// On a cluster, it waits until the copy holds what the file shows now,
// and keeps it following the cluster until the release.
func (n *recordNode) open(ctx context.Context, directIO bool) (*recordHandle, error) {
	release, err := n.ps.hold(ctx, n.start)
	if err != nil {
		return nil, err
	}
	v, err := n.ps.p.NewView(n.format, n.start)
	if err != nil {
		release()
		return nil, err
	}
	h := &recordHandle{n: n, release: release}
	if directIO {
		h.directIO, h.direct = true, v
		h.ahead.open = h.newView
	} else {
		h.idle = append(h.idle, idleView{v: v})
		n.hmu.Lock()
		if n.handles == nil {
			n.handles = make(map[*recordHandle]struct{})
		}
		n.handles[h] = struct{}{}
		n.hmu.Unlock()
	}
	return h, nil
}

func (n *recordNode) OnForget() { n.ps.forget(&n.Inode) }

// recordHandle is an open record file. The kernel may send it several
// reads at once (its read-ahead does, through the page cache): each is
// rendered on a view of its own, so that both CPUs render.
type recordHandle struct {
	n        *recordNode
	directIO bool   // Options.DirectIO when opened
	release  func() // lets the copy of a cluster's partition stop following

	mu        sync.Mutex
	idle      []idleView    // views not rendering anything, GUARDED_BY(mu)
	busy      int           // views taken by takeView and not given back yet, GUARDED_BY(mu)
	back      chan struct{} // closed when a view is given back or the handle released; nil if nobody waits, GUARDED_BY(mu)
	closed    bool          // GUARDED_BY(mu)
	gapServed bool          // a read was served up to a gap retention left, GUARDED_BY(mu)
	// With Options.DirectIO the requests are the reader's own, one at a
	// time, served by one view and read ahead.
	direct *storage.View // GUARDED_BY(mu)
	reads  int           // reads so far, GUARDED_BY(mu)
	next   int64         // where the last read ended, GUARDED_BY(mu)
	ahead  readAheads    // GUARDED_BY(mu)
}

// idleView is a view and where its last read ended: a read from there
// carries on where the view is, without looking anything up.
type idleView struct {
	v   *storage.View
	end int64
}

var (
	_ = (gofs.FileReader)((*recordHandle)(nil))
	_ = (gofs.FileReleaser)((*recordHandle)(nil))
)

// newView opens another view of the handle's file.
func (h *recordHandle) newView() (*storage.View, error) {
	return h.n.ps.p.NewView(h.n.format, h.n.start)
}

// takeView returns an idle view, the one that last read up to off if
// there is one, or a new one. When a new one cannot be opened (retention
// deleted the file's start: the handle's own views still hold the
// segments they pinned, which no new view can have) while another
// request has a view of the handle, it waits for that one.
func (h *recordHandle) takeView(off int64) (idleView, error) {
	var newErr error
	h.mu.Lock()
	for {
		if h.closed {
			h.mu.Unlock()
			return idleView{}, storage.ErrClosed
		}
		if k := len(h.idle); k > 0 {
			i := k - 1
			for j, iv := range h.idle {
				if iv.end == off {
					i = j
					break
				}
			}
			iv := h.idle[i]
			h.idle = append(h.idle[:i], h.idle[i+1:]...)
			h.busy++
			h.mu.Unlock()
			return iv, nil
		}
		if newErr != nil {
			if h.busy == 0 {
				h.mu.Unlock()
				return idleView{}, newErr
			}
			if h.back == nil {
				h.back = make(chan struct{})
			}
			back := h.back
			h.mu.Unlock()
			<-back
			h.mu.Lock()
			continue
		}
		h.mu.Unlock()
		v, err := h.newView()
		h.mu.Lock()
		if err == nil {
			h.busy++
			h.mu.Unlock()
			return idleView{v: v, end: -1}, nil
		}
		newErr = err
	}
}

// putView gives a view back, or closes it if the handle was released.
func (h *recordHandle) putView(iv idleView) {
	h.mu.Lock()
	h.busy--
	if !h.closed && len(h.idle) < maxIdleViews {
		h.idle = append(h.idle, iv)
		iv.v = nil
	}
	h.wake()
	h.mu.Unlock()
	if iv.v != nil {
		iv.v.Close()
	}
}

// wake lets the requests waiting in takeView look again. It is called
// with mu held.
func (h *recordHandle) wake() {
	if h.back != nil {
		close(h.back)
		h.back = nil
	}
}

// maxIdleViews bounds the views a handle keeps between reads: the
// kernel's read-ahead has a few requests in flight at most.
const maxIdleViews = 4

// size returns the file's size as one of the handle's views sees it.
// When retention deleted records past what the handle's views pinned, the
// size up to that gap is reported until a read served the bytes up to
// it, so that a reader through the page cache reads what the handle
// holds; the next Getattr, which the kernel sends when a read(2) goes past
// that end, fails. (A read(2) that spans the gap, while bytes before it
// are still to be read, thus fails whole.)
func (h *recordHandle) size() (int64, error) {
	n, err := h.held()
	if errors.Is(err, storage.ErrDeleted) {
		h.mu.Lock()
		served := h.gapServed
		h.mu.Unlock()
		// Reported already (the bytes before the gap were read through
		// this file, or another): the kernel has the size, and asks again
		// only for a read past it, which must fail. Reporting it again
		// would have that read end there as if the file did.
		if !served && n > h.n.reported.Load() {
			return n, nil
		}
	}
	return n, err
}

func (h *recordHandle) held() (int64, error) {
	h.mu.Lock()
	if h.direct != nil {
		defer h.mu.Unlock()
		n, err := h.direct.Size()
		return n, err
	}
	h.mu.Unlock()
	iv, err := h.takeView(-1)
	if err != nil {
		return 0, err
	}
	defer h.putView(iv)
	n, err := iv.v.Held()
	return kernelSize(n, err == nil && iv.v.Stopped() != nil), err
}

// Read renders the bytes at off straight into the request's buffer, or,
// with direct I/O, hands over the ones read ahead for it (see
// readAheads). A read that reaches a corrupt batch returns what lies
// before it, and EIO for the next read. A short read, at the end of what
// there is now, is noted (see tailPage).
func (h *recordHandle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if h.directIO {
		return h.readDirect(dest, off)
	}
	ps, tail := h.n.ps, &h.n.tail
	ps.gate.RLock()
	defer ps.gate.RUnlock()
	tail.gate.RLock()
	defer tail.gate.RUnlock()
	iv, err := h.takeView(off)
	if err != nil {
		return nil, h.n.ps.f.errno(err, "read", h.n.ps.path(h.n.name()))
	}
	dest = getReadBuf(len(dest)) // not go-fuse's: see readbuf.go
	n, err := iv.v.ReadAt(dest, off)
	// A reply short of the request is the end of the file to the kernel,
	// which keeps the rest of the page as zeros: it must end where the file
	// does now. A render ends where its view saw the end when it began, so
	// records appended or rolled in meanwhile, which a drop's store may
	// have told the kernel of already, are read on; and where the view
	// stops, the next read says why: the end (io.EOF), a bad batch, or a
	// gap retention left.
	short := n > 0 && n < len(dest) && err == nil
	for n > 0 && n < len(dest) && err == nil {
		var k int
		k, err = iv.v.ReadAt(dest[n:], off+int64(n))
		n += k
	}
	if short && n < len(dest) {
		if errors.Is(err, storage.ErrDeleted) {
			// At a gap retention left: the end of what the view holds,
			// which is the size the handle reported (size); the next
			// Getattr fails. Unless the kernel was told of a larger size
			// (by another of the handle's views, which pinned segments
			// past this one's gap, or by another open file): an end of
			// file short of it would leave the rest of the page as zeros
			// inside the file, which the kernel serves as its bytes. The
			// read fails instead, as a read past the gap does.
			if held, _ := iv.v.Held(); held == off+int64(n) {
				if held >= h.n.reported.Load() {
					err = io.EOF
				}
				h.mu.Lock()
				h.gapServed = true
				h.mu.Unlock()
			}
		}
	}
	iv.end = off + int64(n)
	h.putView(iv)
	if err != nil && err != io.EOF {
		// The kernel takes a short reply for the end of the file, so a
		// read that stops at a bad batch fails whole, and the kernel then
		// asks for its pages one by one: a reader gets every whole page
		// before the bad batch, and EIO for the one that holds it.
		putReadBuf(dest)
		return nil, h.n.ps.f.errno(err, "read", h.n.ps.path(h.n.name()))
	}
	if n < len(dest) && tail.noteShort(off+int64(n)) {
		ps.noted(h.n)
	}
	return &pooledRead{buf: dest, n: n}, 0
}

// readDirect is Read with direct I/O: requests come one at a time, as the
// reader makes them, and a reader that reads on has the next ones
// rendered ahead.
func (h *recordHandle) readDirect(dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	h.mu.Lock()
	defer h.mu.Unlock()
	v := h.direct
	if h.closed {
		return nil, h.n.ps.f.errno(storage.ErrClosed, "read", h.n.ps.path(h.n.name()))
	}
	sequential := h.reads > 0 && off == h.next
	h.reads++
	if a := h.ahead.take(off, len(dest)); a != nil {
		h.next = off + int64(a.n)
		h.ahead.fill(h.next, len(dest))
		return a, 0
	}
	buf := getReadBuf(len(dest)) // not go-fuse's: see readbuf.go
	n, err := v.ReadAt(buf, off)
	if err != nil && err != io.EOF && n == 0 {
		putReadBuf(buf)
		return nil, h.n.ps.f.errno(err, "read", h.n.ps.path(h.n.name()))
	}
	h.next = off + int64(n)
	if sequential && n == len(dest) {
		h.ahead.fill(h.next, len(dest))
	}
	return &pooledRead{buf: buf, n: n}, 0
}

func (h *recordHandle) Release(ctx context.Context) syscall.Errno {
	h.mu.Lock()
	h.closed = true
	h.wake()
	h.ahead.close()
	idle := h.idle
	if h.direct != nil {
		idle = append(idle, idleView{v: h.direct})
	}
	h.idle, h.direct = nil, nil
	h.mu.Unlock()
	for _, iv := range idle {
		iv.v.Close()
	}
	if !h.directIO {
		h.n.hmu.Lock()
		delete(h.n.handles, h)
		h.n.hmu.Unlock()
	}
	if h.release != nil {
		h.release()
	}
	return 0
}
