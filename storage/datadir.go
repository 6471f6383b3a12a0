package storage

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strings"
	"time"

	"github.com/logfs/logfs/layout"
	"github.com/logfs/logfs/vfs"
)

// kafkaFiles are files at the top of a data directory that Kafka or logfs
// write, any of which marks a folder as a data directory.
var kafkaFiles = []string{
	layout.RecoveryPointFile, layout.LogStartFile, layout.CleanShutdownFile, layout.LockFile,
	"meta.properties", "replication-offset-checkpoint", "cleaner-offset-checkpoint",
}

// checkDataDir refuses to write into a folder that holds something but
// nothing of a data directory: a folder of backups, say, whose
// "backup-2024" would otherwise be taken for partition 2024 of a topic
// "backup" and written into. A data directory is empty, or holds one of
// kafkaFiles, a topic settings file, or a partition folder with a segment
// file in it. lost+found, at the top of a file system, does not count.
func checkDataDir(fsys vfs.FS, dir string) error {
	entries, err := fsys.ReadDir(dir)
	if errors.Is(err, fs.ErrPermission) {
		return fmt.Errorf("data directory %s: permission denied: you may not read it (%w)", dir, err)
	} else if err != nil {
		return err
	}
	var other []string
	for _, e := range entries {
		name := e.Name()
		if name == "lost+found" {
			continue
		}
		if isDataDirFile(name) {
			return nil
		}
		if e.IsDir() && isPartitionDir(fsys, filepath.Join(dir, name)) {
			return nil
		}
		other = append(other, name)
	}
	if len(other) == 0 {
		return nil
	}
	shown := other
	if len(shown) > 3 {
		shown = append(shown[:3:3], "…")
	}
	return fmt.Errorf("%w: %s holds %s but no checkpoint, lock, topic settings or partition folder with segment files; refusing to write into it (give an empty or new directory, or a Kafka or logfs data directory)",
		ErrNotDataDir, dir, strings.Join(shown, ", "))
}

// IsDataDir reports whether dir holds something only a data directory
// holds: one of the files Kafka or logfs write at its top, a topic
// settings file, or a partition folder with a segment file in it. An
// empty folder is not one (though a writable open makes it one).
func IsDataDir(fsys vfs.FS, dir string) bool {
	entries, err := fsys.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range entries {
		if isDataDirFile(e.Name()) || e.IsDir() && isPartitionDir(fsys, filepath.Join(dir, e.Name())) {
			return true
		}
	}
	return false
}

func isDataDirFile(name string) bool {
	for _, f := range kafkaFiles {
		if name == f {
			return true
		}
	}
	if name == layout.TopicConfigTmp {
		return true
	}
	for _, suffix := range []string{layout.TopicConfigSuffix, layout.LegacyTopicConfigSuffix} {
		if topic, ok := strings.CutSuffix(name, suffix); ok && layout.ValidateTopic(topic) == nil {
			return true
		}
	}
	return false
}

// isPartitionDir reports whether dir is named and filled like a partition
// folder (or one Kafka marked for deletion): a segment file in it.
func isPartitionDir(fsys vfs.FS, dir string) bool {
	name := filepath.Base(dir)
	if _, _, ok := layout.ParsePartitionDirName(name); !ok && !strings.HasSuffix(name, "-delete") {
		return false
	}
	entries, err := fsys.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range entries {
		if _, _, ok := layout.ParseSegmentFileName(e.Name()); ok {
			return true
		}
	}
	return false
}

// lockDir takes the data directory for this process's writes: a lock on
// the directory itself, which no one can unlink away as they can a lock
// file, and one on its .lock file, which a Kafka broker takes too (and
// older logfs releases). The errors say which was refused and why.
//
// A lock held by another process is tried again for up to lockWait: a
// process that is closing the directory (an unmounted mount, whose clean
// shutdown marker is already there) lets go of it a moment later.
func (l *Log) lockDir() (io.Closer, error) {
	dirLock, err := l.fs.Lock(l.dir)
	for deadline := time.Now().Add(lockWait); errors.Is(err, vfs.ErrLocked) && time.Now().Before(deadline); {
		time.Sleep(lockWait / 20)
		dirLock, err = l.fs.Lock(l.dir)
	}
	if err != nil {
		return nil, lockError(l.dir, err, "another logfs process (a running mount?) has it open for writing")
	}
	lockPath := filepath.Join(l.dir, layout.LockFile)
	_, err = l.fs.Stat(lockPath)
	created := errors.Is(err, fs.ErrNotExist)
	fileLock, err := l.fs.Lock(lockPath)
	if err != nil {
		dirLock.Close()
		return nil, lockError(l.dir, err, "another process (a Kafka broker, or an older logfs) holds "+layout.LockFile)
	}
	ls := locks{fileLock, dirLock}
	if created {
		// A durable .lock marks the folder as a data directory before
		// anything else is written into it, so that no crash can leave
		// one that checkDataDir refuses.
		if err := l.fs.SyncDir(l.dir); err != nil {
			ls.Close()
			return nil, err
		}
	}
	return ls, nil
}

func lockError(dir string, err error, who string) error {
	switch {
	case errors.Is(err, vfs.ErrLocked):
		return &lockedError{msg: fmt.Sprintf("data directory %s is in use: %s", dir, who), err: err}
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("data directory %s: permission denied: you may not write to it (%w)", dir, err)
	}
	return fmt.Errorf("lock data directory %s: %w", dir, err)
}

// lockWait is how long lockDir waits for another process to let go.
const lockWait = time.Second

// locks releases several locks, the first first.
type locks []io.Closer

func (ls locks) Close() error {
	var errs []error
	for _, c := range ls {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// lockedError says who holds a data directory; it wraps vfs.ErrLocked
// without repeating it.
type lockedError struct {
	msg string
	err error
}

func (e *lockedError) Error() string { return e.msg }
func (e *lockedError) Unwrap() error { return e.err }
