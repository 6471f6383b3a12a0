package storage

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/layout"
)

// TestHardLinkedTmpCheckpointIsReplaced: a hostile user (or a hard-link
// backup, cp -al) leaves a hard link at the name of the temporary file a
// checkpoint is written through. The checkpoint is written from scratch,
// so the link is replaced, as a symbolic link there is (README: "the new
// file takes its place"); the file it shares is never written, and a
// writable open does not fail on it (adv35).
func TestHardLinkedTmpCheckpointIsReplaced(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "data")
	l, err := Open(dir, Options{Logger: testLogger(t), RetentionCheckInterval: -1})
	require.NoError(t, err)
	top, err := l.CreateTopic("t", 1, nil)
	require.NoError(t, err)
	p, _ := top.Partition(0)
	for i := 0; i < 5; i++ {
		_, err := p.Append(values(1, fmt.Sprintf("v%02d", i)))
		require.NoError(t, err)
	}
	require.NoError(t, l.Close())

	outside := filepath.Join(base, "outside")
	require.NoError(t, os.WriteFile(outside, []byte("precious bytes"), 0o600))
	for _, name := range []string{layout.RecoveryPointFile, layout.LogStartFile} {
		require.NoError(t, os.Link(outside, filepath.Join(dir, name+".tmp")))
	}
	require.NoError(t, os.Remove(filepath.Join(dir, layout.CleanShutdownFile)))

	var logs syncBuffer
	l, err = Open(dir, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil)), RetentionCheckInterval: -1})
	require.NoError(t, err, "a hard link at a checkpoint's temporary name does not stop a writable open")
	p, err = l.Partition("t", 0)
	require.NoError(t, err)
	_, err = p.Append(values(1, "after"))
	require.NoError(t, err)
	require.NoError(t, l.Sync())
	require.NoError(t, l.Close())

	b, err := os.ReadFile(outside)
	require.NoError(t, err)
	require.Equal(t, "precious bytes", string(b), "the file the link shares is never written")
	st, err := os.Stat(outside)
	require.NoError(t, err)
	require.Equal(t, uint64(1), uint64(st.Sys().(*syscall.Stat_t).Nlink), "the link is gone")
	for _, name := range []string{layout.RecoveryPointFile, layout.LogStartFile} {
		require.Equal(t, 1, strings.Count(logs.String(), filepath.Join(dir, name+".tmp")), "reported once by name: %s", logs.String())
	}
}
