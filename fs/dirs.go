package fs

import (
	"context"
	"strconv"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/logfs/logfs/layout"
	"github.com/logfs/logfs/storage"
)

// The modes of the nodes at most: what each kind of node can do. Record
// files and info are read-only, the append files write-only (reading one
// gives nothing); mkdir adds topics to the root and partitions to a topic
// and nothing anywhere else. A mount shows them masked by logFS.perm, and
// the kernel enforces what they show (default_permissions).
const (
	modeMkdir  = syscall.S_IFDIR | 0o777 // the root and topics
	modeDir    = syscall.S_IFDIR | 0o555 // partitions, offset/ and time/
	modeRead   = syscall.S_IFREG | 0o444
	modeAppend = syscall.S_IFREG | 0o222
)

// permMask returns the permission bits a mount shows of the modes above:
// all of the owner's, the shared ones for the group and others when other
// users may use the mount at all, and no write bit on a read-only mount.
func permMask(o Options) uint32 {
	mask := uint32(0o700)
	if o.AllowOther {
		mask |= uint32(o.Share.Perm() & 0o077)
	}
	if o.ReadOnly {
		mask &^= 0o222
	}
	return mask
}

// setAttr fills the attributes every node shares. mode is one of the
// modes above; the mount shows it masked by perm. atime and ctime are the
// mtime: nothing else in the tree changes when a file is read.
func (f *logFS) setAttr(a *fuse.Attr, ino uint64, mode uint32, size int64, mtime time.Time) {
	a.Ino = ino
	a.Mode = mode&syscall.S_IFMT | mode&f.perm
	a.Size = uint64(size)
	a.Nlink = 1
	if mode&syscall.S_IFDIR != 0 {
		a.Nlink = 2
	}
	a.Owner = fuse.Owner{Uid: f.uid, Gid: f.gid}
	a.Blksize = f.blksize
	a.Blocks = (uint64(size) + 511) / 512
	a.SetTimes(&mtime, &mtime, &mtime)
}

// entry fills a lookup reply: attributes and how long the kernel may keep
// the name and the attributes.
func (f *logFS) entry(out *fuse.EntryOut, ino uint64, mode uint32, size int64, mtime time.Time, stableName bool) {
	f.setAttr(&out.Attr, ino, mode, size, mtime)
	out.SetAttrTimeout(f.opts.AttrTimeout)
	if stableName {
		out.SetEntryTimeout(f.opts.EntryTimeout)
	} else {
		out.SetEntryTimeout(0)
	}
}

// denied is the answer to a change the tree does not allow: EROFS on a
// read-only mount, EPERM otherwise.
func (f *logFS) denied() syscall.Errno {
	if f.readOnly {
		return syscall.EROFS
	}
	return syscall.EPERM
}

// fixedDir refuses the namespace changes the tree does not support. Without
// it go-fuse would let unlink and rmdir "succeed" by dropping its own
// entry. It is embedded by every directory node next to fs.Inode.
type fixedDir struct{ f *logFS }

// Setattr refuses chmod, chown, truncate and new times, as every node but
// the append files does (EPERM, or EROFS on a read-only mount): what a
// node shows is derived from the log and the mount's options.
func (d fixedDir) Setattr(ctx context.Context, fh gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	return d.f.denied()
}

func (d fixedDir) Unlink(ctx context.Context, name string) syscall.Errno { return d.f.denied() }
func (d fixedDir) Rmdir(ctx context.Context, name string) syscall.Errno  { return d.f.denied() }
func (d fixedDir) Rename(ctx context.Context, name string, newParent gofs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	return d.f.denied()
}
func (d fixedDir) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*gofs.Inode, gofs.FileHandle, uint32, syscall.Errno) {
	return nil, nil, 0, d.f.denied()
}
func (d fixedDir) Mknod(ctx context.Context, name string, mode, dev uint32, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return nil, d.f.denied()
}
func (d fixedDir) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return nil, d.f.denied()
}
func (d fixedDir) Link(ctx context.Context, target gofs.InodeEmbedder, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return nil, d.f.denied()
}

var (
	_ = (gofs.NodeSetattrer)(fixedDir{})
	_ = (gofs.NodeUnlinker)(fixedDir{})
	_ = (gofs.NodeRmdirer)(fixedDir{})
	_ = (gofs.NodeRenamer)(fixedDir{})
	_ = (gofs.NodeCreater)(fixedDir{})
	_ = (gofs.NodeMknoder)(fixedDir{})
	_ = (gofs.NodeSymlinker)(fixedDir{})
	_ = (gofs.NodeLinker)(fixedDir{})
)

// rootNode is the mount's root: one directory per topic.
type rootNode struct {
	gofs.Inode
	fixedDir
}

var (
	_ = (gofs.NodeLookuper)((*rootNode)(nil))
	_ = (gofs.NodeReaddirer)((*rootNode)(nil))
	_ = (gofs.NodeGetattrer)((*rootNode)(nil))
	_ = (gofs.NodeMkdirer)((*rootNode)(nil))
	_ = (gofs.NodeStatfser)((*rootNode)(nil))
)

func (r *rootNode) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	r.f.setAttr(&out.Attr, rootIno, modeMkdir, 0, r.f.mounted)
	out.SetTimeout(r.f.opts.AttrTimeout)
	return 0
}

func (r *rootNode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if !r.f.topicExists(ctx, name) {
		return nil, syscall.ENOENT
	}
	return r.topicInode(ctx, name, out), 0
}

func (r *rootNode) topicInode(ctx context.Context, name string, out *fuse.EntryOut) *gofs.Inode {
	n := ino(name, 0, kindTopic, 0)
	r.f.entry(out, n, modeMkdir, 0, r.f.mounted, true)
	return r.NewInode(ctx, &topicNode{fixedDir: fixedDir{r.f}, name: name}, gofs.StableAttr{Mode: syscall.S_IFDIR, Ino: n})
}

func (r *rootNode) Readdir(ctx context.Context) (gofs.DirStream, syscall.Errno) {
	names, err := r.f.topicNames(ctx)
	if err != nil {
		return nil, r.f.errno(err, "readdir", "/")
	}
	entries := make([]fuse.DirEntry, 0, len(names))
	for _, name := range names {
		entries = append(entries, fuse.DirEntry{Name: name, Mode: syscall.S_IFDIR, Ino: ino(name, 0, kindTopic, 0)})
	}
	return gofs.NewListDirStream(entries), 0
}

// Mkdir creates a topic with one partition. Its mode, as every node's,
// comes from the mount's options; the one asked for is ignored.
func (r *rootNode) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if r.f.readOnly {
		return nil, syscall.EROFS
	}
	if err := r.f.createTopic(ctx, name); err != nil {
		return nil, r.f.errno(err, "mkdir", name)
	}
	return r.topicInode(ctx, name, out), 0
}

// Statfs reports the data directory's file system, so df shows the room
// left for appends.
func (r *rootNode) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	var st syscall.Statfs_t
	if err := syscall.Statfs(r.f.l.Dir(), &st); err != nil {
		return r.f.errno(err, "statfs", "/")
	}
	out.FromStatfsT(&st)
	return 0
}

// topicNode is a topic: one directory per partition.
type topicNode struct {
	gofs.Inode
	fixedDir
	name string
}

var (
	_ = (gofs.NodeLookuper)((*topicNode)(nil))
	_ = (gofs.NodeReaddirer)((*topicNode)(nil))
	_ = (gofs.NodeGetattrer)((*topicNode)(nil))
	_ = (gofs.NodeMkdirer)((*topicNode)(nil))
)

func (d *topicNode) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	d.f.setAttr(&out.Attr, ino(d.name, 0, kindTopic, 0), modeMkdir, 0, d.f.mounted)
	out.SetTimeout(d.f.opts.AttrTimeout)
	return 0
}

func (d *topicNode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	id, err := layout.ParsePartition(name)
	if err != nil {
		return nil, syscall.ENOENT
	}
	p, err := d.f.storagePartition(ctx, d.name, id)
	if err != nil {
		return nil, d.f.errno(err, "lookup", d.name+"/"+name)
	}
	return d.partitionInode(ctx, p, out), 0
}

func (d *topicNode) partitionInode(ctx context.Context, p *storage.Partition, out *fuse.EntryOut) *gofs.Inode {
	n := ino(d.name, p.ID(), kindPartition, 0)
	d.f.entry(out, n, modeDir, 0, p.ModTime(), true)
	ps := d.f.partition(p)
	return d.NewInode(ctx, &partitionNode{fixedDir: fixedDir{d.f}, ps: ps}, gofs.StableAttr{Mode: syscall.S_IFDIR, Ino: n})
}

func (d *topicNode) Readdir(ctx context.Context) (gofs.DirStream, syscall.Errno) {
	ids, err := d.f.partitionIDs(ctx, d.name)
	if err != nil {
		return nil, d.f.errno(err, "readdir", d.name)
	}
	entries := make([]fuse.DirEntry, 0, len(ids))
	for _, id := range ids {
		entries = append(entries, fuse.DirEntry{Name: strconv.Itoa(id), Mode: syscall.S_IFDIR, Ino: ino(d.name, id, kindPartition, 0)})
	}
	return gofs.NewListDirStream(entries), 0
}

// Mkdir adds a partition; only the next number is allowed (EINVAL
// otherwise), as Kafka only ever grows a topic.
func (d *topicNode) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if d.f.readOnly {
		return nil, syscall.EROFS
	}
	id, err := layout.ParsePartition(name)
	if err == nil {
		var p *storage.Partition
		if p, err = d.f.addPartition(ctx, d.name, id); err == nil {
			return d.partitionInode(ctx, p, out), 0
		}
	}
	return nil, d.f.errno(err, "mkdir", d.name+"/"+name)
}

// partitionNode is one partition: append, append.jsonl, info, offset/ and
// time/.
type partitionNode struct {
	gofs.Inode
	fixedDir
	ps *partState
}

var (
	_ = (gofs.NodeLookuper)((*partitionNode)(nil))
	_ = (gofs.NodeReaddirer)((*partitionNode)(nil))
	_ = (gofs.NodeGetattrer)((*partitionNode)(nil))
)

// partitionChildren lists a partition folder, in the order ls shows it.
var partitionChildren = []struct {
	name string
	kind kind
	mode uint32
}{
	{"append", kindAppend, modeAppend},
	{"append.jsonl", kindAppendJSONL, modeAppend},
	{"info", kindInfo, modeRead},
	{"offset", kindOffsetDir, modeDir},
	{"time", kindTimeDir, modeDir},
}

func (d *partitionNode) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	ps := d.ps
	ps.f.setAttr(&out.Attr, ps.ino(kindPartition, 0), modeDir, 0, ps.p.ModTime())
	out.SetTimeout(ps.f.opts.AttrTimeout)
	return 0
}

func (d *partitionNode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	ps, f := d.ps, d.ps.f
	for _, c := range partitionChildren {
		if c.name != name {
			continue
		}
		n := ps.ino(c.kind, 0)
		var node gofs.InodeEmbedder
		switch c.kind {
		case kindAppend, kindAppendJSONL:
			node = &appendNode{ps: ps, jsonl: c.kind == kindAppendJSONL}
		case kindInfo:
			node = &infoNode{ps: ps}
		case kindOffsetDir:
			node = &offsetDir{fixedDir: fixedDir{f}, ps: ps}
		case kindTimeDir:
			node = &timeDir{fixedDir: fixedDir{f}, ps: ps}
		}
		inode := d.GetChild(name)
		if inode == nil || inode.StableAttr().Ino != n {
			inode = d.NewInode(ctx, node, gofs.StableAttr{Mode: c.mode & syscall.S_IFMT, Ino: n})
		}
		size := int64(0)
		if c.kind == kindInfo {
			// The kernel caches info's size for AttrTimeout: the notifier
			// must know to invalidate it, before the size is taken, as
			// Getattr does (a change in between is then not missed). The
			// node noted is the one go-fuse keeps: a node it already has
			// for the name wins over a new one.
			ps.handedOut(inode)
			b, err := ps.info(ctx)
			if err != nil {
				return nil, f.errno(err, "lookup", ps.path("info"))
			}
			size = int64(len(b))
		}
		f.entry(out, n, c.mode, size, ps.p.ModTime(), true)
		return inode, 0
	}
	return nil, syscall.ENOENT
}

func (d *partitionNode) Readdir(ctx context.Context) (gofs.DirStream, syscall.Errno) {
	entries := make([]fuse.DirEntry, 0, len(partitionChildren))
	for _, c := range partitionChildren {
		entries = append(entries, fuse.DirEntry{Name: c.name, Mode: c.mode & syscall.S_IFMT, Ino: d.ps.ino(c.kind, 0)})
	}
	return gofs.NewListDirStream(entries), 0
}
