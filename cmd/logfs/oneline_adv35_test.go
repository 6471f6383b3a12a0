package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestOneLineKeepsLogfsInNames: the package prefixes oneLine drops
// ("logfs: ", "logfs/storage: ") are dropped where they start the message
// or a part of it, never out of a path or a value that ends in "logfs",
// such as README's own /var/lib/logfs and /mnt/logfs.
func TestOneLineKeepsLogfsInNames(t *testing.T) {
	for name, tc := range map[string]struct {
		err  error
		want string
	}{
		"path":          {fmt.Errorf("stat /mnt/logfs: %w", os.ErrPermission), "stat /mnt/logfs: permission denied"},
		"value":         {errors.New("-o gid=logfs: no group \"logfs\""), "-o gid=logfs: no group \"logfs\""},
		"relative path": {errors.New("open data directory logfs: permission denied"), "open data directory logfs: permission denied"},
		"nested path":   {errors.New("open /srv/logfs/storage: bad"), "open /srv/logfs/storage: bad"},
		"sentinel":      {fmt.Errorf("open /var/lib/logfs: %w", errors.New("logfs/storage: no such topic")), "open /var/lib/logfs: no such topic"},
		"first":         {errors.New("logfs: bad mount point: /mnt/logfs is not empty"), "bad mount point: /mnt/logfs is not empty"},
		"after a line":  {errors.New("a\nlogfs: b"), "a; b"},
		"in brackets":   {fmt.Errorf("t partition 0: deleted (%w)", errors.New("logfs/storage: no such topic")), "t partition 0: deleted (no such topic)"},
	} {
		t.Run(name, func(t *testing.T) {
			require.Equal(t, tc.want, oneLine(tc.err))
		})
	}
}

// TestMountErrorNamesLogfsPaths runs the mount with a mount point and a
// group whose names end in "logfs": the one error line names them whole.
func TestMountErrorNamesLogfsPaths(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	fails(t, dir, exitFailure, "stat "+file+"/logfs: not a directory", "mount", "--data", "data", filepath.Join(file, "logfs"))
	fails(t, dir, exitUsage, `-o gid=nosuchgroup-logfs: no group "nosuchgroup-logfs"`, "mount", "-o", "gid=nosuchgroup-logfs", "mnt")
	require.NoDirExists(t, filepath.Join(dir, "data"))
}
