package fs

import (
	"context"
	"errors"
	"io"
	"strconv"
	"strings"
	"sync"
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
	ts, err := storage.ParseTimestamp(base)
	if err != nil {
		return nil, syscall.ENOENT // a name that cannot exist
	}
	off, err := d.ps.offsetForTime(ctx, ts)
	if err != nil {
		return nil, d.f.errno(err, "lookup", d.ps.path("time/"+name))
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
	ps.fresh[&n.Inode] = struct{}{}
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
	return &n.Inode, 0
}

// recordNode is a record file: the rendering of a partition's records from
// a starting offset on, a regular file with an exact, growing size. Each
// open gets its own storage.View (recordHandle); the node holds nothing,
// so a node the kernel keeps in its cache pins no segment.
type recordNode struct {
	gofs.Inode
	ps     *partState
	ino    uint64
	format storage.Format
	start  record.Offset
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

// size returns the file's current size: from the open handle's view when
// there is one (it pins the segments, so it answers even after retention
// deleted the start), else from a view opened for the question (on a
// cluster, once the copy holds what the file shows now).
func (n *recordNode) size(ctx context.Context, fh gofs.FileHandle) (int64, error) {
	if h, ok := fh.(*recordHandle); ok {
		return h.v.Size()
	}
	release, err := n.ps.hold(ctx, n.start)
	if err != nil {
		return 0, err
	}
	defer release()
	v, err := n.ps.p.NewView(n.format, n.start)
	if err != nil {
		return 0, err
	}
	defer v.Close()
	return v.Size()
}

func (n *recordNode) name() string {
	return "offset/" + formatName(strconv.FormatInt(int64(n.start), 10), n.format)
}

func (n *recordNode) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	n.ps.recordHandedOut(n)
	size, err := n.size(ctx, fh)
	if err != nil {
		return n.ps.f.errno(err, "getattr", n.ps.path(n.name()))
	}
	n.ps.f.setAttr(&out.Attr, n.ino, modeRead, size, n.ps.p.ModTime())
	out.SetTimeout(n.ps.f.opts.AttrTimeout)
	return 0
}

// Open gives the reader a view of its own. By default reads bypass the
// page cache (FOPEN_DIRECT_IO): every read(2) reaches Read, which is the
// fastest way through a file once, shows a record the moment its append
// returned, and never duplicates the log in memory. With
// Options.PageCache they go through the page cache, which the kernel keeps
// from one open to the next (FOPEN_KEEP_CACHE): the bytes of a record file
// never change, it only grows, and a growth the kernel learns of (a new
// size or mtime in the attributes) makes it drop the file's cached pages,
// the partial last one included. See doc.go for the measurements.
func (n *recordNode) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	if flags&syscall.O_ACCMODE != syscall.O_RDONLY {
		return nil, 0, syscall.EACCES
	}
	// On a cluster, the open waits until the copy holds what the file
	// shows now, and keeps it following the cluster until the release.
	release, err := n.ps.hold(ctx, n.start)
	if err != nil {
		return nil, 0, n.ps.f.errno(err, "open", n.ps.path(n.name()))
	}
	v, err := n.ps.p.NewView(n.format, n.start)
	if err != nil {
		release()
		return nil, 0, n.ps.f.errno(err, "open", n.ps.path(n.name()))
	}
	mode := uint32(fuse.FOPEN_DIRECT_IO)
	if n.ps.f.opts.PageCache {
		mode = fuse.FOPEN_KEEP_CACHE
	}
	h := &recordHandle{n: n, v: v, release: release}
	h.ahead.open = func() (*storage.View, error) { return n.ps.p.NewView(n.format, n.start) }
	return h, mode, 0
}

func (n *recordNode) OnForget() { n.ps.forget(&n.Inode) }

// recordHandle is an open record file.
type recordHandle struct {
	n       *recordNode
	v       *storage.View
	release func() // lets the copy of a cluster's partition stop following

	mu    sync.Mutex
	reads int        // reads so far, GUARDED_BY(mu)
	next  int64      // where the last read ended, GUARDED_BY(mu)
	ahead readAheads // GUARDED_BY(mu)
}

var (
	_ = (gofs.FileReader)((*recordHandle)(nil))
	_ = (gofs.FileReleaser)((*recordHandle)(nil))
)

// Read renders the bytes at off straight into the request's buffer, or
// hands over the ones read ahead for it (see readAheads). A read that
// reaches a corrupt batch returns what lies before it, and EIO for the
// next read.
func (h *recordHandle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	h.mu.Lock()
	defer h.mu.Unlock()
	sequential := h.reads > 0 && off == h.next
	h.reads++
	if a := h.ahead.take(off, len(dest)); a != nil {
		h.next = off + int64(a.n)
		h.ahead.fill(h.next, len(dest))
		return a, 0
	}
	n, err := h.v.ReadAt(dest, off)
	if err != nil && err != io.EOF && n == 0 {
		return nil, h.n.ps.f.errno(err, "read", h.n.ps.path(h.n.name()))
	}
	h.next = off + int64(n)
	if sequential && n == len(dest) {
		h.ahead.fill(h.next, len(dest))
	}
	return fuse.ReadResultData(dest[:n]), 0
}

func (h *recordHandle) Release(ctx context.Context) syscall.Errno {
	h.mu.Lock()
	h.ahead.close()
	h.mu.Unlock()
	h.v.Close()
	if h.release != nil {
		h.release()
	}
	return 0
}
