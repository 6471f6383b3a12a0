package fs

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/internal/tmpfs"
)

// TestMountDeviceIsFUSEOnly: Unmount finds the mount by the device
// mountDevice noted, and unmounts every mount of that device. A point
// whose top mount is not FUSE (an automount point, a tmpfs) must give no
// device, or a stopping mount would unmount that file system wherever it
// is mounted.
func TestMountDeviceIsFUSEOnly(t *testing.T) {
	dir := tmpfs.Mount(t, 1<<20)
	require.Empty(t, mountDevice(dir), "a tmpfs is not our mount")
	require.Empty(t, mountDevice(t.TempDir()), "nothing is mounted there")
}
