package fs

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// fakeMountinfo points readMountinfo at lines of the test's for the rest
// of the test.
func fakeMountinfo(t *testing.T, lines ...string) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "mountinfo")
	require.NoError(t, os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644))
	saved := mountinfoPath
	mountinfoPath = p
	t.Cleanup(func() { mountinfoPath = saved })
}

// TestMountpointUnderAutomount: an fstab line with x-systemd.automount
// (README names it) has systemd mount autofs on the mount point and, on
// first access, run mount(8), so the helper, with the autofs mount still
// there: logfs must mount on top of it, as systemd and every other file
// system do. It used to refuse the mount point as "already a mount point",
// so such a line never mounted. Nor may it read the folder, which would
// wait on the very automount that waits on it; so what the folder holds is
// not looked at (here it is not empty). A mount point where logfs or
// anything else is mounted on top of the autofs is still refused.
func TestMountpointUnderAutomount(t *testing.T) {
	mp := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(mp, "under"), 0o755))
	root := "1 0 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw"
	autofs := fmt.Sprintf("40 1 0:50 / %s rw,relatime shared:30 - autofs systemd-1 rw,fd=60,pgrp=1,timeout=0,minproto=5,maxproto=5,direct,pipe_ino=1234", mp)
	fakeMountinfo(t, root, autofs)
	got, err := checkMountpoint(mp)
	require.NoError(t, err)
	require.Equal(t, mp, got)

	logfs := fmt.Sprintf("41 40 0:51 / %s rw,nosuid,nodev,relatime shared:31 - fuse.logfs logfs:/var/lib/logfs rw,user_id=0,group_id=0", mp)
	fakeMountinfo(t, root, autofs, logfs)
	_, err = checkMountpoint(mp)
	require.ErrorIs(t, err, ErrMountpoint)
	require.Contains(t, err.Error(), "already a mount point")

	ext4 := fmt.Sprintf("42 1 8:2 / %s rw,relatime shared:32 - ext4 /dev/sda2 rw", mp)
	fakeMountinfo(t, root, ext4)
	_, err = checkMountpoint(mp)
	require.ErrorIs(t, err, ErrMountpoint)
	require.Contains(t, err.Error(), "already a mount point")
}
