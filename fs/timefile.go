package fs

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/storage"
)

// A time/T file shows the records from the first one stamped T or later,
// whenever it was opened. When one exists at the lookup, time/T is the
// offset/N file of its offset. When none does yet, it is a timeNode: an
// empty file that stays empty while records stamped before T arrive, and
// shows the records from the first one stamped T or later once there is
// one (it was offset/<end>, which showed every record appended after the
// lookup, stamped before T or not).
//
// A timeNode resolves (finds that first record) at most once: a later
// append cannot be an earlier record. Until then every stat and read asks
// the partition again; its inode number is its own, derived from T. It is
// read with direct I/O, so that none of the page-cache bookkeeping of
// record files (cache.go) applies to it; its size is never cached.
type timeNode struct {
	gofs.Inode
	ps     *partState
	ino    uint64
	format storage.Format
	ts     int64 // T, in ms
	// first is the offset of the first record stamped ts or later, or -1
	// while there is none.
	first atomic.Int64
}

var (
	_ = (gofs.NodeGetattrer)((*timeNode)(nil))
	_ = (gofs.NodeOpener)((*timeNode)(nil))
	_ = (gofs.NodeOnForgetter)((*timeNode)(nil))
	_ = (gofs.NodeSetattrer)((*timeNode)(nil))
)

// lookupPendingTime answers a lookup of time/T (name) when no record is
// stamped T or later yet.
func (ps *partState) lookupPendingTime(ctx context.Context, parent *gofs.Inode, name string, format storage.Format, ts int64, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	k := kindTime
	if format == storage.JSONL {
		k = kindTimeJSONL
	}
	n := ino(ps.topic, ps.id, k, record.Offset(ts))
	f := ps.f
	f.mu.Lock()
	node := f.times[n]
	if node == nil {
		node = &timeNode{ps: ps, ino: n, format: format, ts: ts}
		node.first.Store(-1)
		parent.NewInode(ctx, node, gofs.StableAttr{Mode: syscall.S_IFREG, Ino: n})
		f.times[n] = node
	}
	f.mu.Unlock()
	ps.handedOut(&node.Inode)
	size, err := node.size(ctx, nil)
	if err != nil {
		return nil, f.errno(err, "lookup", ps.path("time/"+name))
	}
	f.entry(out, n, modeRead, size, ps.p.ModTime(), false)
	out.SetAttrTimeout(0)
	f.names.handedOut(parent, name) // bounded: nodecache.go
	return &node.Inode, 0
}

func (n *timeNode) name() string {
	return "time/" + formatName(strconv.FormatInt(n.ts, 10), n.format)
}

// resolve returns the offset of the first record stamped ts or later, and
// false while there is none. The end offset is read first: a record the
// lookup by time finds below it is stamped ts or later for sure, where one
// at the end may have been appended after the lookup looked.
func (n *timeNode) resolve(ctx context.Context) (record.Offset, bool, error) {
	if off := n.first.Load(); off >= 0 {
		return record.Offset(off), true, nil
	}
	_, end, err := n.ps.offsets(ctx)
	if err != nil {
		return 0, false, err
	}
	off, err := n.ps.offsetForTime(ctx, n.ts)
	if err != nil || off >= end {
		return 0, false, err
	}
	n.first.CompareAndSwap(-1, int64(off))
	return record.Offset(n.first.Load()), true, nil
}

// records returns the record file the node shows once resolved: offset/N
// for the first record stamped ts or later (not in the tree: it only
// serves this node's sizes and direct-I/O opens, never anything that
// would notify the kernel about its inode).
func (n *timeNode) records(off record.Offset) *recordNode {
	return &recordNode{ps: n.ps, ino: n.ino, format: n.format, start: off}
}

func (n *timeNode) size(ctx context.Context, fh gofs.FileHandle) (int64, error) {
	if h, ok := fh.(*timeHandle); ok {
		return h.size(ctx)
	}
	off, ok, err := n.resolve(ctx)
	if err != nil || !ok {
		return 0, err
	}
	return n.records(off).viewSize(ctx, nil)
}

func (n *timeNode) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	n.ps.handedOut(&n.Inode)
	size, err := n.size(ctx, fh)
	if err != nil {
		return n.ps.f.errno(err, "getattr", n.ps.path(n.name()))
	}
	n.ps.f.setAttr(&out.Attr, n.ino, modeRead, size, n.ps.p.ModTime())
	out.SetTimeout(0)
	return 0
}

// Setattr refuses every change, as fixedDir.Setattr does.
func (n *timeNode) Setattr(ctx context.Context, fh gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	return n.ps.f.denied()
}

// Open opens as offset/N does; a file not resolved yet gets a handle
// that resolves at its first stat or read that finds a record.
func (n *timeNode) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	if flags&syscall.O_ACCMODE != syscall.O_RDONLY {
		return nil, 0, syscall.EACCES
	}
	return &timeHandle{n: n}, fuse.FOPEN_DIRECT_IO | fuse.FOPEN_NOFLUSH, 0
}

func (n *timeNode) OnForget() {
	f := n.ps.f
	f.mu.Lock()
	if f.times[n.ino] == n {
		delete(f.times, n.ino)
	}
	f.mu.Unlock()
	n.ps.forget(&n.Inode)
}

// timeHandle is an open timeNode: empty until the node resolves, then an
// open offset/N file.
type timeHandle struct {
	n *timeNode

	mu  sync.Mutex
	rec *recordHandle // GUARDED_BY(mu): the open record file, once resolved
}

var (
	_ = (gofs.FileReader)((*timeHandle)(nil))
	_ = (gofs.FileReleaser)((*timeHandle)(nil))
)

// opened returns the record file's handle, opening it if the node has
// resolved, or nil while it has not.
func (h *timeHandle) opened(ctx context.Context) (*recordHandle, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.rec != nil {
		return h.rec, nil
	}
	off, ok, err := h.n.resolve(ctx)
	if err != nil || !ok {
		return nil, err
	}
	rec, err := h.n.records(off).open(ctx, true)
	if err != nil {
		return nil, err
	}
	h.rec = rec
	return rec, nil
}

func (h *timeHandle) size(ctx context.Context) (int64, error) {
	fh, err := h.opened(ctx)
	if err != nil || fh == nil {
		return 0, err
	}
	return fh.size()
}

func (h *timeHandle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	fh, err := h.opened(ctx)
	if err != nil {
		return nil, h.n.ps.f.errno(err, "read", h.n.ps.path(h.n.name()))
	}
	if fh == nil {
		return fuse.ReadResultData(nil), 0
	}
	return fh.Read(ctx, dest, off)
}

func (h *timeHandle) Release(ctx context.Context) syscall.Errno {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.rec != nil {
		return h.rec.Release(ctx)
	}
	return 0
}
