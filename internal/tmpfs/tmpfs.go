// Package tmpfs mounts small tmpfs file systems for tests: a real file
// system that fills up, so that a full disk is met as the kernel reports
// it (ENOSPC from write, a short write, SIGBUS from a store through a
// mapping to a page it cannot allocate) rather than as a fault injected
// through package vfs.
//
// Mounting needs root (CAP_SYS_ADMIN); without it the tests skip, or fail
// when LOGFS_REQUIRE_TMPFS=1.
package tmpfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// Mount mounts a tmpfs of size bytes (rounded up to pages by the kernel)
// on a new temporary directory and returns that directory. The test's
// cleanup unmounts it, lazily, so that a file still open does not keep it.
// It skips the test when tmpfs cannot be mounted here.
func Mount(t testing.TB, size int64) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "logfs-tmpfs-")
	if err != nil {
		t.Fatal(err)
	}
	opts := fmt.Sprintf("size=%d,mode=0755", size)
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		os.Remove(dir)
		if os.Getenv("LOGFS_REQUIRE_TMPFS") == "1" {
			t.Fatalf("mount a tmpfs: %v", err)
		}
		t.Skipf("cannot mount a tmpfs here (%v): run as root", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
			return
		}
		os.Remove(dir)
	})
	return dir
}

// Fill writes a file named name in dir until the file system has no room
// left, and returns how many bytes it wrote. Removing the file frees them.
func Fill(t testing.TB, dir, name string) int64 {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	var n int64
	for {
		k, err := f.Write(buf)
		n += int64(k)
		if errors.Is(err, unix.ENOSPC) {
			return n
		}
		if err != nil {
			t.Fatalf("fill %s: %v", dir, err)
		}
	}
}

// Reserve writes a file named name of size bytes in dir (fewer if the file
// system fills first), taking that much room from what the test runs.
func Reserve(t testing.TB, dir, name string, size int64) int64 {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	k, err := f.Write(make([]byte, size))
	if err != nil && !errors.Is(err, unix.ENOSPC) {
		t.Fatalf("reserve in %s: %v", dir, err)
	}
	return int64(k)
}

// Free returns the bytes the file system still has room for.
func Free(t testing.TB, dir string) int64 {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * st.Bsize
}
