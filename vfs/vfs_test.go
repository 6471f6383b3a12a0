package vfs

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "checkpoint")
	require.NoError(t, WriteFileAtomic(Default, p, []byte("one")))
	require.NoError(t, WriteFileAtomic(Default, p, []byte("two")))
	got, err := ReadFile(Default, p)
	require.NoError(t, err)
	require.Equal(t, "two", string(got))
	_, err = os.Stat(p + ".tmp")
	require.ErrorIs(t, err, os.ErrNotExist, "no temporary file is left")
}

func TestLockIsExclusive(t *testing.T) {
	p := filepath.Join(t.TempDir(), ".lock")
	l, err := Default.Lock(p)
	require.NoError(t, err)
	_, err = Default.Lock(p)
	require.True(t, errors.Is(err, ErrLocked), "%v", err)
	require.NoError(t, l.Close())
	l2, err := Default.Lock(p)
	require.NoError(t, err, "a released lock can be taken again")
	require.NoError(t, l2.Close())
}

func TestFileSyncAndTruncate(t *testing.T) {
	f, err := Default.OpenFile(filepath.Join(t.TempDir(), "f"), os.O_RDWR|os.O_CREATE, 0o644)
	require.NoError(t, err)
	defer f.Close()
	_, err = f.WriteAt([]byte("hello world"), 0)
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	require.NoError(t, f.Truncate(5))
	st, err := f.Stat()
	require.NoError(t, err)
	require.Equal(t, int64(5), st.Size())
}
