package vfs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestAdv35RootSpellings: the root itself, however spelled (relative to
// the working directory too), is the operator's folder: it works as the
// disk, and its listing leaves out what was planted in it.
func TestAdv35RootSpellings(t *testing.T) {
	bothResolvers(t, func(t *testing.T) {
		e := newAdvEnv(t)
		require.NoError(t, os.Symlink(e.out, filepath.Join(e.root, "l")))
		t.Chdir(e.base)
		for _, r := range []string{e.root, e.root + "/", e.root + "/.", e.root + "//", filepath.Join(e.root, "p") + "/..",
			"data", "./data/", "data/p/..", "../" + filepath.Base(e.base) + "/data"} {
			st, err := e.fs.Stat(r)
			require.NoError(t, err, r)
			require.True(t, st.IsDir())
			es, err := e.fs.ReadDir(r)
			require.NoError(t, err, r)
			require.Len(t, es, 1, "%s: the link is left out", r)
			require.Equal(t, "p", es[0].Name())
			require.NoError(t, e.fs.SyncDir(r), r)
			require.NoError(t, e.fs.MkdirAll(r, 0o700), r)
			f, err := e.fs.OpenFile(r, os.O_RDONLY, 0)
			require.NoError(t, err, r)
			require.NoError(t, f.Close())
			l, err := e.fs.Lock(r)
			require.NoError(t, err, r)
			require.NoError(t, l.Close())
		}
		e.untouched(t, "the root")
	})
}

// TestAdv35NameSpellings plants a link and reaches it by every spelling
// of its name: each is refused, and the link is reported once, by one
// name.
func TestAdv35NameSpellings(t *testing.T) {
	bothResolvers(t, func(t *testing.T) {
		e := newAdvEnv(t)
		x := filepath.Join(e.root, "p", "x")
		require.NoError(t, os.Symlink(filepath.Join(e.out, "precious"), x))
		// q: a link to a deep folder outside, so that q/.. would lead out
		// if it were followed before ".." is taken.
		require.NoError(t, os.Symlink(filepath.Join(e.out, "deep", "deeper"), filepath.Join(e.root, "q")))
		t.Chdir(e.base)
		spellings := []string{
			x, x + "/", e.root + "/p/./x", e.root + "/p/../p/x", e.root + "//p//x", e.root + "/q/../p/x",
			"data/p/x", "./data/p/x", "data/../data/p/x", "data/p/x/",
		}
		for _, name := range spellings {
			for _, flag := range []int{os.O_RDONLY, os.O_WRONLY | os.O_TRUNC, os.O_RDWR | os.O_CREATE} {
				_, err := e.fs.OpenFile(name, flag, 0o600)
				require.ErrorIs(t, err, ErrSymlink, "%s %#x", name, flag)
			}
			_, err := e.fs.Stat(name)
			require.ErrorIs(t, err, ErrSymlink, name)
			_, err = e.fs.Lock(name)
			require.ErrorIs(t, err, ErrSymlink, name)
		}
		// ".." is taken by name: q/.. is the root, never deep/.
		_, err := e.fs.Stat(filepath.Join(e.root, "q", "..", "precious"))
		require.ErrorIs(t, err, os.ErrNotExist)
		_, err = e.fs.OpenFile(filepath.Join(e.root, "q", "..", "precious"), os.O_RDWR|os.O_TRUNC, 0)
		require.ErrorIs(t, err, os.ErrNotExist)
		es, err := e.fs.ReadDir(filepath.Join(e.root, "p"))
		require.NoError(t, err)
		require.Len(t, es, 1)
		e.untouched(t, "spellings")
		e.requireReports(t, map[string]error{x: ErrSymlink}, "spellings")
	})
}

// TestAdv35RelativeRoot: a root given relative to the working directory,
// and names given relative to it too, in every mix the working directory
// allows: a name below the root is confined however it is spelled.
func TestAdv35RelativeRoot(t *testing.T) {
	type relCase struct {
		cwd, root string
		names     []string
	}
	cases := map[string]func(e *advEnv, x string) relCase{
		"cwd above, root relative": func(e *advEnv, x string) relCase {
			return relCase{e.base, "data", []string{"data/p/x", x, "./data/p/x", "../" + filepath.Base(e.base) + "/data/p/x"}}
		},
		"root with ./ and /": func(e *advEnv, x string) relCase {
			return relCase{e.base, "./data/", []string{"data/p/x", x}}
		},
		"cwd is the root": func(e *advEnv, x string) relCase {
			return relCase{e.root, ".", []string{"p/x", x, "./p/x", "../data/p/x"}}
		},
		"cwd below, root ..": func(e *advEnv, x string) relCase {
			return relCase{filepath.Join(e.root, "p"), "..", []string{"x", "./x", x, "../p/x"}}
		},
		"cwd below, root absolute": func(e *advEnv, x string) relCase {
			return relCase{filepath.Join(e.root, "p"), e.root, []string{"x", "./x", "../p/x"}}
		},
		"cwd beside, root ../data": func(e *advEnv, x string) relCase {
			return relCase{e.out, "../data", []string{"../data/p/x", x}}
		},
	}
	for name, mk := range cases {
		t.Run(name, func(t *testing.T) {
			bothResolvers(t, func(t *testing.T) {
				e := newAdvEnv(t)
				x := filepath.Join(e.root, "p", "x")
				require.NoError(t, os.Symlink(filepath.Join(e.out, "precious"), x))
				c := mk(e, x)
				t.Chdir(c.cwd)
				fs := Confined(c.root, nil)
				for _, name := range c.names {
					f, err := fs.OpenFile(name, os.O_WRONLY|os.O_TRUNC, 0)
					if err == nil {
						f.Close()
					}
					e.untouched(t, name)
					require.ErrorIs(t, err, ErrSymlink, "root %s, cwd %s: %s", c.root, c.cwd, name)
					_, err = fs.Stat(name)
					require.ErrorIs(t, err, ErrSymlink, "root %s, cwd %s: %s", c.root, c.cwd, name)
				}
				// and it works as the disk
				f, err := fs.OpenFile(c.names[0]+"-new", os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
				require.NoError(t, err)
				require.NoError(t, f.Close())
				require.NoError(t, fs.Remove(c.names[0]+"-new"))
			})
		})
	}
}

// TestAdv35RootIsALink: the operator may give a root that is a link (or
// below one); below it, nothing is followed.
func TestAdv35RootIsALink(t *testing.T) {
	bothResolvers(t, func(t *testing.T) {
		e := newAdvEnv(t)
		alias := filepath.Join(e.base, "alias")
		require.NoError(t, os.Symlink("data", alias))
		e.wantBase = advList(t, e.base)
		x := filepath.Join(alias, "p", "x")
		require.NoError(t, os.Symlink(filepath.Join(e.out, "precious"), filepath.Join(e.root, "p", "x")))
		fs := Confined(alias, nil)
		_, err := fs.OpenFile(x, os.O_RDWR|os.O_TRUNC, 0)
		require.ErrorIs(t, err, ErrSymlink)
		require.NoError(t, fs.MkdirAll(filepath.Join(alias, "t-0"), 0o700))
		require.NoError(t, WriteFileAtomic(fs, filepath.Join(alias, "t-0", "a"), []byte("ours")))
		es, err := fs.ReadDir(alias)
		require.NoError(t, err)
		require.Len(t, es, 2)
		l, err := fs.Lock(alias)
		require.NoError(t, err)
		require.NoError(t, l.Close())
		require.NoError(t, fs.RemoveAll(filepath.Join(alias, "t-0")))
		require.NoError(t, fs.RemoveAll(filepath.Join(alias, "p")))
		require.Equal(t, uint32(unix.S_IFLNK), kindOf(t, alias), "the root's own link is the operator's")
		e.untouched(t, "a root that is a link")
	})
}

// TestAdv35LongAndOddNames: names of 255 bytes and more, paths past
// PATH_MAX, names with newlines and bytes that are not UTF-8.
func TestAdv35LongAndOddNames(t *testing.T) {
	bothResolvers(t, func(t *testing.T) {
		e := newAdvEnv(t)
		p := filepath.Join(e.root, "p")
		for _, name := range []string{strings.Repeat("a", 255), "a\nb", "\xff\xfe", "-delete\n", " ", "..."} {
			full := filepath.Join(p, name)
			f, err := e.fs.OpenFile(full, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
			require.NoError(t, err, "%q", name)
			require.NoError(t, f.Close())
			st, err := e.fs.Stat(full)
			require.NoError(t, err, "%q", name)
			require.True(t, st.Mode().IsRegular())
			require.NoError(t, e.fs.Rename(full, full+"2"[:min(1, 255-len(name))]))
			require.NoError(t, e.fs.RemoveAll(full+"2"[:min(1, 255-len(name))]))
		}
		_, err := e.fs.OpenFile(filepath.Join(p, strings.Repeat("a", 256)), os.O_RDWR|os.O_CREATE, 0o600)
		require.ErrorIs(t, err, unix.ENAMETOOLONG)

		// A planted link whose name has a newline and bad UTF-8 is left
		// out of the listing and reported by that name, once.
		odd := filepath.Join(p, "l\n\xff")
		require.NoError(t, os.Symlink(filepath.Join(e.out, "precious"), odd))
		es, err := e.fs.ReadDir(p)
		require.NoError(t, err)
		require.Len(t, es, 1)
		_, err = e.fs.OpenFile(odd, os.O_RDWR, 0)
		require.ErrorIs(t, err, ErrSymlink)
		e.requireReports(t, map[string]error{odd: ErrSymlink}, "an odd name")

		// A path past PATH_MAX (4096 bytes), made one folder at a time,
		// with a link at its end.
		deep := p
		for len(deep) < 5000 {
			deep = filepath.Join(deep, strings.Repeat("d", 200))
		}
		require.NoError(t, e.fs.MkdirAll(deep, 0o700))
		_, err = os.Lstat(deep)
		require.ErrorIs(t, err, unix.ENAMETOOLONG, "the kernel takes no path this long")
		end := filepath.Join(deep, "x")
		// Plant it from the folder's own descriptor.
		fd, err := unix.Open(p, unix.O_PATH|unix.O_DIRECTORY, 0)
		require.NoError(t, err)
		for _, part := range strings.Split(strings.TrimPrefix(deep, p+"/"), "/") {
			next, err := unix.Openat(fd, part, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
			require.NoError(t, err)
			unix.Close(fd)
			fd = next
		}
		require.NoError(t, unix.Symlinkat(filepath.Join(e.out, "precious"), fd, "x"))
		unix.Close(fd)
		for _, flag := range []int{os.O_RDONLY, os.O_RDWR | os.O_TRUNC, os.O_RDWR | os.O_CREATE | os.O_TRUNC} {
			f, err := e.fs.OpenFile(end, flag, 0o600)
			if err == nil {
				f.Close()
			}
			// Too long for openat2, which fails it; the walk goes one
			// folder at a time and replaces the link. Either way nothing
			// outside is reached.
			if flag&os.O_CREATE == 0 || !noOpenat2.Load() {
				require.Error(t, err)
			}
		}
		require.NoError(t, e.fs.RemoveAll(filepath.Join(p, strings.Repeat("d", 200))))
		e.untouched(t, "long names")
	})
}
