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
func TakeCleanShutdownMarker(fs vfs.FS, dataDir string) (bool, error) {
	p := filepath.Join(dataDir, layout.CleanShutdownFile)
	if _, err := fs.Stat(p); err != nil {
		if isNotExist(err) {
			return false, nil
		}
		return false, err
	}
	if err := fs.Remove(p); err != nil {
		return false, err
	}
	return true, fs.SyncDir(dataDir)
}

// HasCleanShutdownMarker reports whether the marker is present, without
// touching it (for read-only opens).
func HasCleanShutdownMarker(fs vfs.FS, dataDir string) bool {
	_, err := fs.Stat(filepath.Join(dataDir, layout.CleanShutdownFile))
	return err == nil
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
