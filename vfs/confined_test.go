package vfs

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// confinedSetup makes root/p holding a segment, a target file outside root
// and a folder outside root, and returns the Confined FS and what it
// reported.
func confinedSetup(t *testing.T) (fs FS, root, target, outDir string, reported func() map[string]error) {
	base := t.TempDir()
	root = filepath.Join(base, "data")
	outDir = filepath.Join(base, "outside")
	require.NoError(t, os.MkdirAll(filepath.Join(root, "p"), 0o700))
	require.NoError(t, os.MkdirAll(outDir, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(root, "p", "0.log"), []byte("ours"), 0o600))
	target = filepath.Join(outDir, "precious")
	require.NoError(t, os.WriteFile(target, []byte("precious bytes"), 0o600))
	var mu sync.Mutex
	seen := map[string]error{}
	count := map[string]int{}
	fs = Confined(root, func(path string, err error) {
		mu.Lock()
		defer mu.Unlock()
		seen[path] = err
		count[path]++
		require.Equal(t, 1, count[path], "reported once: %s", path)
	})
	return fs, root, target, outDir, func() map[string]error {
		mu.Lock()
		defer mu.Unlock()
		out := map[string]error{}
		for k, v := range seen {
			out[k] = v
		}
		return out
	}
}

func requireUntouched(t *testing.T, target string) {
	t.Helper()
	b, err := os.ReadFile(target)
	require.NoError(t, err)
	require.Equal(t, "precious bytes", string(b))
}

// bothResolvers runs f with openat2 and with the per-folder walk.
func bothResolvers(t *testing.T, f func(t *testing.T)) {
	t.Run("openat2", f)
	t.Run("walk", func(t *testing.T) {
		was := noOpenat2.Load()
		noOpenat2.Store(true)
		defer noOpenat2.Store(was)
		f(t)
	})
}

func TestConfinedNeverFollowsAFileLink(t *testing.T) {
	bothResolvers(t, func(t *testing.T) {
		fs, root, target, _, reported := confinedSetup(t)
		link := filepath.Join(root, "p", "500.log")
		require.NoError(t, os.Symlink(target, link))

		for _, flag := range []int{os.O_RDONLY, os.O_RDWR, os.O_WRONLY | os.O_APPEND, os.O_RDWR | os.O_CREATE} {
			_, err := fs.OpenFile(link, flag, 0o600)
			require.ErrorIs(t, err, ErrSymlink, "flag %#x", flag)
		}
		_, err := fs.Stat(link)
		require.ErrorIs(t, err, ErrSymlink)
		_, err = fs.Lock(link)
		require.ErrorIs(t, err, ErrSymlink)
		require.Error(t, fs.MkdirAll(filepath.Join(link, "x"), 0o700), "a file is no folder")

		entries, err := fs.ReadDir(filepath.Join(root, "p"))
		require.NoError(t, err)
		require.Len(t, entries, 1, "the link is left out of the listing")
		require.Equal(t, "0.log", entries[0].Name())
		require.ErrorIs(t, reported()[link], ErrSymlink)
		requireUntouched(t, target)
		_, err = os.Lstat(link)
		require.NoError(t, err, "the link is left alone")

		// A file written from scratch takes its name back; the target is
		// never opened.
		f, err := fs.OpenFile(link, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
		require.NoError(t, err)
		_, err = f.WriteAt([]byte("new"), 0)
		require.NoError(t, err)
		require.NoError(t, f.Close())
		st, err := os.Lstat(link)
		require.NoError(t, err)
		require.True(t, st.Mode().IsRegular())
		requireUntouched(t, target)
	})
}

func TestConfinedNeverFollowsAFolderLink(t *testing.T) {
	bothResolvers(t, func(t *testing.T) {
		fs, root, target, outDir, _ := confinedSetup(t)
		link := filepath.Join(root, "q")
		require.NoError(t, os.Symlink(outDir, link))
		inside := filepath.Join(link, "precious")

		for _, flag := range []int{os.O_RDONLY, os.O_RDWR, os.O_RDWR | os.O_CREATE | os.O_TRUNC} {
			_, err := fs.OpenFile(inside, flag, 0o600)
			require.ErrorIs(t, err, ErrSymlink, "flag %#x", flag)
		}
		_, err := fs.Stat(inside)
		require.ErrorIs(t, err, ErrSymlink)
		_, err = fs.ReadDir(link)
		require.ErrorIs(t, err, ErrSymlink)
		require.ErrorIs(t, fs.SyncDir(link), ErrSymlink)
		_, err = fs.Lock(inside)
		require.ErrorIs(t, err, ErrSymlink)
		require.ErrorIs(t, fs.MkdirAll(filepath.Join(link, "new"), 0o700), ErrSymlink)
		require.ErrorIs(t, fs.Remove(inside), ErrSymlink)
		require.ErrorIs(t, fs.Rename(inside, filepath.Join(root, "stolen")), ErrSymlink)
		require.ErrorIs(t, fs.Rename(filepath.Join(root, "p", "0.log"), filepath.Join(link, "precious")), ErrSymlink)
		require.NoError(t, WriteFileAtomic(fs, filepath.Join(root, "p", "ckpt"), []byte("x")))
		require.ErrorIs(t, WriteFileAtomic(fs, inside, []byte("x")), ErrSymlink)

		// RemoveAll of a folder holding the link removes the link only.
		require.NoError(t, fs.RemoveAll(link))
		_, err = os.Lstat(link)
		require.ErrorIs(t, err, os.ErrNotExist)
		requireUntouched(t, target)
		_, err = os.Stat(filepath.Join(outDir, "new"))
		require.ErrorIs(t, err, os.ErrNotExist)

		require.NoError(t, os.MkdirAll(filepath.Join(root, "t-0"), 0o700))
		require.NoError(t, os.Symlink(outDir, filepath.Join(root, "t-0", "sub")))
		require.NoError(t, fs.RemoveAll(filepath.Join(root, "t-0")))
		requireUntouched(t, target)
	})
}

func TestConfinedFIFODoesNotHang(t *testing.T) {
	bothResolvers(t, func(t *testing.T) {
		fs, root, _, _, reported := confinedSetup(t)
		fifo := filepath.Join(root, "p", "500.log")
		require.NoError(t, unix.Mkfifo(fifo, 0o600))
		for _, flag := range []int{os.O_RDONLY, os.O_RDWR, os.O_WRONLY} {
			_, err := fs.OpenFile(fifo, flag, 0)
			require.ErrorIs(t, err, ErrNotRegular, "flag %#x", flag)
		}
		_, err := fs.Lock(fifo)
		require.ErrorIs(t, err, ErrNotRegular)
		entries, err := fs.ReadDir(filepath.Join(root, "p"))
		require.NoError(t, err)
		require.Len(t, entries, 1)
		require.ErrorIs(t, reported()[fifo], ErrNotRegular)
	})
}

func TestConfinedRefusesToWriteAHardLink(t *testing.T) {
	fs, root, target, _, _ := confinedSetup(t)
	hard := filepath.Join(root, "p", "500.index")
	require.NoError(t, os.Link(target, hard))
	_, err := fs.OpenFile(hard, os.O_RDWR, 0)
	require.ErrorIs(t, err, ErrHardLink)
	_, err = fs.OpenFile(hard, os.O_RDWR|os.O_TRUNC, 0)
	require.ErrorIs(t, err, ErrHardLink)
	requireUntouched(t, target)
	f, err := fs.OpenFile(hard, os.O_RDONLY, 0)
	require.NoError(t, err, "reading one is harmless")
	require.NoError(t, f.Close())
}

func TestConfinedWorksAsTheDisk(t *testing.T) {
	bothResolvers(t, func(t *testing.T) {
		fs, root, _, _, reported := confinedSetup(t)
		dir := filepath.Join(root, "t-1", "deep")
		require.NoError(t, fs.MkdirAll(dir, 0o700))
		f, err := fs.OpenFile(filepath.Join(dir, "a"), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		require.NoError(t, err)
		_, err = f.WriteAt([]byte("hello"), 0)
		require.NoError(t, err)
		require.NoError(t, f.Sync())
		require.NoError(t, f.Close())
		f, err = fs.OpenFile(filepath.Join(dir, "a"), os.O_RDWR|os.O_TRUNC, 0)
		require.NoError(t, err)
		st, err := f.Stat()
		require.NoError(t, err)
		require.Zero(t, st.Size(), "O_TRUNC truncates")
		require.NoError(t, f.Close())
		_, err = fs.OpenFile(filepath.Join(dir, "a"), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		require.ErrorIs(t, err, os.ErrExist)
		_, err = fs.OpenFile(filepath.Join(dir, "missing"), os.O_RDONLY, 0)
		require.ErrorIs(t, err, os.ErrNotExist)
		_, err = fs.Stat(filepath.Join(dir, "missing"))
		require.ErrorIs(t, err, os.ErrNotExist)
		st, err = fs.Stat(dir)
		require.NoError(t, err)
		require.True(t, st.IsDir())
		require.NoError(t, fs.Rename(filepath.Join(dir, "a"), filepath.Join(root, "b")))
		require.NoError(t, fs.SyncDir(dir))
		require.NoError(t, fs.SyncDir(root))
		require.Error(t, fs.Remove(filepath.Join(root, "t-1")), "not empty")
		require.NoError(t, fs.Remove(dir))
		require.NoError(t, fs.Remove(filepath.Join(root, "b")))
		entries, err := fs.ReadDir(root)
		require.NoError(t, err)
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		require.Equal(t, []string{"p", "t-1"}, names)
		l, err := fs.Lock(filepath.Join(root, ".lock"))
		require.NoError(t, err)
		_, err = fs.Lock(filepath.Join(root, ".lock"))
		require.True(t, errors.Is(err, ErrLocked), "%v", err)
		require.NoError(t, l.Close())
		l, err = fs.Lock(filepath.Join(root, "p"))
		require.NoError(t, err)
		require.NoError(t, l.Close())
		l, err = fs.Lock(root)
		require.NoError(t, err)
		require.NoError(t, l.Close())
		require.Empty(t, reported())
	})
}

func TestConfinedRelativeRoot(t *testing.T) {
	base := t.TempDir()
	t.Chdir(base)
	require.NoError(t, os.MkdirAll("data/p", 0o700))
	require.NoError(t, os.WriteFile("precious", []byte("precious bytes"), 0o600))
	require.NoError(t, os.Symlink(filepath.Join(base, "precious"), "data/p/0.log"))
	fs := Confined("data", nil)
	_, err := fs.OpenFile("data/p/0.log", os.O_RDWR, 0)
	require.ErrorIs(t, err, ErrSymlink)
	_, err = fs.OpenFile(filepath.Join(base, "data/p/0.log"), os.O_RDWR, 0)
	require.ErrorIs(t, err, ErrSymlink, "an absolute name below a relative root")
	requireUntouched(t, filepath.Join(base, "precious"))
}
