package peers

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// settle brings a log directory to the page-cache state every measured phase
// starts from, the same for every log: each file is fsynced (so no dirty
// pages of this or an earlier phase are written back during the next one)
// and read once from start to end in 1 MiB read(2)s (so every page is
// cached: reads are measured warm, never against the disk). It runs outside
// timing, on a closed or quiescent log, and returns the bytes in dir.
func settle(dir string) (int64, error) {
	buf := make([]byte, 1<<20)
	var total int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
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

// removeData deletes a data set and waits until the filesystem has committed
// the deletion (fsync of the parent directory forces the journal commit, and
// with it any discard of the freed blocks), so that the cost of freeing one
// log's blocks is not paid inside the next log's measurement.
func removeData(dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(dir))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
