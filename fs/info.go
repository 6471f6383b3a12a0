package fs

import (
	"context"
	"encoding/json"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/storage"
)

// partitionInfo is the JSON document of a partition's info file.
type partitionInfo struct {
	Topic          string                `json:"topic"`
	Partition      int                   `json:"partition"`
	LogStartOffset record.Offset         `json:"log_start_offset"`
	LogEndOffset   record.Offset         `json:"log_end_offset"`
	RecoveryPoint  record.Offset         `json:"recovery_point"`
	Size           int64                 `json:"size"`
	LastModified   string                `json:"last_modified"`
	Segments       []storage.SegmentInfo `json:"segments"`
}

// info renders the partition's info document as it is now. On a cluster
// the offsets are the cluster's, the rest describes the local copy.
func (ps *partState) info(ctx context.Context) ([]byte, error) {
	p := ps.p
	segs, err := p.Segments()
	if err != nil {
		return nil, err
	}
	start, end, err := ps.offsets(ctx)
	if err != nil {
		return nil, err
	}
	doc := partitionInfo{
		Topic:          ps.topic,
		Partition:      ps.id,
		LogStartOffset: start,
		LogEndOffset:   end,
		RecoveryPoint:  p.RecoveryPoint(),
		Size:           p.Size(),
		LastModified:   p.ModTime().UTC().Format(time.RFC3339Nano),
		Segments:       segs,
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// infoNode is a partition's info file: read-only JSON describing the log,
// rendered afresh at every open (direct I/O, so its size may change
// between a stat and a read without cutting the read short).
type infoNode struct {
	gofs.Inode
	ps *partState
}

var (
	_ = (gofs.NodeGetattrer)((*infoNode)(nil))
	_ = (gofs.NodeOpener)((*infoNode)(nil))
	_ = (gofs.NodeOnForgetter)((*infoNode)(nil))
	_ = (gofs.NodeSetattrer)((*infoNode)(nil))
)

// Setattr refuses every change, as fixedDir.Setattr does.
func (n *infoNode) Setattr(ctx context.Context, fh gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	return n.ps.f.denied()
}

func (n *infoNode) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	n.ps.handedOut(&n.Inode)
	var size int
	if h, ok := fh.(*infoHandle); ok {
		size = len(h.data)
	} else {
		b, err := n.ps.info(ctx)
		if err != nil {
			return n.ps.f.errno(err, "getattr", n.ps.path("info"))
		}
		size = len(b)
	}
	n.ps.f.setAttr(&out.Attr, n.StableAttr().Ino, modeRead, int64(size), n.ps.p.ModTime())
	out.SetTimeout(n.ps.f.opts.AttrTimeout)
	return 0
}

func (n *infoNode) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	if flags&syscall.O_ACCMODE != syscall.O_RDONLY {
		return nil, 0, syscall.EACCES
	}
	b, err := n.ps.info(ctx)
	if err != nil {
		return nil, 0, n.ps.f.errno(err, "open", n.ps.path("info"))
	}
	return &infoHandle{data: b}, fuse.FOPEN_DIRECT_IO, 0
}

func (n *infoNode) OnForget() { n.ps.forget(&n.Inode) }

// infoHandle is an open info file: the document as it was at open.
type infoHandle struct{ data []byte }

var _ = (gofs.FileReader)((*infoHandle)(nil))

func (h *infoHandle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if off >= int64(len(h.data)) {
		return fuse.ReadResultData(nil), 0
	}
	return fuse.ReadResultData(h.data[off:min(off+int64(len(dest)), int64(len(h.data)))]), 0
}
