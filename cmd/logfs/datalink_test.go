package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDataDirIsALink gives every command a data directory whose own path
// is a symbolic link, which README allows ("the operator's choice"): each
// must work through it, and the lock taken through the link must be the
// lock of the directory it names, so a writer through the real path is
// refused while one through the link holds it.
func TestDataDirIsALink(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "disk", "logfs")
	require.NoError(t, os.MkdirAll(real, 0o700))
	link := filepath.Join(dir, "data")
	require.NoError(t, os.Symlink(real, link))

	ok(t, dir, "", "topic", "create", "--data", link, "--partitions", "2", "orders")
	ok(t, dir, "a\nb\n", "produce", "--data", link, "orders", "1")
	require.Equal(t, "a\nb\n", ok(t, dir, "", "consume", "--data", link, "--offset", "0", "orders", "1"))
	require.Equal(t, "a\nb\n", ok(t, dir, "", "consume", "--data", real, "--offset", "0", "orders", "1"))
	require.Contains(t, ok(t, dir, "", "topic", "list", "--data", link), "orders")
	ok(t, dir, "", "check", "--data", link)
	_, err := os.Lstat(filepath.Join(real, "orders-1"))
	require.NoError(t, err, "the partition is in the directory the link names")

	mp := filepath.Join(dir, "mnt")
	require.NoError(t, os.Mkdir(mp, 0o700))
	startMount(t, dir, mp, "--data", link)
	r := logfs(t, dir, "c\n", "produce", "--data", real, "orders", "1")
	require.Equal(t, exitFailure, r.code, "a second writer through the real path: %s", r.stderr)
	require.Contains(t, r.stderr, "is in use")
	require.NoError(t, os.WriteFile(filepath.Join(mp, "orders", "1", "append"), []byte("c\n"), 0))
	got, err := os.ReadFile(filepath.Join(mp, "orders", "1", "offset", "0"))
	require.NoError(t, err)
	require.Equal(t, "a\nb\nc\n", string(got))
	require.False(t, strings.Contains(r.stderr, "symbolic link"), r.stderr)
}
