package storage

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/logfs/logfs/layout"
	"github.com/logfs/logfs/vfs"
)

// tree lists the names under dir, recursively, as "a", "a/b".
func tree(t *testing.T, dir string) []string {
	t.Helper()
	var names []string
	require.NoError(t, filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if rel, _ := filepath.Rel(dir, p); rel != "." {
			names = append(names, rel)
		}
		return nil
	}))
	return names
}

// TestOpenRefusesNonDataDir: a writable Open of a folder that holds files
// but nothing of a data directory refuses, naming what it found, and
// writes nothing; folders with any sign of a data directory open.
func TestOpenRefusesNonDataDir(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "backup-2024"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "backup-2024", "dump.sql"), []byte("x"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("x"), 0o644))
	before := tree(t, dir)
	_, err := Open(dir, Options{Logger: testLogger(t), RetentionCheckInterval: -1})
	require.ErrorIs(t, err, ErrNotDataDir)
	require.Contains(t, err.Error(), "backup-2024, notes.txt")
	require.Equal(t, before, tree(t, dir), "nothing written")

	sign := func(name string, segment bool) func(string) {
		return func(dir string) {
			if segment {
				require.NoError(t, os.MkdirAll(filepath.Join(dir, name), 0o755))
				require.NoError(t, os.WriteFile(filepath.Join(dir, name, layout.SegmentFileName(0, layout.LogSuffix)), nil, 0o644))
				return
			}
			require.NoError(t, os.WriteFile(filepath.Join(dir, name), nil, 0o644))
		}
	}
	for name, plant := range map[string]func(string){
		"empty":              func(string) {},
		"only lost+found":    func(d string) { require.NoError(t, os.Mkdir(filepath.Join(d, "lost+found"), 0o700)) },
		"a lock file":        sign(layout.LockFile, false),
		"a checkpoint":       sign(layout.RecoveryPointFile, false),
		"kafka's meta":       sign("meta.properties", false),
		"topic settings":     sign("orders"+layout.TopicConfigSuffix, false),
		"a partition folder": sign("orders-0", true),
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			require.NoError(t, os.Mkdir(filepath.Join(dir, "other"), 0o755))
			if name == "empty" || name == "only lost+found" {
				require.NoError(t, os.Remove(filepath.Join(dir, "other")))
			}
			plant(dir)
			l, err := Open(dir, Options{Logger: testLogger(t), RetentionCheckInterval: -1})
			require.NoError(t, err)
			require.NoError(t, l.Close())
		})
	}
}

// TestLockSurvivesUnlink: removing .lock from under a writable log does
// not let a second one open the directory (and overwrite acknowledged
// records): the directory itself is locked.
func TestLockSurvivesUnlink(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, Options{})
	top, err := l.CreateTopic("t", 1, nil)
	require.NoError(t, err)
	p, err := top.Partition(0)
	require.NoError(t, err)
	_, err = p.Append([]Record{{Value: []byte("acknowledged")}})
	require.NoError(t, err)
	require.NoError(t, os.Remove(filepath.Join(dir, layout.LockFile)))
	_, err = Open(dir, Options{Logger: testLogger(t), RetentionCheckInterval: -1})
	require.ErrorIs(t, err, vfs.ErrLocked)
	require.Contains(t, err.Error(), "another logfs process")
}

// TestLockConflictsWithKafka: a POSIX record lock on .lock, which a Kafka
// broker takes (Java's FileChannel.tryLock), keeps logfs out, and names
// the likely holder.
func TestLockConflictsWithKafka(t *testing.T) {
	dir := t.TempDir()
	f, err := os.OpenFile(filepath.Join(dir, layout.LockFile), os.O_RDWR|os.O_CREATE, 0o644)
	require.NoError(t, err)
	defer f.Close()
	lk := unix.Flock_t{Type: unix.F_WRLCK, Start: 0, Len: 1<<63 - 1}
	require.NoError(t, unix.FcntlFlock(f.Fd(), unix.F_SETLK, &lk))
	_, err = Open(dir, Options{Logger: testLogger(t), RetentionCheckInterval: -1})
	require.ErrorIs(t, err, vfs.ErrLocked)
	require.Contains(t, err.Error(), "Kafka broker")
	lk.Type = unix.F_UNLCK
	require.NoError(t, unix.FcntlFlock(f.Fd(), unix.F_SETLK, &lk))
	l, err := Open(dir, Options{Logger: testLogger(t), RetentionCheckInterval: -1})
	require.NoError(t, err)
	require.NoError(t, l.Close())
}
