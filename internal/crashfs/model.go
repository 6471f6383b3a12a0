package crashfs

import (
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/logfs/logfs/vfs"
)

// node is a file or directory the model has met. Directories are met when a
// path is resolved through them; files when they are opened for writing or
// named by a directory operation. A file node the model no longer needs (no
// handle, no unsynced write, no pending operation) is forgotten, and the
// file counts as durable again.
type node struct {
	seq int // order of creation, for a deterministic crash
	dir bool

	// parent and name are where the node is on disk now; parent is nil for
	// the root and for a node that has been unlinked.
	parent *node
	name   string
	// children holds a directory's entries that the model has met; the
	// names it has not met are on disk only and count as durable.
	children map[string]*node

	// fd is a private read-only handle on a regular file, open from the
	// moment the model meets the file, so that a crash can read it back
	// even after it was unlinked. nil for other kinds of file.
	fd      vfs.File
	tracked bool    // opened for writing through the FS
	size    int64   // tracked: the size now
	writes  []write // tracked: unsynced writes, oldest first
	handles int     // open Files on the node
	refs    int     // mentions in pending directory operations
}

// write is an unsynced WriteAt or Truncate of a tracked file, with what it
// replaced so that it can be rolled back.
type write struct {
	off  int64
	data []byte // bytes written at off; nil for a Truncate
	size int64  // a Truncate's new size

	prevSize int64  // size before
	old      []byte // bytes replaced: at off for a write, at size for a Truncate
}

// redo applies w to the content b.
func (w *write) redo(b []byte) []byte {
	if w.data == nil {
		return resize(b, w.size)
	}
	return writeAt(b, w.data, w.off)
}

// undo rolls w back from the content b it left.
func (w *write) undo(b []byte) []byte {
	b = resize(b, w.prevSize)
	if len(w.old) == 0 { // an append, or a Truncate that grew the file
		return b
	}
	at := w.off
	if w.data == nil {
		at = w.size
	}
	copy(b[at:], w.old)
	return b
}

// writeAt writes p at off in b, growing b with zeros as needed.
func writeAt(b, p []byte, off int64) []byte {
	if len(p) == 0 {
		return b
	}
	if end := off + int64(len(p)); end > int64(len(b)) {
		b = resize(b, end)
	}
	copy(b[off:], p)
	return b
}

// resize cuts b or grows it with zeros.
func resize(b []byte, n int64) []byte {
	if n <= int64(len(b)) {
		return b[:n]
	}
	return append(b, make([]byte, n-int64(len(b)))...)
}

// entry is a name in a directory.
type entry struct {
	dir  *node
	name string
}

// dirOp is a directory operation not yet durable: it changed each entry in
// keys from the node in before to the node in after (nil: no entry).
type dirOp struct {
	keys   []entry
	before []*node
	after  []*node
}

// path returns where n is on disk now.
func (n *node) path() string {
	if n.parent == nil {
		return "/"
	}
	return filepath.Join(n.parent.path(), n.name)
}

func (fs *FS) newNode(dir bool) *node {
	fs.seq++
	n := &node{seq: fs.seq, dir: dir}
	if dir {
		n.children = make(map[string]*node)
	} else {
		fs.files[n] = struct{}{}
	}
	return n
}

// record notes that op has just been done on disk: it updates the live
// entries and appends op to the pending operations.
func (fs *FS) record(op *dirOp) {
	for i, k := range op.keys {
		if b := op.before[i]; b != nil && b.parent == k.dir && b.name == k.name {
			delete(k.dir.children, k.name)
			b.parent, b.name = nil, ""
		}
	}
	for i, k := range op.keys {
		if a := op.after[i]; a != nil {
			k.dir.children[k.name] = a
			a.parent, a.name = k.dir, k.name
		}
	}
	for _, n := range op.nodes() {
		n.refs++
	}
	fs.pending = append(fs.pending, op)
}

// nodes returns every node op mentions, once per mention.
func (op *dirOp) nodes() []*node {
	var ns []*node
	for _, list := range [][]*node{op.before, op.after} {
		for _, n := range list {
			if n != nil {
				ns = append(ns, n)
			}
		}
	}
	return ns
}

// syncDirLocked makes durable every pending operation on an entry of d, and
// every earlier operation on an entry one of those touches, so that the
// operations still pending on each entry are the latest ones.
func (fs *FS) syncDirLocked(d *node) {
	durable := make(map[entry]bool)
	mark := make([]bool, len(fs.pending))
	for i := len(fs.pending) - 1; i >= 0; i-- {
		op := fs.pending[i]
		for _, k := range op.keys {
			mark[i] = mark[i] || k.dir == d || durable[k]
		}
		if mark[i] {
			for _, k := range op.keys {
				durable[k] = true
			}
		}
	}
	var freed []*node
	kept := fs.pending[:0]
	for i, op := range fs.pending {
		if !mark[i] {
			kept = append(kept, op)
			continue
		}
		for _, n := range op.nodes() {
			n.refs--
			freed = append(freed, n)
		}
	}
	clear(fs.pending[len(kept):])
	fs.pending = kept
	fs.settle(freed...)
}

// settle forgets the file nodes among ns that the model no longer needs.
func (fs *FS) settle(ns ...*node) {
	for _, n := range ns {
		if n == nil || n.dir || n.handles > 0 || n.refs > 0 || len(n.writes) > 0 {
			continue
		}
		if _, ok := fs.files[n]; !ok {
			continue
		}
		if n.fd != nil {
			n.fd.Close()
			n.fd = nil
		}
		if n.parent != nil {
			delete(n.parent.children, n.name)
			n.parent, n.name = nil, ""
		}
		n.tracked = false
		delete(fs.files, n)
	}
}

// parent resolves the directory holding name, and returns it with the last
// element and the absolute path.
func (fs *FS) parent(name string) (dir *node, leaf, path string, err error) {
	if path, err = filepath.Abs(name); err != nil {
		return nil, "", "", err
	}
	if path == "/" {
		return nil, "", "", errors.New("crashfs: the root has no parent")
	}
	dir, err = fs.dirNode(filepath.Dir(path))
	return dir, filepath.Base(path), path, err
}

// dirNode resolves the directory at path, an absolute clean path.
func (fs *FS) dirNode(path string) (*node, error) {
	n, p := fs.root, "/"
	for _, name := range splitPath(path) {
		p = filepath.Join(p, name)
		c, err := fs.lookup(n, name, p)
		if err != nil {
			return nil, err
		}
		if c == nil {
			return nil, &os.PathError{Op: "lookup", Path: p, Err: os.ErrNotExist}
		}
		if !c.dir {
			fs.settle(c)
			return nil, &os.PathError{Op: "lookup", Path: p, Err: syscall.ENOTDIR}
		}
		n = c
	}
	return n, nil
}

// lookup returns the node at the entry name of dir, whose path is path,
// meeting it if the model had not: nil if there is no such entry.
func (fs *FS) lookup(dir *node, name, path string) (*node, error) {
	if n, ok := dir.children[name]; ok {
		return n, nil
	}
	st, err := fs.base.Stat(path)
	if errors.Is(err, iofs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	n := fs.newNode(st.IsDir())
	if st.Mode().IsRegular() {
		if n.fd, err = fs.base.OpenFile(path, os.O_RDONLY, 0); err != nil {
			delete(fs.files, n)
			return nil, fmt.Errorf("crashfs: a file the model meets must be readable: %w", err)
		}
	}
	dir.children[name] = n
	n.parent, n.name = dir, name
	return n, nil
}

func splitPath(path string) []string {
	if path == "/" {
		return nil
	}
	return strings.Split(strings.TrimPrefix(path, "/"), "/")
}

// readRange reads [off, end) of f.
func readRange(f vfs.File, off, end int64) ([]byte, error) {
	b := make([]byte, end-off)
	n, err := f.ReadAt(b, off)
	if err != nil && !(errors.Is(err, io.EOF) && n == len(b)) {
		return nil, fmt.Errorf("crashfs: read back %s: %w", f.Name(), err)
	}
	return b, nil
}

func readAll(f vfs.File) ([]byte, error) {
	size, err := fileSize(f)
	if err != nil {
		return nil, err
	}
	return readRange(f, 0, size)
}

func fileSize(f vfs.File) (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// Check verifies the model against itself and the disk: every entry the
// model knows is on disk with the right kind, every tracked file has the
// size the model expects, and the pending directory operations agree with
// the live entries and the reference counts. It fails when something other
// than the FS changed what the FS tracks. Tests run it after a workload.
func (fs *FS) Check() error {
	fs.mu.Lock()
	defer fs.unlock()
	if fs.crashed {
		return ErrCrashed
	}
	refs := make(map[*node]int)
	last := make(map[entry]*node)
	for _, op := range fs.pending {
		for i, k := range op.keys {
			last[k] = op.after[i]
		}
		for _, n := range op.nodes() {
			refs[n]++
		}
	}
	for k, n := range last {
		if live := k.dir.children[k.name]; live != n {
			return fmt.Errorf("crashfs: %s: pending operations leave it %v, the model has %v", filepath.Join(k.dir.path(), k.name), n != nil, live != nil)
		}
	}
	for n := range fs.files {
		if n.refs != refs[n] {
			return fmt.Errorf("crashfs: %s: %d references, want %d", n.path(), n.refs, refs[n])
		}
		if n.tracked && n.fd == nil {
			return fmt.Errorf("crashfs: %s: tracked without a handle", n.path())
		}
		if n.handles == 0 && n.refs == 0 && len(n.writes) == 0 {
			return fmt.Errorf("crashfs: %s: held but not needed", n.path())
		}
	}
	return fs.checkTree(fs.root)
}

func (fs *FS) checkTree(d *node) error {
	for name, c := range d.children {
		p := filepath.Join(d.path(), name)
		if c.parent != d || c.name != name {
			return fmt.Errorf("crashfs: %s: node thinks it is at %s", p, c.path())
		}
		st, err := fs.base.Stat(p)
		if err != nil {
			return fmt.Errorf("crashfs: %s: in the model but: %w", p, err)
		}
		if st.IsDir() != c.dir {
			return fmt.Errorf("crashfs: %s: directory is %v on disk, %v in the model", p, st.IsDir(), c.dir)
		}
		if c.tracked && st.Size() != c.size {
			return fmt.Errorf("crashfs: %s: size %d on disk, %d in the model", p, st.Size(), c.size)
		}
		if c.dir {
			if err := fs.checkTree(c); err != nil {
				return err
			}
		}
	}
	return nil
}
