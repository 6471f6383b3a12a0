package crashfs

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/vfs"
)

// TestModelForgets checks that the model holds memory and descriptors only
// for what a crash could still change.
func TestModelForgets(t *testing.T) {
	dir := t.TempDir()
	fs := New(vfs.Default)
	f, err := fs.OpenFile(filepath.Join(dir, "log"), os.O_RDWR|os.O_CREATE, 0o644)
	require.NoError(t, err)
	_, err = f.WriteAt(make([]byte, 1000), 0)
	require.NoError(t, err)
	_, err = f.WriteAt(make([]byte, 10), 500) // an overwrite keeps what it replaced
	require.NoError(t, err)

	fs.mu.Lock()
	require.Len(t, fs.files, 1)
	var n *node
	for n = range fs.files {
	}
	require.Len(t, n.writes, 2)
	require.Empty(t, n.writes[0].old)
	require.Len(t, n.writes[1].old, 10)
	require.Len(t, fs.pending, 1) // the create
	fs.mu.Unlock()

	require.NoError(t, f.Sync())
	fs.mu.Lock()
	require.Empty(t, n.writes) // Sync copies nothing and drops the writes
	fs.mu.Unlock()

	require.NoError(t, f.Close())
	require.NoError(t, fs.Check())
	fs.mu.Lock()
	require.Len(t, fs.files, 1) // the create is pending
	fs.mu.Unlock()

	require.NoError(t, fs.SyncDir(dir))
	require.NoError(t, fs.Check())
	fs.mu.Lock()
	require.Empty(t, fs.files)
	require.Empty(t, fs.pending)
	require.Nil(t, n.fd)
	fs.mu.Unlock()

	// A failed rename leaves nothing behind either.
	require.Error(t, fs.Rename(filepath.Join(dir, "log"), filepath.Join(dir, "nodir", "log")))
	fs.mu.Lock()
	require.Empty(t, fs.files)
	fs.mu.Unlock()
}
