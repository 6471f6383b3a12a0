package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestPlantedLinksLeftAlone plants, in a data directory, a link as a new
// segment, a link in place of the first segment's index and a FIFO as a
// segment, and runs check, check --repair, produce, consume, a mount with
// an append and topic delete: the target's bytes never change, nothing
// hangs, and check names what it left alone (issue 14, point 1).
func TestPlantedLinksLeftAlone(t *testing.T) {
	dir := setupConsume(t)
	data := filepath.Join(dir, "logfs-data")
	target := filepath.Join(t.TempDir(), "precious")
	require.NoError(t, os.WriteFile(target, []byte("precious bytes"), 0o600))
	part := filepath.Join(data, "orders-0")
	newLog := filepath.Join(part, "00000000000000000500.log")
	index := filepath.Join(part, "00000000000000000000.index")
	fifo := filepath.Join(part, "00000000000000000700.log")
	require.NoError(t, os.Symlink(target, newLog))
	require.NoError(t, os.Remove(index))
	require.NoError(t, os.Symlink(target, index))
	require.NoError(t, unix.Mkfifo(fifo, 0o600))
	untouched := func(step string) {
		t.Helper()
		b, err := os.ReadFile(target)
		require.NoError(t, err)
		require.Equal(t, "precious bytes", string(b), "after %s", step)
		st, err := os.Lstat(newLog)
		require.NoError(t, err, "after %s", step)
		require.NotZero(t, st.Mode()&os.ModeSymlink, "after %s: the planted .log is left alone", step)
	}

	rel := func(p string) string { r, _ := filepath.Rel(dir, p); return r }
	// The index read-only check cannot use is a problem, named; the
	// others are named and left alone.
	r := logfs(t, dir, "", "check")
	require.Equal(t, 1, r.code, r.stderr)
	require.Contains(t, r.stdout, "check failed: orders-0: open "+rel(index)+": a symbolic link")
	require.Contains(t, r.stdout, "path="+rel(newLog)+" err=\"a symbolic link", "check names the planted link")
	require.Contains(t, r.stdout, "path="+rel(fifo)+" err=\"not a regular file", "check names the planted FIFO")
	untouched("check")
	// --repair rebuilds the index in place of the link, never through it.
	out := ok(t, dir, "", "check", "--repair")
	require.Contains(t, out, rel(newLog))
	untouched("check --repair")
	st, err := os.Lstat(index)
	require.NoError(t, err)
	require.True(t, st.Mode().IsRegular(), "the index is rebuilt: %v", st.Mode())
	require.Contains(t, ok(t, dir, "", "check"), ": OK")
	ok(t, dir, "more\n", "produce", "orders")
	untouched("produce")
	got := ok(t, dir, "", "consume", "--offset", "earliest", "orders", "0")
	require.NotContains(t, got, "precious", "a planted .log is not served")
	require.True(t, strings.HasSuffix(got, "more\n"), "the append went in: %q", got[max(0, len(got)-40):])

	var b []byte
	mp := filepath.Join(dir, "mnt")
	m := startMount(t, dir, mp)
	require.NoError(t, os.WriteFile(filepath.Join(mp, "orders", "0", "append"), []byte("through the mount\n"), 0))
	b, err = os.ReadFile(filepath.Join(mp, "orders", "0", "offset", "200"))
	require.NoError(t, err)
	require.NotContains(t, string(b), "precious")
	require.NoError(t, m.cmd.Process.Signal(unix.SIGTERM))
	require.Zero(t, m.wait(t))
	untouched("mount and append")
	ok(t, dir, "", "topic", "delete", "orders")
	b, err = os.ReadFile(target)
	require.NoError(t, err)
	require.Equal(t, "precious bytes", string(b), "after topic delete")
	_, err = os.Lstat(part)
	require.ErrorIs(t, err, os.ErrNotExist)
}
