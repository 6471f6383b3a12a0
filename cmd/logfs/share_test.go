package main

import (
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMountShare mounts with --allow-other -o umask=027,gid=GROUP and
// checks the modes and group the nodes show; the modes by default; and
// the refusals of bad values.
func TestMountShare(t *testing.T) {
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Skip("no user nobody to take a group from")
	}
	g, err := user.LookupGroupId(nobody.Gid)
	require.NoError(t, err)
	gid, err := strconv.ParseUint(g.Gid, 10, 32)
	require.NoError(t, err)

	dir := t.TempDir()
	ok(t, dir, "", "topic", "create", "t")
	modes := func(mp string) map[string]os.FileMode {
		out := map[string]os.FileMode{}
		for _, rel := range []string{".", "t/0", "t/0/offset/0", "t/0/append"} {
			st, err := os.Stat(filepath.Join(mp, rel))
			require.NoError(t, err, rel)
			out[rel] = st.Mode().Perm()
		}
		return out
	}

	m := startMount(t, dir, filepath.Join(dir, "private"))
	require.Equal(t, map[string]os.FileMode{".": 0o700, "t/0": 0o500, "t/0/offset/0": 0o400, "t/0/append": 0o200}, modes(m.mp))
	require.NoError(t, m.cmd.Process.Signal(syscall.SIGTERM))
	require.Equal(t, 0, m.wait(t), m.stderr())

	m = startMount(t, dir, filepath.Join(dir, "shared"), "--allow-other", "-o", "umask=027,gid="+g.Name)
	require.Equal(t, map[string]os.FileMode{".": 0o750, "t/0": 0o550, "t/0/offset/0": 0o440, "t/0/append": 0o200}, modes(m.mp))
	st, err := os.Stat(filepath.Join(m.mp, "t", "0", "info"))
	require.NoError(t, err)
	require.Equal(t, uint32(gid), st.Sys().(*syscall.Stat_t).Gid)
	require.NoError(t, m.cmd.Process.Signal(syscall.SIGTERM))
	require.Equal(t, 0, m.wait(t), m.stderr())

	// umask without --allow-other shares nothing, and says so.
	m = startMount(t, dir, filepath.Join(dir, "warned"), "-o", "umask=0")
	require.Contains(t, m.stderr(), "-o umask= shares nothing without --allow-other")
	require.Equal(t, os.FileMode(0o700), modes(m.mp)["."])

	for _, bad := range []string{"umask=8", "umask=1000", "umask=", "gid=no-such-group-here"} {
		fails(t, dir, exitUsage, "-o "+bad, "mount", "--allow-other", "-o", bad, filepath.Join(dir, "never"))
	}
}
