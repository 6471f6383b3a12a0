package storage

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/internal/crashfs"
	"github.com/logfs/logfs/vfs"
)

// TestNewDataDirIsDurable: records synced into a data directory that Open
// created survive a crash that keeps nothing unsynced; so do the folders
// above it that Open created.
func TestNewDataDirIsDurable(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "new", "data")
	fs := crashfs.New(vfs.Default)
	l, err := Open(dir, Options{FS: fs, Logger: testLogger(t), RetentionCheckInterval: -1})
	require.NoError(t, err)
	top, err := l.CreateTopic("t", 1, nil)
	require.NoError(t, err)
	p, err := top.Partition(0)
	require.NoError(t, err)
	_, err = p.Append(values(3, "x"))
	require.NoError(t, err)
	require.NoError(t, p.Sync())
	require.NoError(t, fs.Crash(crashfs.CrashConfig{Mode: crashfs.DropAll}))
	l.Close() // fails: the file system crashed

	l = openLog(t, dir, Options{})
	p, err = l.Partition("t", 0)
	require.NoError(t, err)
	require.Equal(t, []string{"0:x-0", "1:x-1", "2:x-2"}, readAll(t, p, 0))
}
