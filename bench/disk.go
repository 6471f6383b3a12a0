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

// Settle brings the data set in dir to the state every measured phase
// starts from, the same for every subject or log: each regular file is
// fsynced, so that no dirty pages of this or an earlier phase are written
// back during the next one, and read once from start to end in 1 MiB
// read(2)s, so that reads are measured warm, from the page cache. It never
// walks into a mount point. It runs outside timing, on a closed or
// quiescent data set, and returns the bytes it read: the data set's size.
// The bench/peers harness settles its data sets with it too.
func Settle(dir string) (int64, error) {
	buf := make([]byte, 1<<20)
	mounts := mountsUnder(dir)
	var total int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
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
			n, err := f.Read(buf)
			total += int64(n)
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
		}
	})
	return total, err
}

// RemoveSynced removes a data set and commits the removal (fsync of the
// parent directory forces the journal commit, and with it any discard of
// the freed blocks), so that freeing one data set's blocks is not paid
// inside the next measurement. "" is no data set. It refuses, with
// ErrStillMounted, to remove anything through a live mount. The bench/peers
// harness removes its data sets with it too.
func RemoveSynced(dir string) error {
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
