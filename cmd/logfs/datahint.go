package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/logfs/logfs/storage"
	"github.com/logfs/logfs/vfs"
)

// looksLikeDataDir reports whether dir is a data directory already.
func looksLikeDataDir(dir string) bool { return storage.IsDataDir(vfs.Default, dir) }

// checkNotAboveDataDir refuses a --data that is not a data directory but
// holds one or more: a broker's parent folder, say (/var/lib/kafka rather
// than /var/lib/kafka/data). It says that it found none there and where
// one is, before anything is opened or created. A folder that is empty,
// missing, or a data directory itself passes.
func checkNotAboveDataDir(dir string) error {
	if looksLikeDataDir(dir) {
		return nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil // missing or unreadable: the open says so
	}
	var found []string
	for _, e := range entries {
		if p := filepath.Join(dir, e.Name()); e.IsDir() && looksLikeDataDir(p) {
			found = append(found, p)
		}
	}
	if len(found) == 0 {
		return nil
	}
	sort.Strings(found)
	where := found[0] + " is one"
	if len(found) > 1 {
		shown := found
		if len(shown) > 3 {
			shown = append(shown[:3:3], "…")
		}
		where = strings.Join(shown, ", ") + " are"
	}
	return fmt.Errorf("%s is not a data directory (no checkpoints, no partition folders with segments), but %s: give --data %s", dir, where, found[0])
}
