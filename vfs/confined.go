package vfs

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// ErrSymlink is returned, wrapped in an *os.PathError, for a symbolic link
// where Confined expected a file or a folder: Confined never follows one.
var ErrSymlink = errors.New("a symbolic link, which logfs never follows in a data directory")

// ErrNotRegular is returned, wrapped in an *os.PathError, for a FIFO,
// socket or device where Confined expected a file.
var ErrNotRegular = errors.New("not a regular file (a FIFO, socket or device), which logfs never opens in a data directory")

// ErrHardLink is returned, wrapped in an *os.PathError, when Confined is
// asked to open for writing a file that has other names (hard links):
// writing to it would change a file outside the data directory, or one
// someone else owns.
var ErrHardLink = errors.New("a file with other hard links, which logfs never writes in a data directory")

// ErrFolder is returned, wrapped in an *os.PathError, for a folder where
// Confined expected a file.
var ErrFolder = errors.New("a folder, where logfs keeps a file")

// MovedAsideError is what Confined reports to onPlanted when it renamed a
// folder out of the way of a file written from scratch at its name. A
// folder may hold someone's files: it is moved, never removed.
type MovedAsideError struct {
	To string // the folder's new path
}

func (e *MovedAsideError) Error() string {
	return "a folder, where logfs keeps a file: moved aside to " + e.To
}

func (e *MovedAsideError) Unwrap() error { return ErrFolder }

// PlantedSuffix is added to the name of a folder that Confined moves
// aside ("00000000000000000000.index.planted", then ".planted.2", …). No
// name logfs or Kafka gives a file or a partition folder ends so.
const PlantedSuffix = ".planted"

// IsPlanted reports whether err is Confined's refusal of a link, FIFO,
// socket, device, hard-linked file or folder where a file belongs: an
// entry someone planted, which callers treat as absent.
func IsPlanted(err error) bool {
	return errors.Is(err, ErrSymlink) || errors.Is(err, ErrNotRegular) || errors.Is(err, ErrHardLink) ||
		errors.Is(err, ErrFolder)
}

// Confined returns the operating system's file system, confined to the
// folder root: below root, nothing is ever followed out of it.
//
//   - Every path below root is resolved from root's descriptor one folder
//     at a time (openat2 with RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS, or on
//     kernels without it openat with O_NOFOLLOW|O_DIRECTORY per folder), so
//     a symbolic link anywhere below root, in the middle of a path or at
//     its end, fails with ErrSymlink; no check-then-use window is left.
//   - OpenFile opens regular files only: a FIFO, socket or device fails
//     with ErrNotRegular (the open is non-blocking, so a FIFO never
//     hangs it), and a write open of a file with other hard links fails
//     with ErrHardLink. O_TRUNC is applied only once the file is known to
//     be one of ours.
//   - OpenFile opens no folder: one where a file is asked for fails with
//     ErrFolder.
//   - A create that truncates (O_CREATE|O_TRUNC: a file written from
//     scratch, such as a rebuilt index or a temporary file) replaces a
//     link, FIFO, socket, device or file with other hard links at its
//     name: the entry is unlinked and a new file made in its place. The
//     link's target is never opened, the hard link's file never written.
//     A folder there is renamed aside (PlantedSuffix), never removed; so
//     is one that Rename would move a file onto.
//   - ReadDir lists regular files and folders only: links and other
//     entries are left out, so that the layers above treat them as absent.
//   - Remove, RemoveAll and Rename act on the entries themselves, as
//     unlink(2) and rename(2) do: a link is removed or renamed, never its
//     target, and RemoveAll never descends through one.
//   - Stat describes the entry itself; for a link it fails with ErrSymlink.
//
// Every link or other entry met is passed once to onPlanted (which may be
// nil), so that the caller can report it: by its own path (a link met in
// the middle of a path, not the path through it), spelled as root is.
//
// root itself, and paths that are not below it, are handled as Default
// handles them: root is the operator's choice and may be reached through
// links.
func Confined(root string, onPlanted func(path string, err error)) FS {
	return &confined{root: filepath.Clean(root), onPlanted: onPlanted}
}

type confined struct {
	root      string
	onPlanted func(path string, err error)
	reported  sync.Map // path → struct{}
}

// noOpenat2 is set once openat2(2) turned out to be missing (ENOSYS, or a
// seccomp filter that refuses it).
var noOpenat2 atomic.Bool

// rel returns name relative to root, and whether name is strictly below
// it; for root itself, "." and false.
func (c *confined) rel(name string) (string, bool) {
	root, n := c.root, filepath.Clean(name)
	r, err := filepath.Rel(root, n)
	if (err != nil || isUp(r)) && !(filepath.IsAbs(root) && filepath.IsAbs(n)) {
		// A relative path is relative to the working directory, which
		// the two paths may name only in part: "x" from root/p is below
		// the root "..", and "../data/p/x" from root is below the root
		// ".", though neither says so until both are made absolute. Taken
		// for outside, such a name would be opened as Default opens it,
		// through links.
		if root, err = filepath.Abs(root); err != nil {
			return "", false
		}
		if n, err = filepath.Abs(n); err != nil {
			return "", false
		}
		r, err = filepath.Rel(root, n)
	}
	if err != nil || isUp(r) {
		return "", false
	}
	return r, r != "."
}

// isUp says whether the relative path r leads out of where it starts.
func isUp(r string) bool {
	return r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator))
}

func (c *confined) planted(path string, err error) {
	if c.onPlanted == nil {
		return
	}
	// One entry is reported once, by one name, however the paths that
	// met it spelled it ("data/p/x", "/abs/data/p/x", "data/p/./x").
	if rel, below := c.rel(path); below {
		path = filepath.Join(c.root, rel)
	}
	key := path // a folder moved aside is told apart from its refusal
	if aside := (*MovedAsideError)(nil); errors.As(err, &aside) {
		key += "\x00" + aside.To
	}
	if _, dup := c.reported.LoadOrStore(key, struct{}{}); !dup {
		c.onPlanted(path, err)
	}
}

// pathErr wraps errno for op on path, as ErrSymlink when it says a link
// was met (ELOOP: nothing is followed, so a loop means a link).
func (c *confined) pathErr(op, path string, err error) error {
	switch {
	case err == unix.ELOOP:
		c.planted(c.linkOnTheWayTo(path), ErrSymlink)
		return &os.PathError{Op: op, Path: path, Err: ErrSymlink}
	case err == ErrNotRegular || err == ErrSymlink || err == ErrFolder:
		c.planted(path, err)
	}
	return &os.PathError{Op: op, Path: path, Err: err}
}

func retry(f func() error) error {
	for {
		if err := f(); err != unix.EINTR {
			return err
		}
	}
}

// openRoot opens root, following links to it (see Confined), as a path
// only: like a path walk, it needs search permission, not read.
func (c *confined) openRoot() (int, error) {
	var fd int
	err := retry(func() (err error) {
		fd, err = unix.Open(c.root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		return err
	})
	return fd, err
}

// linkOnTheWayTo returns the path of the first link on the way from root
// to name: the entry someone planted, which is what is reported, once,
// rather than each path below it that met it. It returns name when no
// link is found (it may have gone since).
func (c *confined) linkOnTheWayTo(name string) string {
	rel, below := c.rel(name)
	if !below {
		return name
	}
	rootfd, err := c.openRoot()
	if err != nil {
		return name
	}
	defer unix.Close(rootfd)
	if n := linkOnTheWay(rootfd, rel); n > 0 {
		return filepath.Join(append([]string{c.root}, splitRel(rel)[:n]...)...)
	}
	return name
}

// openBelow opens rel (not ".") below the descriptor dirfd with flags,
// following no link on the way or at the end.
func openBelow(dirfd int, rel string, flags int, perm uint32) (int, error) {
	fd, err := openBelowOnce(dirfd, rel, flags, perm)
	if err == unix.ENOTDIR && linkOnTheWay(dirfd, rel) > 0 {
		err = unix.ELOOP // O_DIRECTORY|O_NOFOLLOW on a link says ENOTDIR
	}
	return fd, err
}

// linkOnTheWay returns how many elements of rel lead from dirfd to the
// first link on the way (0: none). Each element is looked at from the
// folder before it, opened without following anything, so that nothing
// past a link is looked at, even one swapped in meanwhile.
func linkOnTheWay(dirfd int, rel string) int {
	fd := dirfd
	defer func() {
		if fd != dirfd {
			unix.Close(fd)
		}
	}()
	for i, p := range splitRel(rel) {
		var next int
		err := retry(func() (err error) {
			next, err = unix.Openat(fd, p, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			return err
		})
		if err != nil {
			if st, err := lstatAt(fd, p); err == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
				return i + 1
			}
			return 0
		}
		if fd != dirfd {
			unix.Close(fd)
		}
		fd = next
	}
	return 0
}

func openBelowOnce(dirfd int, rel string, flags int, perm uint32) (int, error) {
	flags |= unix.O_CLOEXEC | unix.O_NOFOLLOW
	if !noOpenat2.Load() {
		var fd int
		how := unix.OpenHow{Flags: uint64(flags), Mode: uint64(perm),
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
		if flags&unix.O_CREAT == 0 {
			how.Mode = 0
		}
		err := retry(func() (err error) {
			fd, err = unix.Openat2(dirfd, rel, &how)
			return err
		})
		if err != unix.ENOSYS && err != unix.EPERM {
			return fd, err
		}
		if err == unix.ENOSYS {
			noOpenat2.Store(true)
		}
		// EPERM may be a seccomp filter's answer or a real one: the walk
		// below gives the real one.
	}
	parts := splitRel(rel)
	fd := dirfd
	for i, p := range parts {
		f := unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
		var m uint32
		if i == len(parts)-1 {
			f, m = flags, perm
		}
		var next int
		err := retry(func() (err error) {
			next, err = unix.Openat(fd, p, f, m)
			return err
		})
		if fd != dirfd {
			unix.Close(fd)
		}
		if err != nil {
			return -1, err
		}
		fd = next
	}
	return fd, nil
}

func splitRel(rel string) []string {
	var parts []string
	for rel != "" {
		i := 0
		for i < len(rel) && rel[i] != filepath.Separator {
			i++
		}
		if p := rel[:i]; p != "" && p != "." {
			parts = append(parts, p)
		}
		if i == len(rel) {
			break
		}
		rel = rel[i+1:]
	}
	return parts
}

// parent opens the folder that holds rel (below root, or root itself) and
// returns it and rel's last element.
func (c *confined) parent(rel string) (int, string, error) {
	rootfd, err := c.openRoot()
	if err != nil {
		return -1, "", err
	}
	dir, base := filepath.Split(rel)
	if dir = filepath.Clean(dir); dir == "." {
		return rootfd, base, nil
	}
	fd, err := openBelow(rootfd, dir, unix.O_PATH|unix.O_DIRECTORY, 0)
	unix.Close(rootfd)
	return fd, base, err
}

// lstatAt describes the entry base in dirfd without following it.
func lstatAt(dirfd int, base string) (unix.Stat_t, error) {
	var st unix.Stat_t
	err := retry(func() error { return unix.Fstatat(dirfd, base, &st, unix.AT_SYMLINK_NOFOLLOW) })
	return st, err
}

func (c *confined) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	rel, below := c.rel(name)
	if !below {
		return Default.OpenFile(name, flag, perm)
	}
	dirfd, base, err := c.parent(rel)
	if err != nil {
		return nil, c.pathErr("open", name, err)
	}
	defer unix.Close(dirfd)
	fromScratch := flag&(os.O_CREATE|os.O_TRUNC) == os.O_CREATE|os.O_TRUNC
	if st, err := lstatAt(dirfd, base); err == nil {
		var planted error
		switch kind := st.Mode & unix.S_IFMT; {
		case kind == unix.S_IFLNK:
			planted = ErrSymlink
		case kind == unix.S_IFDIR:
			if flag&(os.O_CREATE|os.O_EXCL) != os.O_CREATE|os.O_EXCL { // else EEXIST, as for any entry
				planted = ErrFolder
			}
		case kind != unix.S_IFREG:
			planted = ErrNotRegular
		case kind == unix.S_IFREG && st.Nlink > 1 && fromScratch:
			// A file with other names is replaced too, not refused (a
			// write in place is, below): a new one needs none of its
			// bytes, its other names keep them, and refusing would fail
			// every write of a checkpoint whose .tmp someone linked.
			planted = ErrHardLink
		}
		if planted != nil {
			if !fromScratch {
				return nil, c.pathErr("open", name, planted)
			}
			// A file written from scratch takes the name back: the link
			// (or FIFO…) goes, its target is never opened; a folder is
			// moved aside.
			if planted == ErrFolder {
				if err := c.moveAside(dirfd, base, name); err != nil {
					return nil, c.pathErr("open", name, err)
				}
			} else {
				c.planted(name, planted)
				if err := retry(func() error { return unix.Unlinkat(dirfd, base, 0) }); err != nil && err != unix.ENOENT {
					return nil, c.pathErr("open", name, err)
				}
			}
		}
	}
	var fd int
	err = retry(func() (err error) {
		fd, err = unix.Openat(dirfd, base, (flag&^os.O_TRUNC)|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, uint32(perm.Perm()))
		return err
	})
	if err == unix.ENXIO { // a FIFO opened for writing with no reader
		err = ErrNotRegular
	}
	if err != nil {
		return nil, c.pathErr("open", name, err)
	}
	fail := func(err error) (File, error) {
		unix.Close(fd)
		return nil, c.pathErr("open", name, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fail(err)
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
	case unix.S_IFDIR: // made there since the look above
		return fail(ErrFolder)
	default:
		return fail(ErrNotRegular)
	}
	if flag&(os.O_WRONLY|os.O_RDWR) != 0 && st.Nlink > 1 {
		c.planted(name, ErrHardLink)
		return fail(ErrHardLink)
	}
	if fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0); err == nil {
		_, _ = unix.FcntlInt(uintptr(fd), unix.F_SETFL, fl&^unix.O_NONBLOCK)
	}
	if flag&os.O_TRUNC != 0 && st.Size != 0 {
		if err := retry(func() error { return unix.Ftruncate(fd, 0) }); err != nil {
			return fail(err)
		}
	}
	return osFile{os.NewFile(uintptr(fd), name)}, nil
}

func (c *confined) Remove(name string) error {
	rel, below := c.rel(name)
	if !below {
		return Default.Remove(name)
	}
	dirfd, base, err := c.parent(rel)
	if err != nil {
		return c.pathErr("remove", name, err)
	}
	defer unix.Close(dirfd)
	e := retry(func() error { return unix.Unlinkat(dirfd, base, 0) })
	if e == nil {
		return nil
	}
	e1 := retry(func() error { return unix.Unlinkat(dirfd, base, unix.AT_REMOVEDIR) })
	if e1 == nil {
		return nil
	}
	if e1 != unix.ENOTDIR {
		e = e1
	}
	return &os.PathError{Op: "remove", Path: name, Err: e}
}

func (c *confined) RemoveAll(name string) error {
	rel, below := c.rel(name)
	if !below {
		return Default.RemoveAll(name)
	}
	dirfd, base, err := c.parent(rel)
	if err == unix.ENOENT {
		return nil
	}
	if err != nil {
		return c.pathErr("removeall", name, err)
	}
	defer unix.Close(dirfd)
	if err := removeAllAt(dirfd, base); err != nil {
		return &os.PathError{Op: "removeall", Path: name, Err: err}
	}
	return nil
}

// removeAllAt removes base in dirfd and, for a folder, everything in it,
// never through a link.
func removeAllAt(dirfd int, base string) error {
	err := retry(func() error { return unix.Unlinkat(dirfd, base, 0) })
	if err == nil || err == unix.ENOENT {
		return nil
	}
	if err != unix.EISDIR && err != unix.EPERM {
		return err
	}
	var fd int
	if err := retry(func() (err error) {
		fd, err = unix.Openat(dirfd, base, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		return err
	}); err != nil {
		if err == unix.ENOENT {
			return nil
		}
		return err
	}
	d := os.NewFile(uintptr(fd), base)
	names, err := d.Readdirnames(-1)
	if err == nil {
		for _, n := range names {
			if err = removeAllAt(fd, n); err != nil {
				break
			}
		}
	}
	d.Close()
	if err != nil {
		return err
	}
	err = retry(func() error { return unix.Unlinkat(dirfd, base, unix.AT_REMOVEDIR) })
	if err == unix.ENOENT {
		return nil
	}
	return err
}

func (c *confined) Rename(oldpath, newpath string) error {
	oldRel, oldBelow := c.rel(oldpath)
	newRel, newBelow := c.rel(newpath)
	if !oldBelow || !newBelow {
		return Default.Rename(oldpath, newpath)
	}
	// lerr reports the link met on the way to path, the side that met it.
	lerr := func(path string, err error) error {
		if err == unix.ELOOP {
			c.planted(c.linkOnTheWayTo(path), ErrSymlink)
			err = ErrSymlink
		}
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: err}
	}
	ofd, obase, err := c.parent(oldRel)
	if err != nil {
		return lerr(oldpath, err)
	}
	defer unix.Close(ofd)
	nfd, nbase, err := c.parent(newRel)
	if err != nil {
		return lerr(newpath, err)
	}
	defer unix.Close(nfd)
	// A file renamed onto a folder (a checkpoint's temporary file, say)
	// moves the folder aside first, as a create from scratch does.
	if st, err := lstatAt(nfd, nbase); err == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
		if ost, err := lstatAt(ofd, obase); err == nil && ost.Mode&unix.S_IFMT != unix.S_IFDIR {
			if err := c.moveAside(nfd, nbase, newpath); err != nil {
				return lerr(newpath, err)
			}
		}
	}
	if err := retry(func() error { return unix.Renameat(ofd, obase, nfd, nbase) }); err != nil {
		return lerr(newpath, err)
	}
	return nil
}

// maxNameLength is NAME_MAX, the longest name of an entry.
const maxNameLength = 255

// moveAside renames the folder base in dirfd (spelled name) to the first
// free name of base+PlantedSuffix, base+PlantedSuffix+".2", …, cut short to
// fit maxNameLength bytes, and reports it. It never replaces an entry.
func (c *confined) moveAside(dirfd int, base, name string) error {
	for i := 1; i <= 100; i++ {
		suffix := PlantedSuffix
		if i > 1 {
			suffix += "." + strconv.Itoa(i)
		}
		to := base
		if len(to)+len(suffix) > maxNameLength {
			to = to[:maxNameLength-len(suffix)]
		}
		to += suffix
		err := retry(func() error { return unix.Renameat2(dirfd, base, dirfd, to, unix.RENAME_NOREPLACE) })
		if err == unix.EINVAL || err == unix.ENOSYS { // a file system without RENAME_NOREPLACE
			if _, lerr := lstatAt(dirfd, to); lerr == nil {
				err = unix.EEXIST
			} else {
				err = retry(func() error { return unix.Renameat(dirfd, base, dirfd, to) })
			}
		}
		switch err {
		case nil:
			c.planted(name, &MovedAsideError{To: filepath.Join(filepath.Dir(name), to)})
			return nil
		case unix.EEXIST, unix.ENOTEMPTY:
			continue
		}
		return err
	}
	return ErrFolder
}

func (c *confined) MkdirAll(dir string, perm os.FileMode) error {
	rel, below := c.rel(dir)
	if !below {
		return Default.MkdirAll(dir, perm)
	}
	if err := os.MkdirAll(c.root, perm); err != nil {
		return err
	}
	fd, err := c.openRoot()
	if err != nil {
		return err
	}
	for _, p := range splitRel(rel) {
		err := retry(func() error { return unix.Mkdirat(fd, p, uint32(perm.Perm())) })
		if err != nil && err != unix.EEXIST {
			unix.Close(fd)
			return c.pathErr("mkdir", dir, err)
		}
		var next int
		err = retry(func() (err error) {
			next, err = unix.Openat(fd, p, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			return err
		})
		if err == unix.ENOTDIR && linkOnTheWay(fd, p) > 0 {
			err = unix.ELOOP
		}
		unix.Close(fd)
		if err != nil {
			return c.pathErr("mkdir", dir, err)
		}
		fd = next
	}
	unix.Close(fd)
	return nil
}

// openDir opens dir, below root or root itself, to read or sync it.
func (c *confined) openDir(op, dir string) (*os.File, bool, error) {
	rel, below := c.rel(dir)
	if !below {
		f, err := os.Open(dir)
		return f, false, err
	}
	rootfd, err := c.openRoot()
	if err != nil {
		return nil, true, &os.PathError{Op: op, Path: dir, Err: err}
	}
	fd, err := openBelow(rootfd, rel, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NONBLOCK, 0)
	unix.Close(rootfd)
	if err != nil {
		return nil, true, c.pathErr(op, dir, err)
	}
	return os.NewFile(uintptr(fd), dir), true, nil
}

func (c *confined) ReadDir(dir string) ([]os.DirEntry, error) {
	if r, below := c.rel(dir); !below && r != "." {
		return Default.ReadDir(dir)
	}
	d, _, err := c.openDir("readdir", dir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	all, err := d.ReadDir(-1)
	if err != nil {
		return nil, err
	}
	out := all[:0]
	for _, e := range all {
		switch t := e.Type(); {
		case t&os.ModeSymlink != 0:
			c.planted(filepath.Join(dir, e.Name()), ErrSymlink)
		case t.IsRegular() || t.IsDir():
			out = append(out, e)
		default:
			c.planted(filepath.Join(dir, e.Name()), ErrNotRegular)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out, nil
}

func (c *confined) Stat(name string) (os.FileInfo, error) {
	rel, below := c.rel(name)
	if !below {
		return Default.Stat(name)
	}
	rootfd, err := c.openRoot()
	if err != nil {
		return nil, &os.PathError{Op: "stat", Path: name, Err: err}
	}
	fd, err := openBelow(rootfd, rel, unix.O_PATH, 0)
	unix.Close(rootfd)
	if err != nil {
		return nil, c.pathErr("stat", name, err)
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Mode()&os.ModeSymlink != 0 { // O_PATH|O_NOFOLLOW opens a link itself
		return nil, c.pathErr("stat", name, ErrSymlink)
	}
	return st, nil
}

func (c *confined) SyncDir(dir string) error {
	if _, below := c.rel(dir); !below {
		return Default.SyncDir(dir)
	}
	d, _, err := c.openDir("sync", dir)
	if err != nil {
		return err
	}
	return syncClose(d)
}

func (c *confined) Lock(name string) (io.Closer, error) {
	rel, below := c.rel(name)
	if !below {
		return Default.Lock(name)
	}
	dirfd, base, err := c.parent(rel)
	if err != nil {
		return nil, c.pathErr("lock", name, err)
	}
	defer unix.Close(dirfd)
	flags, perm := unix.O_RDWR|unix.O_CREAT|unix.O_NONBLOCK, uint32(0o600)
	if st, err := lstatAt(dirfd, base); err == nil {
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			flags, perm = unix.O_RDONLY|unix.O_DIRECTORY, 0
		case unix.S_IFREG:
		case unix.S_IFLNK:
			return nil, c.pathErr("lock", name, ErrSymlink)
		default:
			return nil, c.pathErr("lock", name, ErrNotRegular)
		}
	}
	var fd int
	err = retry(func() (err error) {
		fd, err = unix.Openat(dirfd, base, flags|unix.O_NOFOLLOW|unix.O_CLOEXEC, perm)
		return err
	})
	if err == unix.ENXIO {
		err = ErrNotRegular
	}
	if err != nil {
		return nil, c.pathErr("lock", name, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG && st.Mode&unix.S_IFMT != unix.S_IFDIR {
		unix.Close(fd)
		if err == nil {
			err = ErrNotRegular
		}
		return nil, c.pathErr("lock", name, err)
	}
	return lockOpened(os.NewFile(uintptr(fd), name), name)
}
