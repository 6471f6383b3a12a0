package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/internal/testuser"
)

// TestDataDirPermissionDenied runs commands as a user who may not use
// root's private data directory: the error says permission denied, and
// whose the directory is, not that it is in use.
func TestDataDirPermissionDenied(t *testing.T) {
	u := testuser.New(t)
	dir, bin := sharedBin(t, "logfs-perm-")
	data := filepath.Join(dir, "data")
	ok(t, dir, "a\n", "topic", "create", "--data", data, "t")
	ok(t, dir, "a\n", "produce", "--data", data, "t")

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"topic", "create", "--data", data, "mine"}, "you may not write to it (it belongs to root, mode drwx------)"},
		{[]string{"produce", "--data", data, "t"}, "you may not write to it"},
		{[]string{"consume", "--data", data, "--offset", "0", "t", "0"}, "you may not read it (it belongs to root"},
		{[]string{"topic", "list", "--data", data}, "you may not read it"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		out, err := u.Command(ctx, bin, c.args...).CombinedOutput()
		cancel()
		require.Error(t, err, "%s", out)
		line := strings.TrimSuffix(string(out), "\n")
		require.NotContains(t, line, "\n", "one line")
		require.Contains(t, line, "permission denied", c.args)
		require.Contains(t, line, c.want, c.args)
		require.NotContains(t, line, "in use", c.args)
	}
	require.Equal(t, "a\n", ok(t, dir, "", "consume", "--data", data, "--offset", "0", "t", "0"))
}

// TestDataInsideMount: a data directory inside a logfs mount is refused
// before anything is created in the mount (mkdir there makes a topic).
func TestDataInsideMount(t *testing.T) {
	dir := t.TempDir()
	mp := filepath.Join(dir, "mnt")
	startMount(t, dir, mp, "--data", "data")
	for _, args := range [][]string{
		{"topic", "create", "--data", filepath.Join(mp, "sub"), "t"},
		{"produce", "--data", filepath.Join(mp, "sub", "deeper"), "t"},
		{"mount", "--data", filepath.Join(mp, "sub"), filepath.Join(dir, "mnt2")},
	} {
		fails(t, dir, exitFailure, "is inside the logfs mount at "+mp+" (of data)", args...)
	}
	entries, err := os.ReadDir(mp)
	require.NoError(t, err)
	require.Empty(t, entries, "no topic made in the mount")
}

// TestNotADataDir: --data pointed at a folder of other things is refused
// with what it holds, and nothing is written into it.
func TestNotADataDir(t *testing.T) {
	dir := t.TempDir()
	backups := filepath.Join(dir, "backups")
	require.NoError(t, os.MkdirAll(filepath.Join(backups, "backup-2024"), 0o755))
	before := snapshot(t, backups)
	fails(t, dir, exitFailure, backups+" holds backup-2024 but no checkpoint", "topic", "create", "--data", backups, "t")
	require.Equal(t, before, snapshot(t, backups))
}
