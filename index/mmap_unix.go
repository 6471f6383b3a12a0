//go:build unix

package index

import (
	"os"

	"golang.org/x/sys/unix"
)

// The only memory-mapping syscalls of the package. When and how big to map
// is decided by (*file).remap; these functions just do it.

// mmap maps the first size bytes of f, shared, so that writes reach the
// file. The mapping is read-write when writable and read-only otherwise, so
// a stray write to a sealed index faults instead of changing it. size must
// be > 0: mmap rejects an empty mapping.
func mmap(f *os.File, size int, writable bool) ([]byte, error) {
	return mmapFd(int(f.Fd()), f.Name(), size, writable)
}

// mmapFd is mmap for a file known by its descriptor and path.
func mmapFd(fd int, path string, size int, writable bool) ([]byte, error) {
	prot := unix.PROT_READ
	if writable {
		prot |= unix.PROT_WRITE
	}
	b, err := unix.Mmap(fd, 0, size, prot, unix.MAP_SHARED)
	if err != nil {
		return nil, &os.PathError{Op: "mmap", Path: path, Err: err}
	}
	if writable {
		// A writable index is preallocated, a sparse file, and filled a
		// page at a time. Without this, the first write to a page reads
		// around it, zero-filling the holes of up to megabytes of the
		// file that the segment may never use: about a millisecond per
		// page on a log of 1 MiB batches, where each segment has few
		// entries (go test -bench AppendRoll ./storage, with and without).
		// The advice only steers that read; failing to give it costs
		// speed, not correctness.
		_ = unix.Madvise(b, unix.MADV_RANDOM)
	}
	return b, nil
}

// munmap releases a mapping made by mmap.
func munmap(b []byte) error {
	if err := unix.Munmap(b); err != nil {
		return os.NewSyscallError("munmap", err)
	}
	return nil
}

// msync writes the dirty pages of a mapping to the file and waits for the
// disk. On Linux this is fdatasync of the mapped range: it also makes the
// file's length durable.
func msync(b []byte) error {
	if err := unix.Msync(b, unix.MS_SYNC); err != nil {
		return os.NewSyscallError("msync", err)
	}
	return nil
}
