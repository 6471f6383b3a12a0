package vfs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// A plantKind is something a hostile user can put where logfs expects a
// regular file.
type plantKind struct {
	name    string
	plant   func(t *testing.T, e *advEnv, at string)
	planted error // what Confined refuses it as (for a write, for hardLink)
	link    bool  // a symbolic link
	odd     bool  // FIFO, socket or device
	hard    bool  // a regular file with other hard links
	dir     bool  // a folder
}

func plantKinds() []plantKind {
	return []plantKind{
		{name: "link to a file outside", link: true, planted: ErrSymlink, plant: func(t *testing.T, e *advEnv, at string) {
			require.NoError(t, os.Symlink(filepath.Join(e.out, "precious"), at))
		}},
		{name: "link to a folder outside", link: true, planted: ErrSymlink, plant: func(t *testing.T, e *advEnv, at string) {
			require.NoError(t, os.Symlink(e.out, at))
		}},
		{name: "dangling link", link: true, planted: ErrSymlink, plant: func(t *testing.T, e *advEnv, at string) {
			// Followed with O_CREATE, it would make base/nowhere.
			require.NoError(t, os.Symlink(filepath.Join(e.base, "nowhere"), at))
		}},
		{name: "relative link up and out", link: true, planted: ErrSymlink, plant: func(t *testing.T, e *advEnv, at string) {
			rel, err := filepath.Rel(filepath.Dir(at), filepath.Join(e.out, "precious"))
			require.NoError(t, err)
			require.True(t, strings.HasPrefix(rel, "../"))
			require.NoError(t, os.Symlink(rel, at))
		}},
		{name: "link to a file inside", link: true, planted: ErrSymlink, plant: func(t *testing.T, e *advEnv, at string) {
			require.NoError(t, os.Symlink("0.log", at))
		}},
		{name: "FIFO", odd: true, planted: ErrNotRegular, plant: func(t *testing.T, e *advEnv, at string) {
			require.NoError(t, unix.Mkfifo(at, 0o666))
		}},
		{name: "socket", odd: true, planted: ErrNotRegular, plant: func(t *testing.T, e *advEnv, at string) {
			require.NoError(t, unix.Mknod(at, unix.S_IFSOCK|0o666, 0))
		}},
		{name: "device", odd: true, planted: ErrNotRegular, plant: func(t *testing.T, e *advEnv, at string) {
			// /dev/zero: read forever if opened, and a device open can
			// have effects of its own.
			if err := unix.Mknod(at, unix.S_IFCHR|0o666, int(unix.Mkdev(1, 5))); err != nil {
				t.Skipf("mknod: %v (needs CAP_MKNOD)", err)
			}
		}},
		{name: "hard link to a file outside", hard: true, planted: ErrHardLink, plant: func(t *testing.T, e *advEnv, at string) {
			require.NoError(t, os.Link(filepath.Join(e.out, "precious"), at))
		}},
		{name: "folder where a file belongs", dir: true, planted: ErrFolder, plant: func(t *testing.T, e *advEnv, at string) {
			require.NoError(t, os.Mkdir(at, 0o700))
			require.NoError(t, os.WriteFile(filepath.Join(at, "inner"), []byte("ours"), 0o600))
		}},
	}
}

// TestAdv35PlantedEntryReads and TestAdv35PlantedEntryWrites call each
// method of FS on a name where a file is expected and something else was
// planted, with both resolvers, on a fresh data directory each time.
func TestAdv35PlantedEntryReads(t *testing.T) { runPlantedOps(t, false) }

func TestAdv35PlantedEntryWrites(t *testing.T) { runPlantedOps(t, true) }

func runPlantedOps(t *testing.T, writes bool) {
	type op struct {
		name  string
		write bool // changes the data directory
		run   func(t *testing.T, e *advEnv, k plantKind, x string)
	}
	kindBefore := func(t *testing.T, x string) uint32 { return kindOf(t, x) }
	// the entry is still there as planted
	same := func(t *testing.T, x string, was uint32, step string) {
		t.Helper()
		require.Equal(t, was, kindOf(t, x), "%s leaves the entry alone", step)
	}
	ops := []op{
		{"open read", false, func(t *testing.T, e *advEnv, k plantKind, x string) {
			was := kindBefore(t, x)
			f, err := e.fs.OpenFile(x, os.O_RDONLY, 0)
			switch {
			case k.link || k.odd || k.dir:
				require.ErrorIs(t, err, k.planted)
				e.requireReports(t, map[string]error{x: k.planted}, "open read")
			case k.hard:
				// Reading a hard-linked file is allowed (README: only
				// writes are refused); it is served as is.
				require.NoError(t, err)
				require.NoError(t, f.Close())
				e.requireReports(t, nil, "open read")
			}
			same(t, x, was, "open read")
		}},
		{"open write in place", true, func(t *testing.T, e *advEnv, k plantKind, x string) {
			was := kindBefore(t, x)
			for _, flag := range []int{os.O_RDWR, os.O_WRONLY | os.O_APPEND, os.O_RDWR | os.O_CREATE, os.O_WRONLY | os.O_TRUNC, os.O_RDWR | os.O_CREATE | os.O_EXCL} {
				f, err := e.fs.OpenFile(x, flag, 0o600)
				if err == nil {
					f.Close()
				}
				require.Error(t, err, "flag %#x", flag)
				if k.link || k.odd || k.hard || k.dir {
					if flag&os.O_EXCL != 0 && (k.hard || k.dir) {
						require.ErrorIs(t, err, os.ErrExist)
					} else {
						require.ErrorIs(t, err, k.planted, "flag %#x", flag)
					}
				}
				same(t, x, was, "open write")
			}
			if k.planted != nil {
				e.requireReports(t, map[string]error{x: k.planted}, "open write")
			} else {
				e.requireReports(t, nil, "open write")
			}
		}},
		{"open create truncate", true, func(t *testing.T, e *advEnv, k plantKind, x string) {
			f, err := e.fs.OpenFile(x, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
			// A file written from scratch takes the name back, whatever
			// was planted there (README: "the new file takes its place:
			// the entry itself is unlinked or renamed over"; a folder is
			// moved aside).
			require.NoError(t, err)
			_, err = f.WriteAt([]byte("new"), 0)
			require.NoError(t, err)
			require.NoError(t, f.Close())
			var st unix.Stat_t
			require.NoError(t, unix.Lstat(x, &st))
			require.Equal(t, uint32(unix.S_IFREG), st.Mode&unix.S_IFMT)
			require.Equal(t, uint64(1), uint64(st.Nlink))
			b, err := os.ReadFile(x)
			require.NoError(t, err)
			require.Equal(t, "new", string(b))
			if k.dir {
				requireAside(t, e, x, x+PlantedSuffix)
				return
			}
			e.requireReports(t, map[string]error{x: k.planted}, "open create truncate")
		}},
		{"write atomic", true, func(t *testing.T, e *advEnv, k plantKind, x string) {
			err := WriteFileAtomic(e.fs, x, []byte("new"))
			require.NoError(t, err)
			b, err := os.ReadFile(x)
			require.NoError(t, err)
			require.Equal(t, "new", string(b))
			require.Equal(t, uint32(unix.S_IFREG), kindOf(t, x))
			if k.dir {
				requireAside(t, e, x, x+PlantedSuffix)
			}
		}},
		{"write atomic through a planted tmp", true, func(t *testing.T, e *advEnv, k plantKind, x string) {
			// The entry is planted at name.tmp: the temporary file is
			// written from scratch too.
			y := filepath.Join(filepath.Dir(x), "ckpt")
			require.NoError(t, os.Rename(x, y+".tmp"))
			err := WriteFileAtomic(e.fs, y, []byte("new"))
			require.NoError(t, err)
			b, err := os.ReadFile(y)
			require.NoError(t, err)
			require.Equal(t, "new", string(b))
			require.Equal(t, uint32(0), kindOf(t, y+".tmp"))
		}},
		{"stat", false, func(t *testing.T, e *advEnv, k plantKind, x string) {
			st, err := e.fs.Stat(x)
			switch {
			case k.link:
				require.ErrorIs(t, err, ErrSymlink)
				e.requireReports(t, map[string]error{x: ErrSymlink}, "stat")
			case k.odd:
				// Stat describes the entry itself; callers check its mode.
				require.NoError(t, err)
				require.False(t, st.Mode().IsRegular())
				require.False(t, st.IsDir())
			case k.hard:
				require.NoError(t, err)
				require.True(t, st.Mode().IsRegular())
			case k.dir:
				require.NoError(t, err)
				require.True(t, st.IsDir())
			}
		}},
		{"lock", false, func(t *testing.T, e *advEnv, k plantKind, x string) {
			was := kindBefore(t, x)
			l, err := e.fs.Lock(x)
			switch {
			case k.link || k.odd:
				require.ErrorIs(t, err, k.planted)
				e.requireReports(t, map[string]error{x: k.planted}, "lock")
			case k.dir:
				require.NoError(t, err)
			}
			if err == nil {
				require.NoError(t, l.Close())
			}
			same(t, x, was, "lock")
		}},
		{"read the folder holding it", false, func(t *testing.T, e *advEnv, k plantKind, x string) {
			es, err := e.fs.ReadDir(filepath.Dir(x))
			require.NoError(t, err)
			var names []string
			for _, d := range es {
				names = append(names, d.Name())
			}
			if k.link || k.odd {
				require.Equal(t, []string{"0.log"}, names)
				e.requireReports(t, map[string]error{x: k.planted}, "readdir")
			} else {
				require.Equal(t, []string{"0.log", "x"}, names)
				e.requireReports(t, nil, "readdir")
			}
		}},
		{"read it as a folder", false, func(t *testing.T, e *advEnv, k plantKind, x string) {
			es, err := e.fs.ReadDir(x)
			switch {
			case k.dir:
				require.NoError(t, err)
				require.Len(t, es, 1)
			case k.link:
				require.ErrorIs(t, err, ErrSymlink)
			default:
				require.ErrorIs(t, err, unix.ENOTDIR)
			}
			err = e.fs.SyncDir(x)
			switch {
			case k.dir:
				require.NoError(t, err)
			case k.link:
				require.ErrorIs(t, err, ErrSymlink)
			default:
				require.ErrorIs(t, err, unix.ENOTDIR)
			}
		}},
		{"make a folder in it", true, func(t *testing.T, e *advEnv, k plantKind, x string) {
			err := e.fs.MkdirAll(filepath.Join(x, "sub", "deeper"), 0o700)
			switch {
			case k.dir:
				require.NoError(t, err)
				require.Equal(t, uint32(unix.S_IFDIR), kindOf(t, filepath.Join(x, "sub", "deeper")))
			case k.link:
				require.ErrorIs(t, err, ErrSymlink)
			default:
				require.ErrorIs(t, err, unix.ENOTDIR)
			}
		}},
		{"remove", true, func(t *testing.T, e *advEnv, k plantKind, x string) {
			err := e.fs.Remove(x)
			if k.dir {
				require.Error(t, err, "a folder that is not empty")
				return
			}
			require.NoError(t, err)
			require.Equal(t, uint32(0), kindOf(t, x))
		}},
		{"remove all", true, func(t *testing.T, e *advEnv, k plantKind, x string) {
			require.NoError(t, e.fs.RemoveAll(x))
			require.Equal(t, uint32(0), kindOf(t, x))
			// and the folder holding it, as topic delete does
			require.NoError(t, e.fs.RemoveAll(filepath.Dir(x)))
			require.Equal(t, uint32(0), kindOf(t, filepath.Dir(x)))
		}},
		{"rename away", true, func(t *testing.T, e *advEnv, k plantKind, x string) {
			was := kindBefore(t, x)
			y := filepath.Join(e.root, "moved")
			require.NoError(t, e.fs.Rename(x, y))
			require.Equal(t, uint32(0), kindOf(t, x))
			require.Equal(t, was, kindOf(t, y), "the entry itself is moved")
		}},
		{"rename over", true, func(t *testing.T, e *advEnv, k plantKind, x string) {
			err := e.fs.Rename(filepath.Join(filepath.Dir(x), "0.log"), x)
			require.NoError(t, err)
			b, err := os.ReadFile(x)
			require.NoError(t, err)
			require.Equal(t, "ours", string(b))
			if k.dir {
				requireAside(t, e, x, x+PlantedSuffix)
			}
		}},
	}
	for _, k := range plantKinds() {
		t.Run(k.name, func(t *testing.T) {
			for _, o := range ops {
				if o.write != writes {
					continue
				}
				t.Run(o.name, func(t *testing.T) {
					bothResolvers(t, func(t *testing.T) {
						e := newAdvEnv(t)
						x := filepath.Join(e.root, "p", "x")
						k.plant(t, e, x)
						e.want = advSnapshot(t, e.out) // a hard link changes no byte, but is planted after
						o.run(t, e, k, x)
						e.untouched(t, o.name)
					})
				})
			}
		})
	}
}

// A folderKind is something a hostile user can put where logfs expects a
// folder (root/q).
type folderKind struct {
	name   string
	plant  func(t *testing.T, e *advEnv, at string)
	link   bool
	report error // what listing the root reports it as
	listed bool  // a regular file: listed, as any file
}

func folderKinds() []folderKind {
	return []folderKind{
		{name: "link to a folder outside", link: true, report: ErrSymlink, plant: func(t *testing.T, e *advEnv, at string) {
			require.NoError(t, os.Symlink(e.out, at))
		}},
		{name: "relative link to a folder outside", link: true, report: ErrSymlink, plant: func(t *testing.T, e *advEnv, at string) {
			require.NoError(t, os.Symlink("../outside", at))
		}},
		{name: "link to a folder inside", link: true, report: ErrSymlink, plant: func(t *testing.T, e *advEnv, at string) {
			require.NoError(t, os.Symlink("p", at))
		}},
		{name: "link to a deep folder, used with ..", link: true, report: ErrSymlink, plant: func(t *testing.T, e *advEnv, at string) {
			require.NoError(t, os.Symlink(filepath.Join(e.out, "deep", "deeper"), at))
		}},
		{name: "file where a folder belongs", listed: true, plant: func(t *testing.T, e *advEnv, at string) {
			require.NoError(t, os.WriteFile(at, []byte("ours"), 0o600))
		}},
		{name: "FIFO where a folder belongs", report: ErrNotRegular, plant: func(t *testing.T, e *advEnv, at string) {
			require.NoError(t, unix.Mkfifo(at, 0o666))
		}},
	}
}

// TestAdv35EveryMethodThroughAPlantedFolder calls each method of FS on
// paths that go through root/q, where a link (or a file) was planted in
// place of a folder: nothing below it is reached, the entry itself is
// left as it is, and it alone is reported, once, by its own name.
func TestAdv35EveryMethodThroughAPlantedFolder(t *testing.T) {
	for _, k := range folderKinds() {
		t.Run(k.name, func(t *testing.T) {
			bothResolvers(t, func(t *testing.T) {
				e := newAdvEnv(t)
				q := filepath.Join(e.root, "q")
				k.plant(t, e, q)
				was := kindOf(t, q)
				inside := []string{
					filepath.Join(q, "precious"),
					filepath.Join(q, "0.log"),
					filepath.Join(q, "sub", "deep"),
					filepath.Join(q, "t-0", "00000000000000000000.log"),
					filepath.Join(q, "nowhere"),
				}
				check := func(err error, what string) {
					t.Helper()
					require.Error(t, err, what)
					if k.link {
						require.ErrorIs(t, err, ErrSymlink, what)
					} else {
						require.ErrorIs(t, err, unix.ENOTDIR, what)
					}
					require.Equal(t, was, kindOf(t, q), "%s leaves %s alone", what, q)
					e.untouched(t, what)
				}
				for _, name := range inside {
					for _, flag := range []int{os.O_RDONLY, os.O_RDWR, os.O_WRONLY | os.O_APPEND, os.O_RDWR | os.O_CREATE,
						os.O_RDWR | os.O_CREATE | os.O_TRUNC, os.O_RDWR | os.O_CREATE | os.O_EXCL} {
						f, err := e.fs.OpenFile(name, flag, 0o600)
						if err == nil {
							f.Close()
						}
						check(err, "open "+name)
					}
					_, err := e.fs.Stat(name)
					check(err, "stat "+name)
					l, err := e.fs.Lock(name)
					if err == nil {
						l.Close()
					}
					check(err, "lock "+name)
					check(e.fs.Remove(name), "remove "+name)
					check(e.fs.RemoveAll(name), "removeall "+name)
					check(e.fs.Rename(name, filepath.Join(e.root, "stolen")), "rename from "+name)
					check(e.fs.Rename(filepath.Join(e.root, "p", "0.log"), name), "rename to "+name)
					check(WriteFileAtomic(e.fs, name, []byte("x")), "write atomic "+name)
					check(e.fs.MkdirAll(filepath.Join(name, "new"), 0o700), "mkdirall "+name)
					_, err = e.fs.ReadDir(filepath.Dir(name))
					check(err, "readdir "+filepath.Dir(name))
					check(e.fs.SyncDir(filepath.Dir(name)), "syncdir "+filepath.Dir(name))
				}
				// ".." below the link is taken by name, not through it.
				_, err := e.fs.Stat(filepath.Join(q, "..", "precious"))
				require.ErrorIs(t, err, os.ErrNotExist)
				_, err = e.fs.ReadDir(q)
				check(err, "readdir "+q)
				check(e.fs.SyncDir(q), "syncdir "+q)
				check(e.fs.MkdirAll(filepath.Join(q, "new"), 0o700), "mkdirall")

				es, err := e.fs.ReadDir(e.root)
				require.NoError(t, err)
				if k.listed {
					require.Len(t, es, 2)
				} else {
					require.Len(t, es, 1, "only p is listed")
				}
				// The entry is reported once, by its own name: the one
				// someone planted, not each path through it.
				want := map[string]error{}
				if k.report != nil {
					want[q] = k.report
				}
				e.requireReports(t, want, "all of it")

				// Topic delete: the entry goes, never what it points to.
				require.NoError(t, e.fs.RemoveAll(q))
				require.Equal(t, uint32(0), kindOf(t, q))
				e.untouched(t, "removeall")
			})
		})
	}
}

// requireAside checks that the folder planted at x (holding "inner") was
// moved, whole, to aside, and reported so, once.
func requireAside(t *testing.T, e *advEnv, x, aside string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(aside, "inner"))
	require.NoError(t, err, "the planted folder is moved aside whole")
	require.Equal(t, "ours", string(b))
	var moved *MovedAsideError
	for _, err := range e.reported()[x] {
		if errors.As(err, &moved) {
			break
		}
	}
	require.NotNil(t, moved, "the move is reported: %v", e.reported())
	require.Equal(t, aside, moved.To)
}
