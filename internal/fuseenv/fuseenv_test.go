package fuseenv

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCheckMissingDevice(t *testing.T) {
	saved := Device
	t.Cleanup(func() { Device = saved })
	Device = filepath.Join(t.TempDir(), "fuse")
	err := Check(false)
	require.ErrorContains(t, err, Device+" does not exist (load the fuse kernel module")
}

func TestCheckDeviceDenied(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root may open any file; TestMountRefusesWithoutFUSE in cmd/logfs runs this as another user")
	}
	if Fusermount() == "" {
		t.Skip("no fusermount3: Check stops before opening the device")
	}
	saved := Device
	t.Cleanup(func() { Device = saved })
	Device = filepath.Join(t.TempDir(), "fuse")
	require.NoError(t, os.WriteFile(Device, nil, 0o600))
	require.NoError(t, os.Chmod(Device, 0))
	err := Check(false)
	require.ErrorContains(t, err, "may not open "+Device+" (----------")
	require.ErrorContains(t, err, "chmod 0666 "+Device)
}

func TestUserAllowOther(t *testing.T) {
	saved := ConfFile
	t.Cleanup(func() { ConfFile = saved })
	ConfFile = filepath.Join(t.TempDir(), "fuse.conf")
	for conf, want := range map[string]allowOtherWord{
		"":                                   allowOtherNo,
		"#user_allow_other\n":                allowOtherNo,
		"# comment\n  user_allow_other  \n":  allowOtherYes,
		"mount_max = 10\nuser_allow_other\n": allowOtherYes,
		"user_allow_other # trailing note\n": allowOtherYes,
		"user_allow_others\n":                allowOtherNo,
		"allow_other\n":                      allowOtherNo,
	} {
		require.NoError(t, os.WriteFile(ConfFile, []byte(conf), 0o644))
		require.Equal(t, want, userAllowOther(), "%q", conf)
	}
	require.NoError(t, os.Remove(ConfFile))
	require.Equal(t, allowOtherNo, userAllowOther(), "no file")
}
