package storage

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// modesUnder returns the permission bits of everything under dir (dir
// itself as "."), by path.
func modesUnder(t *testing.T, dir string) map[string]os.FileMode {
	t.Helper()
	out := map[string]os.FileMode{}
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		st, err := os.Lstat(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[rel] = st.Mode().Perm()
		return nil
	}))
	return out
}

// useLog creates a topic, appends across a roll, rebuilds an index and
// closes: every kind of file a data directory gets.
func useLog(t *testing.T, dir string) {
	t.Helper()
	l, err := Open(dir, Options{Logger: testLogger(t), RetentionCheckInterval: -1})
	require.NoError(t, err)
	topic, err := l.CreateTopic("t", 2, small("segment.bytes=200", "flush.ms=1000"))
	require.NoError(t, err)
	p, err := topic.Partition(0)
	require.NoError(t, err)
	for range 10 {
		_, err := p.Append([]Record{{Value: make([]byte, 50)}})
		require.NoError(t, err)
	}
	v, err := p.NewView(Values, 0)
	require.NoError(t, err)
	_, err = v.ReadAt(make([]byte, 10), 0)
	require.NoError(t, err)
	v.Close()
	require.NoError(t, l.Close())
	// A missing index is rebuilt at the next open.
	require.NoError(t, os.Remove(filepath.Join(dir, "t-0", "00000000000000000000.index")))
	l, err = Open(dir, Options{Logger: testLogger(t), RetentionCheckInterval: -1})
	require.NoError(t, err)
	require.NoError(t, l.Close())
}

// TestDataDirModes: a data directory Open creates is owner-only, and so is
// everything in it; an existing one keeps its mode, which what is created
// inside follows.
func TestDataDirModes(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	for name, tc := range map[string]struct {
		existing          os.FileMode // 0: Open creates it
		wantDir, wantFile os.FileMode
	}{
		"new":          {0, 0o700, 0o600},
		"group shared": {0o750, 0o750, 0o640},
		"kafka's":      {0o755, 0o755, 0o644},
	} {
		t.Run(name, func(t *testing.T) {
			parent := t.TempDir()
			dir := filepath.Join(parent, "a", "data")
			if tc.existing != 0 {
				require.NoError(t, os.MkdirAll(dir, 0o700))
				require.NoError(t, os.Chmod(dir, tc.existing))
			}
			useLog(t, dir)
			modes := modesUnder(t, dir)
			require.Greater(t, len(modes), 10, "%v", modes)
			require.Contains(t, modes, filepath.Join("t-0", "00000000000000000000.index"))
			require.Contains(t, modes, "recovery-point-offset-checkpoint")
			for p, m := range modes {
				st, err := os.Stat(filepath.Join(dir, p))
				require.NoError(t, err)
				want := tc.wantFile
				if st.IsDir() {
					want = tc.wantDir
				}
				require.Equal(t, want, m, "%s is %v", p, m)
			}
			if tc.existing == 0 {
				st, err := os.Stat(filepath.Join(parent, "a"))
				require.NoError(t, err)
				require.Equal(t, os.FileMode(0o700), st.Mode().Perm(), "a missing parent")
			}
		})
	}
}
