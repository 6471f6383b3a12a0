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

// checkIsDataDir refuses, for a read-only open, a folder that holds
// something but nothing of a data directory (another program's folder), as
// a writable open does: reading it would find no topics, and warn about
// each of its links and devices. An empty folder passes, and so does one
// that cannot be listed (the open says why).
func checkIsDataDir(dir string) error {
	if looksLikeDataDir(dir) {
		return nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var other []string
	for _, e := range entries {
		if e.Name() != "lost+found" {
			other = append(other, e.Name())
		}
	}
	if len(other) == 0 {
		return nil
	}
	if len(other) > 3 {
		other = append(other[:3:3], "…")
	}
	return fmt.Errorf("%s is not a data directory: it holds %s but no checkpoint, lock, topic settings or partition folder with segment files (give --data a Kafka or logfs data directory)", dir, strings.Join(other, ", "))
}

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
