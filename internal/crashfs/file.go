package crashfs

import (
	"os"

	"github.com/logfs/logfs/vfs"
)

// file is a File opened through the FS.
type file struct {
	fs   *FS
	f    vfs.File // the base file; nil once closed
	n    *node    // the tracked file; nil for a read-only handle
	name string
}

var _ vfs.File = (*file)(nil)

func (fs *FS) newHandle(f vfs.File, n *node, name string) *file {
	h := &file{fs: fs, f: f, n: n, name: name}
	fs.handles[h] = struct{}{}
	return h
}

// usable returns the error for an operation on a crashed FS or a closed
// file.
func (f *file) usable(op string) error {
	switch {
	case f.fs.crashed:
		return &os.PathError{Op: op, Path: f.name, Err: ErrCrashed}
	case f.f == nil:
		return &os.PathError{Op: op, Path: f.name, Err: os.ErrClosed}
	}
	return nil
}

func (f *file) Name() string { return f.name }

// Fd returns the base file's descriptor, for a memory mapping: mapped
// bytes are read, never written, so the model misses nothing. It is
// ^uintptr(0) if the base file has none, the file is closed or the FS
// crashed (Stat then says why).
func (f *file) Fd() uintptr {
	f.fs.mu.Lock()
	defer f.fs.unlock()
	if d, ok := f.f.(interface{ Fd() uintptr }); ok && f.usable("fd") == nil {
		return d.Fd()
	}
	return ^uintptr(0)
}

func (f *file) ReadAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.unlock()
	if err := f.usable("read"); err != nil {
		return 0, err
	}
	return f.f.ReadAt(p, off)
}

func (f *file) Stat() (os.FileInfo, error) {
	f.fs.mu.Lock()
	defer f.fs.unlock()
	if err := f.usable("stat"); err != nil {
		return nil, err
	}
	return f.f.Stat()
}

// WriteAt is a mutating operation. ShortWriteAfter may make it write only a
// prefix of p.
func (f *file) WriteAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.unlock()
	if err := f.usable("write"); err != nil {
		return 0, err
	}
	short, err := f.fs.begin()
	if err != nil {
		n := 0
		if short != nil && len(p) > 0 {
			var werr error
			if n, werr = f.write(p[:short.IntN(len(p))], off); werr != nil {
				return n, werr
			}
		}
		return n, &os.PathError{Op: "write", Path: f.name, Err: err}
	}
	if f.n != nil && f.fs.fullNow() && off+int64(len(p)) > f.n.size {
		fit := max(min(f.n.size-off, int64(len(p))), 0)
		n, err := f.write(p[:fit], off)
		if err != nil {
			return n, err
		}
		return n, &os.PathError{Op: "write", Path: f.name, Err: errFull}
	}
	return f.write(p, off)
}

func (f *file) write(p []byte, off int64) (int, error) {
	n := f.n
	if n == nil || off < 0 {
		return f.f.WriteAt(p, off)
	}
	w := write{off: off, prevSize: n.size}
	if end := min(off+int64(len(p)), n.size); off < end {
		var err error
		if w.old, err = readRange(n.fd, off, end); err != nil {
			return 0, err
		}
	}
	m, err := f.f.WriteAt(p, off)
	if m > 0 {
		w.data = append([]byte(nil), p[:m]...)
		w.old = w.old[:min(len(w.old), m)]
		n.size = max(n.size, off+int64(m))
		n.writes = append(n.writes, w)
	}
	return m, err
}

// Truncate is a mutating operation.
func (f *file) Truncate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.unlock()
	if err := f.usable("truncate"); err != nil {
		return err
	}
	if _, err := f.fs.begin(); err != nil {
		return &os.PathError{Op: "truncate", Path: f.name, Err: err}
	}
	n := f.n
	if n == nil || size < 0 {
		return f.f.Truncate(size)
	}
	w := write{size: size, prevSize: n.size}
	if size < n.size {
		var err error
		if w.old, err = readRange(n.fd, size, n.size); err != nil {
			return err
		}
	}
	if err := f.f.Truncate(size); err != nil {
		return err
	}
	n.size = size
	n.writes = append(n.writes, w)
	return nil
}

// Sync is a mutating operation. It makes every write to the file durable,
// whichever handle made it; a Sync through a read-only handle runs but the
// model does not count it.
func (f *file) Sync() error {
	f.fs.mu.Lock()
	defer f.fs.unlock()
	if err := f.usable("sync"); err != nil {
		return err
	}
	if _, err := f.fs.begin(); err != nil {
		return &os.PathError{Op: "sync", Path: f.name, Err: err}
	}
	if err := f.f.Sync(); err != nil {
		return err
	}
	if f.n != nil {
		f.n.writes = nil
	}
	return nil
}

func (f *file) Close() error {
	f.fs.mu.Lock()
	defer f.fs.unlock()
	if err := f.usable("close"); err != nil {
		return err
	}
	err := f.f.Close()
	f.f = nil
	delete(f.fs.handles, f)
	if n := f.n; n != nil {
		n.handles--
		f.fs.settle(n)
	}
	return err
}
