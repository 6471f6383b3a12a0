package vfs

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// keepCount counts the files named "keep" below root: what planted
// folders hold, which no move aside may lose.
func keepCount(t *testing.T, root string) int {
	t.Helper()
	n := 0
	require.NoError(t, filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Name() == "keep" {
			n++
		}
		return err
	}))
	return n
}

// TestAdv37bMoveAsideLongName: a folder at a name of 255 bytes (the
// .props of a topic of 249 characters) is moved aside to a name cut to
// fit, twice, each keeping what it holds.
func TestAdv37bMoveAsideLongName(t *testing.T) {
	e := newAdvEnv(t)
	name := strings.Repeat("a", 247) + "-1.props"
	require.Len(t, name, 255)
	full := filepath.Join(e.root, name)
	for i, want := range []string{name[:247] + ".planted", name[:245] + ".planted.2"} {
		if i > 0 {
			require.NoError(t, os.Remove(full)) // the file the first round wrote
		}
		require.NoError(t, os.MkdirAll(filepath.Join(full, "d"), 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(full, "d", "keep"), nil, 0o600))
		require.NoError(t, WriteFileAtomicVia(e.fs, full, filepath.Join(e.root, "short.tmp"), []byte("x")))
		st, err := os.Stat(filepath.Join(e.root, want, "d", "keep"))
		require.NoError(t, err, "round %d", i)
		require.True(t, st.Mode().IsRegular())
	}
	b, err := os.ReadFile(full)
	require.NoError(t, err)
	require.Equal(t, "x", string(b))
	require.Equal(t, 2, keepCount(t, e.root))
	e.untouched(t, "moves aside")
}

// TestAdv37bMoveAsideAllNamesTaken: the 100 names a folder may be moved
// aside to are taken (folders holding files, files, links out of the
// root): the write from scratch fails as planted, the folder stays where
// it is with what it holds, and nothing taken is replaced or followed.
func TestAdv37bMoveAsideAllNamesTaken(t *testing.T) {
	e := newAdvEnv(t)
	p := filepath.Join(e.root, "p")
	x := filepath.Join(p, "00000000000000000000.index")
	require.NoError(t, os.MkdirAll(x, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(x, "keep"), nil, 0o600))
	for i := 1; i <= 100; i++ {
		to := x + PlantedSuffix
		if i > 1 {
			to += "." + strconv.Itoa(i)
		}
		switch i % 3 {
		case 0:
			require.NoError(t, os.MkdirAll(filepath.Join(to, "sub"), 0o700))
			require.NoError(t, os.WriteFile(filepath.Join(to, "sub", "keep"), nil, 0o600))
		case 1:
			require.NoError(t, os.WriteFile(to, []byte("taken"), 0o600))
		case 2:
			require.NoError(t, os.Symlink(e.out, to))
		}
	}
	before := keepCount(t, e.root)
	for _, op := range []func() error{
		func() error {
			f, err := e.fs.OpenFile(x, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
			if err == nil {
				f.Close()
			}
			return err
		},
		func() error { return WriteFileAtomic(e.fs, x, []byte("new")) },
	} {
		err := op()
		require.Error(t, err)
		require.True(t, IsPlanted(err), "%v", err)
		require.True(t, errors.Is(err, ErrFolder), "%v", err)
		st, serr := os.Lstat(filepath.Join(x, "keep"))
		require.NoError(t, serr)
		require.True(t, st.Mode().IsRegular())
	}
	require.Equal(t, before, keepCount(t, e.root))
	b, err := os.ReadFile(x + PlantedSuffix)
	require.NoError(t, err)
	require.Equal(t, "taken", string(b))
	e.untouched(t, "a move aside with every name taken")
}

// TestAdv37bRaceMoveAside swaps the planted folder for a link out of the
// root (and for a file of ours) while a file is written from scratch at
// its name and renamed onto it: the link's target is never written or
// moved, and what the folder holds is never lost.
func TestAdv37bRaceMoveAside(t *testing.T) {
	bothResolvers(t, func(t *testing.T) {
		e := newAdvEnv(t)
		s := startSwapper(t, e.root, [2]string{"p/x", "p/l"}, [2]string{"p/x", "p/own"}, [2]string{"p/x.planted", "p/l2"})
		first := true
		raceRounds(t, e, s, func() {
			if !first {
				require.Equal(t, 1, keepCount(t, e.root), "what the folder holds is kept")
			}
			first = false
			resetRoot(t, e, "p/", "p/x/", "p/x/keep", "p/own", "p/l -> "+filepath.Join(e.out, "precious"), "p/l2 -> "+e.out)
		}, func() {
			x := filepath.Join(e.root, "p", "x")
			for i := 0; i < 3; i++ {
				f, err := e.fs.OpenFile(x, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
				if err == nil {
					_, err = f.WriteAt([]byte("new"), 0)
					require.NoError(t, err)
					require.NoError(t, f.Close())
				}
				_ = WriteFileAtomic(e.fs, x, []byte("new"))
			}
		})
		require.Equal(t, 1, keepCount(t, e.root), "what the folder holds is kept")
	})
}

// TestAdv37bMoveAsideMountPoint: the folder at the name is a mount point,
// which rename(2) cannot move (EBUSY): the write fails naming the cause,
// and the mount and what it holds stay.
func TestAdv37bMoveAsideMountPoint(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounts a tmpfs, which needs root")
	}
	e := newAdvEnv(t)
	x := filepath.Join(e.root, "p", "00000000000000000000.index")
	require.NoError(t, os.Mkdir(x, 0o700))
	if err := unix.Mount("adv37b", x, "tmpfs", 0, ""); err != nil {
		t.Skipf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(x, unix.MNT_DETACH) })
	require.NoError(t, os.WriteFile(filepath.Join(x, "keep"), nil, 0o600))
	f, err := e.fs.OpenFile(x, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err == nil {
		f.Close()
	}
	require.ErrorIs(t, err, unix.EBUSY)
	require.NoError(t, WriteFileAtomic(e.fs, x+"2", nil)) // the folder is fine otherwise
	require.ErrorIs(t, e.fs.Rename(x+"2", x), unix.EBUSY)
	_, err = os.Stat(filepath.Join(x, "keep"))
	require.NoError(t, err)
	require.NoError(t, unix.Unmount(x, 0))
	e.untouched(t, "a move aside of a mount point")
}
