package fs

import "errors"

// Errors returned by Mount. Each wraps more detail; test with errors.Is.
var (
	// ErrNoFUSE is returned when the kernel's FUSE device cannot be used:
	// /dev/fuse is missing or cannot be opened, or the process is not root
	// and has no fusermount3 helper (Debian's fuse3 package) to mount with.
	// Its message is one line meant for the user.
	ErrNoFUSE = errors.New("logfs: FUSE is not available")

	// ErrMountpoint is returned when the mount point is not an empty
	// directory, or is already a mount point.
	ErrMountpoint = errors.New("logfs: bad mount point")

	// ErrDetached is returned by Server.Unmount when the mount is no
	// longer attached anywhere, after `umount -l` while files of it were
	// open: there is nothing to unmount, and the mount ends (Wait returns)
	// once the last of them is closed.
	ErrDetached = errors.New("logfs: unmounted lazily (umount -l); it ends once the files and folders still open in it are closed")
)
