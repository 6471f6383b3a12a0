package storage

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/layout"
)

// TestFileAtPartitionFolderNameIsNamed: a regular file stands where a
// partition's folder belongs ("t-1" made a file). The partition is taken
// for missing, as Kafka does, but not silently: a link or a FIFO there is
// named as left alone, and so is the file, at a writable and a read-only
// open alike, and the file is never removed (adv37).
func TestFileAtPartitionFolderNameIsNamed(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	l, err := Open(dir, Options{Logger: testLogger(t), RetentionCheckInterval: -1})
	require.NoError(t, err)
	_, err = l.CreateTopic("t", 2, nil)
	require.NoError(t, err)
	require.NoError(t, l.Close())

	part := filepath.Join(dir, layout.PartitionDirName("t", 1))
	require.NoError(t, os.RemoveAll(part))
	require.NoError(t, os.WriteFile(part, []byte("someone's bytes"), 0o600))

	for _, ro := range []bool{false, true} {
		var logs syncBuffer
		l, err := Open(dir, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil)), RetentionCheckInterval: -1, ReadOnly: ro})
		require.NoError(t, err, "read-only %v", ro)
		_, err = l.Partition("t", 1)
		require.Error(t, err, "read-only %v: the partition is missing", ro)
		require.NoError(t, l.Close())
		require.Equal(t, 1, strings.Count(logs.String(), "path="+part), "read-only %v: named once: %s", ro, logs.String())
		b, err := os.ReadFile(part)
		require.NoError(t, err)
		require.Equal(t, "someone's bytes", string(b), "read-only %v: the file is left alone", ro)
	}
}
