package recovery

import (
	"os"
	"path/filepath"

	"github.com/logfs/logfs/layout"
	"github.com/logfs/logfs/vfs"
)

// TakeCleanShutdownMarker reports whether the data directory was shut down
// cleanly, and deletes the marker at once: a crash while loading must not
// leave it behind to vouch for a half-loaded log (KAFKA-10471).
//
// Only a regular file is the marker: a folder, link, FIFO… planted at its
// name vouches for nothing and is left alone (the next clean shutdown
// writes the marker in its place; see vfs.Confined).
func TakeCleanShutdownMarker(fs vfs.FS, dataDir string) (bool, error) {
	p := filepath.Join(dataDir, layout.CleanShutdownFile)
	st, err := fs.Stat(p)
	switch {
	case isNotExist(err) || vfs.IsPlanted(err):
		return false, nil
	case err != nil:
		return false, err
	case !st.Mode().IsRegular():
		return false, nil
	}
	if err := fs.Remove(p); err != nil {
		return false, err
	}
	return true, fs.SyncDir(dataDir)
}

// HasCleanShutdownMarker reports whether the marker is present, without
// touching it (for read-only opens).
func HasCleanShutdownMarker(fs vfs.FS, dataDir string) bool {
	st, err := fs.Stat(filepath.Join(dataDir, layout.CleanShutdownFile))
	return err == nil && st.Mode().IsRegular()
}

// WriteCleanShutdownMarker writes the marker, durably. Call it only after
// every partition is flushed and closed and the checkpoints are written.
func WriteCleanShutdownMarker(fs vfs.FS, dataDir string) error {
	p := filepath.Join(dataDir, layout.CleanShutdownFile)
	f, err := fs.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return fs.SyncDir(dataDir)
}
