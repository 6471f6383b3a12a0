package crashfs

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/logfs/logfs/vfs"
)

// FS is a vfs.FS that passes every operation to a base FS working on real
// paths and models what a crash would keep. See the package documentation.
type FS struct {
	base vfs.FS

	// mu guards everything below and serializes every operation on the FS,
	// its Files and its locks, including the I/O itself. There is no other
	// lock.
	mu sync.Mutex

	ops      int        // mutating operations numbered so far
	failAt   int        // number of the operation to fail, or -1
	failErr  error      // error for failAt
	failRand *rand.Rand // non-nil: failAt is a short write
	crashAt  int        // number of the operation to crash at, or -1
	crashCfg CrashConfig
	fullAt   int // number of the operation from which the disk is full, or -1

	crashed  bool
	crashErr error    // what the crash itself ran into
	after    []func() // run by unlock once mu is released (Mangle)

	root     *node
	seq      int                    // last node.seq handed out
	pending  []*dirOp               // directory operations not yet durable, oldest first
	files    map[*node]struct{}     // file nodes the model holds
	dataDirs map[*node]struct{}     // directories that held a tracked file
	handles  map[*file]struct{}     // open Files
	locks    map[*lockFile]struct{} // held locks
}

var _ vfs.FS = (*FS)(nil)

// New returns an FS that wraps base, normally vfs.Default. Everything already
// on disk when the FS first looks at it counts as durable.
func New(base vfs.FS) *FS {
	return &FS{
		base:     base,
		failAt:   -1,
		crashAt:  -1,
		fullAt:   -1,
		root:     &node{dir: true, children: make(map[string]*node)},
		files:    make(map[*node]struct{}),
		dataDirs: make(map[*node]struct{}),
		handles:  make(map[*file]struct{}),
		locks:    make(map[*lockFile]struct{}),
	}
}

// FailAfter makes the mutating operation numbered k fail with err (nil means
// ErrInjected) without doing anything, once k operations have been numbered.
// Numbers start at 0. The fault fires once; later operations run normally.
// A negative k cancels a fault not yet fired.
func (fs *FS) FailAfter(k int, err error) {
	fs.mu.Lock()
	defer fs.unlock()
	if err == nil {
		err = ErrInjected
	}
	fs.failAt, fs.failErr, fs.failRand = max(k, -1), err, nil
}

// ShortWriteAfter is FailAfter for a full disk: if the operation numbered k
// is a WriteAt of a non-empty slice, it first writes a random strict prefix
// of it, drawn from rng (nil means a fixed seed), and returns the number of
// bytes written. The error matches both ErrInjected and syscall.ENOSPC with
// errors.Is. Any other operation fails with that error and does nothing.
func (fs *FS) ShortWriteAfter(k int, rng *rand.Rand) {
	fs.mu.Lock()
	defer fs.unlock()
	if rng == nil {
		rng = rand.New(rand.NewPCG(0, 0))
	}
	fs.failAt, fs.failErr, fs.failRand = max(k, -1), fmt.Errorf("%w: %w", ErrInjected, syscall.ENOSPC), rng
}

// FillAfter makes the disk full from the mutating operation numbered k on
// (now, if k is below the count), until Free: every operation that needs
// space fails with an error matching ErrInjected and syscall.ENOSPC, as a
// real full disk does, and the rest run. Needing space means: a WriteAt
// that would extend its file (it writes the part that lies inside the file
// and reports that count with the error), an OpenFile with O_CREATE of a
// file that does not exist, and a MkdirAll that has a directory to create.
// Overwrites, truncates, renames, removes and syncs go on. A negative k is
// Free.
func (fs *FS) FillAfter(k int) {
	fs.mu.Lock()
	defer fs.unlock()
	fs.fullAt = max(k, -1)
}

// Free ends FillAfter: the disk has room again.
func (fs *FS) Free() { fs.FillAfter(-1) }

// errFull is the error of an operation that needs space on a full disk.
var errFull = fmt.Errorf("%w: %w", ErrInjected, syscall.ENOSPC)

// fullNow reports whether the disk is full for the operation begin just
// numbered.
func (fs *FS) fullNow() bool { return fs.fullAt >= 0 && fs.ops-1 >= fs.fullAt }

// CrashAt makes the FS crash with cfg when the mutating operation numbered k
// is reached: that operation does not run and returns ErrCrashed, and so does
// every later operation. The error of the crash itself is reported by
// Crashed. A negative k cancels a crash not yet run.
func (fs *FS) CrashAt(k int, cfg CrashConfig) {
	fs.mu.Lock()
	defer fs.unlock()
	fs.crashAt, fs.crashCfg = max(k, -1), cfg
}

// Ops returns how many mutating operations have been numbered: those that
// ran, plus one failed by FailAfter or ShortWriteAfter and one stopped by
// CrashAt. Operations refused because the FS had crashed are not numbered.
// A test runs its workload once to learn the count, then loops k below it.
func (fs *FS) Ops() int {
	fs.mu.Lock()
	defer fs.unlock()
	return fs.ops
}

// Crashed reports whether the FS has crashed, and the error the crash ran
// into while rewriting the disk, if any.
func (fs *FS) Crashed() (bool, error) {
	fs.mu.Lock()
	defer fs.unlock()
	return fs.crashed, fs.crashErr
}

// begin numbers a mutating operation and says whether it may run. A non-nil
// error means it must not; short is then set if a WriteAt should write a
// prefix of its bytes first.
func (fs *FS) begin() (short *rand.Rand, err error) {
	if fs.crashed {
		return nil, ErrCrashed
	}
	k := fs.ops
	fs.ops++
	switch k {
	case fs.crashAt:
		fs.crashAt = -1
		fs.crashLocked(fs.crashCfg)
		return nil, ErrCrashed
	case fs.failAt:
		fs.failAt = -1
		return fs.failRand, fs.failErr
	}
	return nil, nil
}

// unlock releases mu, then runs the functions a crash left in fs.after, so
// that Mangle may take as long as it likes and use any FS but this one.
func (fs *FS) unlock() {
	after := fs.after
	fs.after = nil
	fs.mu.Unlock()
	for _, f := range after {
		f()
	}
}

// OpenFile opens a file like os.OpenFile. Opening with O_WRONLY, O_RDWR,
// O_CREATE or O_TRUNC is a mutating operation, and the file becomes tracked.
func (fs *FS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	fs.mu.Lock()
	defer fs.unlock()
	if flag&(os.O_WRONLY|os.O_RDWR|os.O_CREATE|os.O_TRUNC) == 0 {
		if fs.crashed {
			return nil, &os.PathError{Op: "open", Path: name, Err: ErrCrashed}
		}
		f, err := fs.base.OpenFile(name, flag, perm)
		if err != nil {
			return nil, err
		}
		return fs.newHandle(f, nil, name), nil
	}
	if _, err := fs.begin(); err != nil {
		return nil, &os.PathError{Op: "open", Path: name, Err: err}
	}
	dir, leaf, path, err := fs.parent(name)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: name, Err: err}
	}
	n, err := fs.lookup(dir, leaf, path)
	if err != nil {
		return nil, err
	}
	if n == nil && flag&os.O_CREATE != 0 && fs.fullNow() {
		if _, serr := fs.base.Stat(path); errors.Is(serr, os.ErrNotExist) {
			return nil, &os.PathError{Op: "open", Path: name, Err: errFull}
		}
	}
	trunc := flag&os.O_TRUNC != 0
	var prev int64 // size before the open
	var old []byte // content O_TRUNC throws away
	if n != nil && n.fd != nil {
		if n.tracked {
			prev = n.size
		} else if prev, err = fileSize(n.fd); err != nil {
			fs.settle(n)
			return nil, err
		}
		if trunc && prev > 0 {
			if old, err = readRange(n.fd, 0, prev); err != nil {
				fs.settle(n)
				return nil, err
			}
		}
	}
	f, err := fs.base.OpenFile(path, flag, perm)
	if err != nil {
		fs.settle(n)
		return nil, err
	}
	if n == nil {
		n = fs.newNode(false)
		fs.record(&dirOp{keys: []entry{{dir, leaf}}, before: []*node{nil}, after: []*node{n}})
		if n.fd, err = fs.base.OpenFile(path, os.O_RDONLY, 0); err != nil {
			f.Close()
			return nil, fmt.Errorf("crashfs: a tracked file must be readable: %w", err)
		}
	}
	if n.fd == nil { // not a regular file: pass it through untracked
		fs.settle(n)
		return fs.newHandle(f, nil, name), nil
	}
	n.tracked = true
	n.size = prev
	if trunc && prev > 0 {
		n.writes = append(n.writes, write{size: 0, prevSize: prev, old: old})
		n.size = 0
	}
	fs.dataDirs[dir] = struct{}{}
	n.handles++
	return fs.newHandle(f, n, name), nil
}

// Remove removes a file or an empty directory. It is a mutating operation.
func (fs *FS) Remove(name string) error {
	fs.mu.Lock()
	defer fs.unlock()
	if _, err := fs.begin(); err != nil {
		return &os.PathError{Op: "remove", Path: name, Err: err}
	}
	dir, leaf, path, err := fs.parent(name)
	if err != nil {
		return &os.PathError{Op: "remove", Path: name, Err: err}
	}
	n, err := fs.lookup(dir, leaf, path)
	if err != nil {
		return err
	}
	if err := fs.base.Remove(path); err != nil || n == nil {
		fs.settle(n)
		return err
	}
	fs.record(&dirOp{keys: []entry{{dir, leaf}}, before: []*node{n}, after: []*node{nil}})
	return nil
}

// RemoveAll removes a path and everything below it, entry by entry, so that
// a crash may bring any of them back. It is one mutating operation.
func (fs *FS) RemoveAll(name string) error {
	fs.mu.Lock()
	defer fs.unlock()
	if _, err := fs.begin(); err != nil {
		return &os.PathError{Op: "removeall", Path: name, Err: err}
	}
	dir, leaf, path, err := fs.parent(name)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return &os.PathError{Op: "removeall", Path: name, Err: err}
	}
	n, err := fs.lookup(dir, leaf, path)
	if err != nil || n == nil {
		return err
	}
	return fs.removeTree(dir, leaf, path, n)
}

func (fs *FS) removeTree(dir *node, name, path string, n *node) error {
	if n.dir {
		ents, err := fs.base.ReadDir(path)
		if err != nil {
			return err
		}
		for _, e := range ents {
			p := filepath.Join(path, e.Name())
			c, err := fs.lookup(n, e.Name(), p)
			if err != nil {
				return err
			}
			if c == nil {
				continue
			}
			if err := fs.removeTree(n, e.Name(), p, c); err != nil {
				return err
			}
		}
	}
	if err := fs.base.Remove(path); err != nil {
		fs.settle(n)
		return err
	}
	fs.record(&dirOp{keys: []entry{{dir, name}}, before: []*node{n}, after: []*node{nil}})
	return nil
}

// Rename renames a file or directory, replacing newpath if it exists. It is
// a mutating operation; it becomes durable, as a whole, at the first SyncDir
// of either directory.
func (fs *FS) Rename(oldpath, newpath string) error {
	fs.mu.Lock()
	defer fs.unlock()
	if _, err := fs.begin(); err != nil {
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: err}
	}
	odir, oleaf, op, err := fs.parent(oldpath)
	if err != nil {
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: err}
	}
	ndir, nleaf, np, err := fs.parent(newpath)
	if err != nil {
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: err}
	}
	src, err := fs.lookup(odir, oleaf, op)
	if err != nil {
		return err
	}
	dst, err := fs.lookup(ndir, nleaf, np)
	if err != nil {
		fs.settle(src)
		return err
	}
	if err := fs.base.Rename(op, np); err != nil || src == nil || src == dst {
		fs.settle(src, dst)
		return err
	}
	fs.record(&dirOp{
		keys:   []entry{{odir, oleaf}, {ndir, nleaf}},
		before: []*node{src, dst},
		after:  []*node{nil, src},
	})
	if src.tracked {
		fs.dataDirs[ndir] = struct{}{}
	}
	return nil
}

// MkdirAll creates a directory and its parents. It is a mutating operation;
// each directory it creates is an unsynced entry of its parent.
func (fs *FS) MkdirAll(dir string, perm os.FileMode) error {
	fs.mu.Lock()
	defer fs.unlock()
	if _, err := fs.begin(); err != nil {
		return &os.PathError{Op: "mkdir", Path: dir, Err: err}
	}
	path, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	names := splitPath(path)
	n, p := fs.root, "/"
	for len(names) > 0 {
		c, err := fs.lookup(n, names[0], filepath.Join(p, names[0]))
		if err != nil {
			return err
		}
		if c == nil {
			break
		}
		if !c.dir { // the base reports it
			fs.settle(c)
			break
		}
		n, p, names = c, filepath.Join(p, names[0]), names[1:]
	}
	if len(names) > 0 && fs.fullNow() {
		return &os.PathError{Op: "mkdir", Path: dir, Err: errFull}
	}
	err = fs.base.MkdirAll(path, perm)
	for _, name := range names { // record what the base created
		p = filepath.Join(p, name)
		if st, serr := fs.base.Stat(p); serr != nil || !st.IsDir() {
			break
		}
		c := fs.newNode(true)
		fs.record(&dirOp{keys: []entry{{n, name}}, before: []*node{nil}, after: []*node{c}})
		n = c
	}
	return err
}

// SyncDir makes the directory's entries durable. It is a mutating
// operation.
func (fs *FS) SyncDir(dir string) error {
	fs.mu.Lock()
	defer fs.unlock()
	if _, err := fs.begin(); err != nil {
		return &os.PathError{Op: "syncdir", Path: dir, Err: err}
	}
	path, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	d, err := fs.dirNode(path)
	if err != nil {
		return &os.PathError{Op: "syncdir", Path: dir, Err: err}
	}
	if err := fs.base.SyncDir(path); err != nil {
		return err
	}
	fs.syncDirLocked(d)
	return nil
}

// ReadDir lists a directory as it is now.
func (fs *FS) ReadDir(dir string) ([]os.DirEntry, error) {
	fs.mu.Lock()
	defer fs.unlock()
	if fs.crashed {
		return nil, &os.PathError{Op: "readdir", Path: dir, Err: ErrCrashed}
	}
	return fs.base.ReadDir(dir)
}

// Stat describes a file as it is now.
func (fs *FS) Stat(name string) (os.FileInfo, error) {
	fs.mu.Lock()
	defer fs.unlock()
	if fs.crashed {
		return nil, &os.PathError{Op: "stat", Path: name, Err: ErrCrashed}
	}
	return fs.base.Stat(name)
}

// Lock takes the base FS's lock. It is not a mutating operation and the
// lock file is not modelled; a crash releases the lock.
func (fs *FS) Lock(name string) (io.Closer, error) {
	fs.mu.Lock()
	defer fs.unlock()
	if fs.crashed {
		return nil, &os.PathError{Op: "lock", Path: name, Err: ErrCrashed}
	}
	c, err := fs.base.Lock(name)
	if err != nil {
		return nil, err
	}
	l := &lockFile{fs: fs, c: c, name: name}
	fs.locks[l] = struct{}{}
	return l, nil
}

// lockFile is a lock taken through the FS.
type lockFile struct {
	fs   *FS
	c    io.Closer // nil once released
	name string
}

func (l *lockFile) Close() error {
	l.fs.mu.Lock()
	defer l.fs.unlock()
	if l.fs.crashed {
		return &os.PathError{Op: "unlock", Path: l.name, Err: ErrCrashed}
	}
	if l.c == nil {
		return &os.PathError{Op: "unlock", Path: l.name, Err: os.ErrClosed}
	}
	delete(l.fs.locks, l)
	err := l.c.Close()
	l.c = nil
	return err
}
