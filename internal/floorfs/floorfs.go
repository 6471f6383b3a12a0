// Package floorfs is the transport floor of the mount's benchmarks: a
// go-fuse file system that does nothing but answer, mounted as logfs
// mounts (the same request size, st_blksize, no splice, the same read
// mode). What it costs is what FUSE itself costs on this machine, so a
// figure of the mount against it says how much of the gap to a plain file
// is logfs's own work.
//
//	MOUNTPOINT/
//	  data     read-only: Options.Size bytes of lowercase letters, a '\n'
//	           every 1024, or the bytes of the file Options.From, read
//	           into memory at the mount; a read is answered from memory,
//	           nothing else
//	  append   write-only sink: a write returns its length and keeps nothing
//
// `logfs bench` runs it as a child process (`logfs bench-floor`), as it
// runs the mount; integration's benchmarks mount it in the test process.
package floorfs

import (
	"context"
	"os"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/logfs/logfs/fs"
)

// Options configure the floor.
type Options struct {
	// Size is the length of data in bytes, when From is empty.
	Size int64
	// From, if set, is a file whose bytes data serves (Size is then
	// its size): the same text as a plain file the benchmarks read, so
	// that a program that works per line does the same work on both.
	From string
	// DirectIO serves data with direct I/O (FOPEN_DIRECT_IO), as logfs
	// does with fs.Options.DirectIO; otherwise through the page cache,
	// kept from one open to the next, as logfs does by default.
	DirectIO bool
}

// Mount mounts the floor at mountpoint and returns once the kernel has
// it. The caller unmounts it (Server.Unmount).
func Mount(mountpoint string, o Options) (*fuse.Server, error) {
	file := &dataFile{size: o.Size, direct: o.DirectIO}
	if o.From != "" {
		data, err := os.ReadFile(o.From)
		if err != nil {
			return nil, err
		}
		file.size, file.data, file.whole = int64(len(data)), data, true
	} else {
		file.data = make([]byte, 2*fs.DefaultMaxWrite)
		for i := range file.data {
			file.data[i] = 'a' + byte(i%26)
			if i%1024 == 1023 {
				file.data[i] = '\n'
			}
		}
	}
	root := &gofs.Inode{}
	srv, err := gofs.Mount(mountpoint, root, &gofs.Options{
		OnAdd: func(ctx context.Context) {
			root.AddChild("data", root.NewPersistentInode(ctx, file, gofs.StableAttr{Mode: syscall.S_IFREG}), false)
			root.AddChild("append", root.NewPersistentInode(ctx, &sinkFile{}, gofs.StableAttr{Mode: syscall.S_IFREG}), false)
		},
		MountOptions: fs.FUSEMountOptions(fuse.MountOptions{
			DirectMount: os.Geteuid() == 0,
			FsName:      "logfs-floor",
			Name:        "logfs",
		}),
	})
	if err != nil {
		return nil, err
	}
	_ = fs.RaiseReadAhead(mountpoint) // as logfs: best effort
	return srv, nil
}

// dataFile is data: size bytes, read from data: all of them (whole), or
// a pattern that repeats.
type dataFile struct {
	gofs.Inode
	size   int64
	data   []byte // whole, or 2 x fs.DefaultMaxWrite, so any request is one slice of it
	whole  bool
	direct bool
}

var (
	_ gofs.NodeGetattrer = (*dataFile)(nil)
	_ gofs.NodeOpener    = (*dataFile)(nil)
	_ gofs.NodeReader    = (*dataFile)(nil)
)

func (f *dataFile) Getattr(_ context.Context, _ gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	out.Mode = syscall.S_IFREG | 0o444
	out.Size = uint64(f.size)
	out.Blksize = fs.DefaultMaxWrite
	return 0
}

func (f *dataFile) Open(context.Context, uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	if f.direct {
		return nil, fuse.FOPEN_DIRECT_IO, 0
	}
	return nil, fuse.FOPEN_KEEP_CACHE, 0
}

func (f *dataFile) Read(_ context.Context, _ gofs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if off >= f.size {
		return fuse.ReadResultData(nil), 0
	}
	n := min(int64(len(dest)), f.size-off, fs.DefaultMaxWrite)
	at := off
	if !f.whole {
		at %= fs.DefaultMaxWrite
	}
	return fuse.ReadResultData(f.data[at : at+n]), 0
}

// sinkFile is append: every write succeeds and keeps nothing.
type sinkFile struct{ gofs.Inode }

var (
	_ gofs.NodeGetattrer = (*sinkFile)(nil)
	_ gofs.NodeSetattrer = (*sinkFile)(nil)
	_ gofs.NodeOpener    = (*sinkFile)(nil)
	_ gofs.NodeWriter    = (*sinkFile)(nil)
)

func (f *sinkFile) Getattr(_ context.Context, _ gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	out.Mode = syscall.S_IFREG | 0o222
	return 0
}

// Setattr accepts the truncate to 0 that a shell's > sends.
func (f *sinkFile) Setattr(_ context.Context, _ gofs.FileHandle, _ *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	out.Mode = syscall.S_IFREG | 0o222
	return 0
}

// Open opens for direct I/O, as logfs opens its append files, so that
// each write(2) is one WRITE.
func (f *sinkFile) Open(context.Context, uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	return nil, fuse.FOPEN_DIRECT_IO, 0
}

func (f *sinkFile) Write(_ context.Context, _ gofs.FileHandle, data []byte, _ int64) (uint32, syscall.Errno) {
	return uint32(len(data)), 0
}
