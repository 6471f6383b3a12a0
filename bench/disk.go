package bench

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/logfs/logfs/vfs"
)

// settle makes every file of dir durable and reads it once, so that the
// next phase starts without pending writeback and with a warm page cache,
// the same for every subject.
func settle(dir string) error {
	buf := make([]byte, 1<<20)
	mounts := mountsUnder(dir)
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && slices.Contains(mounts, path) {
			return filepath.SkipDir // never through a mount
		}
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := f.Sync(); err != nil {
			return err
		}
		for {
			if _, err := f.Read(buf); err == io.EOF {
				return nil
			} else if err != nil {
				return err
			}
		}
	})
}

// removeSynced removes a data set and commits the removal, so that freeing
// its blocks is not paid inside the next measurement.
func removeSynced(dir string) error {
	if dir == "" {
		return nil
	}
	if mps := mountsUnder(dir); len(mps) > 0 {
		return fmt.Errorf("not removing %s: %s %w", dir, strings.Join(mps, ", "), ErrStillMounted)
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	return vfs.Default.SyncDir(filepath.Dir(dir))
}

// dirSize is the total size of the regular files under dir.
func dirSize(dir string) (int64, error) {
	var total int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		info, err := d.Info()
		if err == nil {
			total += info.Size()
		}
		return err
	})
	return total, err
}
