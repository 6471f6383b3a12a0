//go:build unix

package index

import (
	"os"

	"golang.org/x/sys/unix"
)

// The only memory-mapping syscalls of the package. When and how big to map
// is decided by the index and LogMap code; these functions just do it.

// mmapFd maps the first size bytes of the file open as fd, shared and
// read-only, so that a stray write faults instead of changing the file and
// no store ever needs a block the file system may not have. size must be
// > 0 (mmap rejects an empty mapping); it may run past the end of the
// file, whose later writes then show through.
func mmapFd(fd int, path string, size int) ([]byte, error) {
	b, err := unix.Mmap(fd, 0, size, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, &os.PathError{Op: "mmap", Path: path, Err: err}
	}
	return b, nil
}

// munmap releases a mapping made by mmapFd.
func munmap(b []byte) error {
	if err := unix.Munmap(b); err != nil {
		return os.NewSyscallError("munmap", err)
	}
	return nil
}
