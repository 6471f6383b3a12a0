package integration

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/fs"
	"github.com/logfs/logfs/internal/fusetest"
)

// The transport floor: a go-fuse mount with one file whose reads are
// answered from memory, without reading, checking or rendering anything,
// mounted as logfs mounts by default (same request size, st_blksize, no
// splice, direct I/O). cat of it is as fast as a go-fuse server can serve
// a file on this machine, so it says how much of what is left to plain cat
// belongs to FUSE itself.

// floorFile is the file: size bytes, read from data (which repeats).
type floorFile struct {
	gofs.Inode
	size int64
	data []byte // 2 x fs.DefaultMaxWrite, so any request is one slice of it
}

var (
	_ gofs.NodeGetattrer = (*floorFile)(nil)
	_ gofs.NodeOpener    = (*floorFile)(nil)
	_ gofs.NodeReader    = (*floorFile)(nil)
)

func (f *floorFile) Getattr(_ context.Context, _ gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	out.Mode = syscall.S_IFREG | 0o444
	out.Size = uint64(f.size)
	out.Blksize = fs.DefaultMaxWrite
	return 0
}

func (f *floorFile) Open(context.Context, uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	return nil, fuse.FOPEN_DIRECT_IO, 0
}

func (f *floorFile) Read(_ context.Context, _ gofs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if off >= f.size {
		return fuse.ReadResultData(nil), 0
	}
	n := min(int64(len(dest)), f.size-off, fs.DefaultMaxWrite)
	at := off % fs.DefaultMaxWrite
	return fuse.ReadResultData(f.data[at : at+n]), 0
}

// mountFloor mounts the floor file, of size bytes, and returns its path.
func mountFloor(t testing.TB, size int64) string {
	t.Helper()
	fusetest.Require(t)
	data := make([]byte, 2*fs.DefaultMaxWrite)
	for i := range data {
		data[i] = 'a' + byte(i%26)
		if i%1024 == 1023 {
			data[i] = '\n'
		}
	}
	root := &gofs.Inode{}
	file := &floorFile{size: size, data: data}
	mp := t.TempDir()
	srv, err := gofs.Mount(mp, root, &gofs.Options{
		OnAdd: func(ctx context.Context) {
			root.AddChild("data", root.NewPersistentInode(ctx, file, gofs.StableAttr{Mode: syscall.S_IFREG}), false)
		},
		MountOptions: fuse.MountOptions{
			MaxWrite:      fs.DefaultMaxWrite,
			DisableSplice: true,
			DirectMount:   os.Geteuid() == 0,
			FsName:        "logfs-floor",
			Name:          "logfs",
		},
	})
	require.NoError(t, err)
	t.Cleanup(func() { unmountAt(t, srv, mp) })
	return filepath.Join(mp, "data")
}

// TestFloorFile checks that the floor serves what it says: its size, in
// whole reads.
func TestFloorFile(t *testing.T) {
	const size = 3*fs.DefaultMaxWrite + 5
	file := mountFloor(t, size)
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	require.Len(t, b, size)
	require.Equal(t, byte('a'), b[0])
	require.Equal(t, byte('\n'), b[1023])
	require.Equal(t, b[:fs.DefaultMaxWrite], b[fs.DefaultMaxWrite:2*fs.DefaultMaxWrite])
}
