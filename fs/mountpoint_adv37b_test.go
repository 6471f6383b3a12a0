package fs

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/internal/fusetest"
	"github.com/logfs/logfs/storage"
)

// TestMountRefusesALinkIntoItsDataDirectory: the mount point is a link
// that leads, by the time Mount looks (the caller's check saw it lead
// elsewhere), to an empty folder inside the data directory, or to the
// data directory of a log that has nothing in it yet. Mount follows the
// link, and must still refuse a mount point inside its own data
// directory, or over it (adv37).
func TestMountRefusesALinkIntoItsDataDirectory(t *testing.T) {
	fusetest.Require(t)
	base := t.TempDir()
	data := filepath.Join(base, "data")
	l, err := storage.Open(data, storage.Options{Logger: quietLogger(), RetentionCheckInterval: -1, ReadOnly: false})
	require.NoError(t, err)
	defer l.Close()
	empty := filepath.Join(data, "empty.planted")
	require.NoError(t, os.Mkdir(empty, 0o755))
	for name, target := range map[string]string{"inside": empty, "relative inside": "data/empty.planted"} {
		t.Run(name, func(t *testing.T) {
			link := filepath.Join(base, "link")
			os.Remove(link)
			require.NoError(t, os.Symlink(target, link))
			srv, err := Mount(link, l, Options{Logger: quietLogger()})
			if errors.Is(err, ErrNoFUSE) {
				fusetest.Unusable(t, err.Error())
			}
			if err == nil {
				unmountOrDetach(t, srv, link)
			}
			require.ErrorIs(t, err, ErrMountpoint)
			require.ErrorContains(t, err, "inside the data directory")
		})
	}
}
