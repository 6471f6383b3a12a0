// Package vfs is the small file system interface that storage, recovery
// and index do all their file I/O through (logs, indexes, view indexes,
// checkpoints, markers, topic settings), so that tests can swap the disk
// for one that fails the k-th operation or forgets unsynced writes at a
// simulated crash (see internal/crashfs).
//
// Package index maps its files read-only, through the descriptor a File
// gives (an Fd method, as *os.File has); it writes them only with WriteAt.
package vfs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// FS is a file system rooted wherever its paths point.
type FS interface {
	// OpenFile opens a file like os.OpenFile.
	OpenFile(name string, flag int, perm os.FileMode) (File, error)
	// Remove removes a file or an empty directory.
	Remove(name string) error
	// RemoveAll removes a path and everything below it.
	RemoveAll(name string) error
	// Rename renames a file, replacing newpath atomically if it exists.
	// The rename is durable only after SyncDir of the directory.
	Rename(oldpath, newpath string) error
	// MkdirAll creates a directory and its parents.
	MkdirAll(dir string, perm os.FileMode) error
	// ReadDir lists a directory, sorted by name.
	ReadDir(dir string) ([]os.DirEntry, error)
	// Stat describes a file.
	Stat(name string) (os.FileInfo, error)
	// SyncDir makes the entries of a directory (creates, renames,
	// removes) durable.
	SyncDir(dir string) error
	// Lock takes an exclusive advisory lock on a directory, or on a file
	// (creating it), and fails at once with ErrLocked if another process
	// holds it. A directory cannot be unlinked away while locked, as a
	// lock file can; a file's lock also conflicts with the POSIX record
	// lock a Kafka broker takes on its .lock.
	Lock(name string) (io.Closer, error)
}

// File is an open file. Positions are explicit: there is no shared file
// offset, so concurrent ReadAt calls are safe.
type File interface {
	io.ReaderAt
	io.WriterAt
	io.Closer
	Name() string
	Stat() (os.FileInfo, error)
	// Sync makes the file's data durable (fdatasync where it suffices).
	Sync() error
	Truncate(size int64) error
}

// ErrLocked is returned by Lock when another process holds the lock.
var ErrLocked = errors.New("logfs/vfs: locked by another process")

// Default is the operating system's file system.
var Default FS = osFS{}

type osFS struct{}

func (osFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) Remove(name string) error                    { return os.Remove(name) }
func (osFS) RemoveAll(name string) error                 { return os.RemoveAll(name) }
func (osFS) Rename(oldpath, newpath string) error        { return os.Rename(oldpath, newpath) }
func (osFS) MkdirAll(dir string, perm os.FileMode) error { return os.MkdirAll(dir, perm) }
func (osFS) ReadDir(dir string) ([]os.DirEntry, error)   { return os.ReadDir(dir) }
func (osFS) Stat(name string) (os.FileInfo, error)       { return os.Stat(name) }

func (osFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return syncClose(d)
}

// syncClose fsyncs an open directory and closes it, reporting the first
// error.
func syncClose(d *os.File) error {
	err := d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

func (osFS) Lock(name string) (io.Closer, error) {
	var f *os.File
	var err error
	if st, serr := os.Stat(name); serr == nil && st.IsDir() {
		// A directory locked by its path is a data directory's own
		// (confined's Lock takes everything below it), and that path may
		// be a link: the operator's choice, as README says.
		f, err = os.OpenFile(name, os.O_RDONLY|unix.O_DIRECTORY, 0)
	} else {
		f, err = os.OpenFile(name, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW, 0o600)
	}
	if err != nil {
		return nil, err
	}
	return lockOpened(f, name)
}

// lockOpened locks the open directory or file f, named name, or closes it.
func lockOpened(f *os.File, name string) (io.Closer, error) {
	locked := func(err error) error {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) || errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EACCES) {
			return fmt.Errorf("%s: %w", name, ErrLocked)
		}
		return fmt.Errorf("lock %s: %w", name, err)
	}
	// flock: what logfs processes take, on the directory and on .lock.
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return nil, locked(err)
	}
	if st, err := f.Stat(); err == nil && !st.IsDir() {
		// An open-file-description lock on the whole file: it conflicts
		// with the fcntl lock Java's FileChannel.tryLock takes (a Kafka
		// broker's on its .lock), which flock does not see on Linux.
		lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: 0, Len: 0}
		if err := unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &lk); err != nil {
			return nil, locked(err)
		}
	}
	return f, nil
}

type osFile struct{ *os.File }

func (f osFile) Sync() error {
	// fdatasync: the data and the size, which is all a log append changes.
	for {
		err := unix.Fdatasync(int(f.Fd()))
		if err != unix.EINTR {
			if err != nil {
				return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: err}
			}
			return nil
		}
	}
}

// WriteFileAtomic replaces name with data so that a crash leaves either the
// old file or the new one: write name.tmp, fsync it, rename it over name,
// fsync the directory.
//
// If it fails, name is as it was and the temporary file is removed (a
// failure of that removal is not reported: the next write replaces it).
func WriteFileAtomic(fs FS, name string, data []byte) error {
	return WriteFileAtomicVia(fs, name, name+".tmp", data)
}

// WriteFileAtomicVia is WriteFileAtomic through the temporary file tmp, in
// the same directory, for a name too long to take ".tmp". The caller makes
// sure no two writes share tmp at once.
func WriteFileAtomicVia(fs FS, name, tmp string, data []byte) error {
	return writeFileAtomic(fs, name, tmp, func(f File) error {
		_, err := f.WriteAt(data, 0)
		return err
	})
}

// WriteFileAtomicFrom is WriteFileAtomic with the contents written by fill
// into the temporary file, for files too big to hold in memory (the bytes
// recovery copies out of a segment).
func WriteFileAtomicFrom(fs FS, name string, fill func(File) error) error {
	return writeFileAtomic(fs, name, name+".tmp", fill)
}

func writeFileAtomic(fs FS, name, tmp string, fill func(File) error) error {
	f, err := fs.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	err = fill(f)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fs.Rename(tmp, name)
	}
	if err != nil {
		_ = fs.Remove(tmp)
		return err
	}
	return fs.SyncDir(filepath.Dir(name))
}

// ReadFile reads a whole file.
func ReadFile(fs FS, name string) ([]byte, error) {
	return readFile(fs, name, 0)
}

// ReadFileData is ReadFile for a file of records of unit bytes whose zero
// tail ends them (an index, preallocated or made huge with truncate): a
// tail in a hole reads as zeros and is left out, so that a sparse file of
// gigabytes costs what its data does. It reads up to the end of the file's
// last data rounded up to whole units; all of it when the file system
// cannot say where the data is or the size is not whole units.
func ReadFileData(fs FS, name string, unit int64) ([]byte, error) {
	return readFile(fs, name, unit)
}

func readFile(fs FS, name string, unit int64) ([]byte, error) {
	f, err := fs.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	size := st.Size()
	if unit > 0 && size%unit == 0 {
		if end, ok := DataEnd(f, size); ok {
			size = min(size, (end+unit-1)/unit*unit)
		}
	}
	buf := make([]byte, size)
	n, err := f.ReadAt(buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return buf[:n], nil
}
