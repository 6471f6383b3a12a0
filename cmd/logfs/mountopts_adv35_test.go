package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMountTakesEveryFstabWord: the words of fstab and mount(8) that
// libmount hands a mount helper (util-linux's userspace option map:
// user[=NAME], nouser, users, nousers, owner, noowner, group, nogroup,
// _netdev, nofail, defaults; x-* and X-* for other programs) are taken and
// ignored, as README says. user=NAME, what an fstab line "user=alice" gives
// the helper, and the no* forms used to be refused. (The mount point is a
// file: taken words get as far as the mount point, refused ones do not.)
func TestMountTakesEveryFstabWord(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	for _, o := range []string{"user", "user=alice", "nouser", "users", "nousers", "owner", "noowner",
		"group", "nogroup", "_netdev", "nofail", "defaults", "auto", "noauto", "x-systemd.automount",
		"X-mount.mkdir", "comment=systemd.automount", "rw,noatime,nodev,nosuid,exec,suid,dev"} {
		t.Run(o, func(t *testing.T) {
			fails(t, dir, exitFailure, "is not a directory", "mount", "--data", "data", "-o", o, file)
		})
	}
	require.NoDirExists(t, filepath.Join(dir, "data"))
}
