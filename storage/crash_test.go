package storage

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/internal/crashfs"
	"github.com/logfs/logfs/layout"
	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/recovery"
	"github.com/logfs/logfs/vfs"
)

// TestNewDataDirIsDurable: records synced into a data directory that Open
// created survive a crash that keeps nothing unsynced; so do the folders
// above it that Open created.
func TestNewDataDirIsDurable(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "new", "data")
	fs := crashfs.New(vfs.Default)
	l, err := Open(dir, Options{FS: fs, Logger: testLogger(t), RetentionCheckInterval: -1})
	require.NoError(t, err)
	top, err := l.CreateTopic("t", 1, nil)
	require.NoError(t, err)
	p, err := top.Partition(0)
	require.NoError(t, err)
	_, err = p.Append(values(3, "x"))
	require.NoError(t, err)
	require.NoError(t, p.Sync())
	require.NoError(t, fs.Crash(crashfs.CrashConfig{Mode: crashfs.DropAll}))
	l.Close() // fails: the file system crashed

	l = openLog(t, dir, Options{})
	p, err = l.Partition("t", 0)
	require.NoError(t, err)
	require.Equal(t, []string{"0:x-0", "1:x-1", "2:x-2"}, readAll(t, p, 0))
}

// opLog records the mutating operations that reach the file system.
type opLog struct {
	vfs.FS
	mu  sync.Mutex
	ops []string
}

func (o *opLog) add(op string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ops = append(o.ops, op)
}

func (o *opLog) Rename(from, to string) error {
	o.add("rename " + filepath.Base(from) + " " + filepath.Base(to))
	return o.FS.Rename(from, to)
}

// TestRetentionWritesLogStartFirst: the log start offset that hides the
// condemned segments is durable before the first of them is renamed.
func TestRetentionWritesLogStartFirst(t *testing.T) {
	dir := t.TempDir()
	buildSegments(t, dir, 400)
	fs := &opLog{FS: vfs.Default}
	l := openLog(t, dir, Options{FS: fs})
	top, err := l.Topic("t")
	require.NoError(t, err)
	require.NoError(t, top.SetConfig(small("segment.bytes=4000", "index.interval.bytes=300", "retention.bytes=8000")))
	fs.ops = nil
	n, err := l.EnforceRetention()
	require.NoError(t, err)
	require.Greater(t, n, 3)
	ckpt, firstDeleted := -1, -1
	for i, op := range fs.ops {
		if ckpt < 0 && strings.HasPrefix(op, "rename "+layout.LogStartFile+".tmp") {
			ckpt = i
		}
		if firstDeleted < 0 && strings.HasSuffix(op, layout.DeletedSuffix) {
			firstDeleted = i
		}
	}
	require.GreaterOrEqual(t, ckpt, 0, "the log start checkpoint is written: %v", fs.ops)
	require.Greater(t, firstDeleted, ckpt, "before any segment is renamed: %v", fs.ops)
	p, err := l.Partition("t", 0)
	require.NoError(t, err)
	m, err := recovery.ReadCheckpoint(vfs.Default, filepath.Join(dir, layout.LogStartFile))
	require.NoError(t, err)
	require.Equal(t, p.StartOffset(), m[recovery.TopicPartition{Topic: "t", Partition: 0}])
}

// TestRetentionCrashLeavesNoHole crashes a retention that deletes several
// segments at each of its operations, keeping a random subset of the
// renames: the reopened log never shows records on both sides of a
// deleted segment.
func TestRetentionCrashLeavesNoHole(t *testing.T) {
	src := t.TempDir()
	buildSegments(t, src, 400)
	// retain opens the log and sets retention (counting those operations
	// in *before), then enforces it.
	retain := func(dir string, fs *crashfs.FS, before *int) (*Log, error) {
		l, err := Open(dir, Options{FS: fs, Logger: testLogger(t), RetentionCheckInterval: -1})
		if err != nil {
			return nil, err
		}
		top, err := l.Topic("t")
		if err != nil {
			return l, err
		}
		if err := top.SetConfig(small("segment.bytes=4000", "index.interval.bytes=300", "retention.bytes=8000", "file.delete.delay.ms=3600000")); err != nil {
			return l, err
		}
		if before != nil {
			*before = fs.Ops()
		}
		_, err = l.EnforceRetention()
		return l, err
	}
	n := crashEachOp(t, src, retain, func(snap string, k int, seed uint64) {
		l, err := Open(snap, Options{Logger: testLogger(t), RetentionCheckInterval: -1})
		require.NoError(t, err)
		p, err := l.Partition("t", 0)
		require.NoError(t, err)
		got := readAll(t, p, p.StartOffset())
		require.Len(t, got, int(p.EndOffset()-p.StartOffset()), "k=%d seed=%d: no hole in [%d, %d)", k, seed, p.StartOffset(), p.EndOffset())
		require.Equal(t, record.Offset(400), p.EndOffset())
		for i, r := range got {
			require.True(t, strings.HasPrefix(r, fmt.Sprintf("%d:record-%04d-", p.StartOffset()+record.Offset(i), p.StartOffset()+record.Offset(i))), r)
		}
		require.NoError(t, l.Check())
		require.NoError(t, l.Close())
	})
	require.Greater(t, n, 10, "retention renames files")
}

// crashEachOp runs op on a copy of the data directory src through crashfs
// once to count its file system operations (op sets *before to the count
// when the part under test begins), then again on a fresh copy for each
// of those operations k and three seeds, crashing at k and keeping a
// random subset of what was not synced (crashfs.Reorder), and hands a copy
// of what the crash left to check. It returns how many operations the
// part under test made.
func crashEachOp(t *testing.T, src string, op func(dir string, fs *crashfs.FS, before *int) (*Log, error),
	check func(snap string, k int, seed uint64)) int {
	t.Helper()
	probe := shmTempDir(t)
	copyDir(t, src, probe)
	cfs := crashfs.New(vfs.Default)
	var from int
	l, err := op(probe, cfs, &from)
	require.NoError(t, err)
	to := cfs.Ops()
	require.NoError(t, l.Close())
	for k := from; k <= to; k++ {
		for seed := uint64(0); seed < 3; seed++ {
			dir := shmTempDir(t)
			copyDir(t, src, dir)
			cfs := crashfs.New(vfs.Default)
			cfg := crashfs.CrashConfig{Mode: crashfs.Reorder, Rand: rand.New(rand.NewPCG(seed, uint64(k)))}
			cfs.CrashAt(k, cfg)
			l, _ := op(dir, cfs, nil)
			if crashed, _ := cfs.Crashed(); !crashed {
				// A background flush took operation k's number, or op
				// finished: crash now.
				require.NoError(t, cfs.Crash(cfg))
			}
			snap := shmTempDir(t)
			copyDir(t, dir, snap)
			if l != nil {
				l.Close()
			}
			check(snap, k, seed)
		}
	}
	return to - from
}

// shmTempDir is t.TempDir on a tmpfs when there is one: crash tests model
// durability with crashfs, so real fsyncs only cost time.
func shmTempDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("/dev/shm", "logfs-storage-test-")
	if err != nil {
		return t.TempDir()
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// copyDir copies a directory tree into a new directory.
func copyDir(t *testing.T, from, to string) {
	t.Helper()
	require.NoError(t, os.CopyFS(to, os.DirFS(from)))
}

// TestCheckpointsLogStartFirst: the log-start checkpoint is in place before
// the recovery-point checkpoint is written, so a crash between them never
// leaves a recovery point newer than the log start (see writeCheckpoints).
func TestCheckpointsLogStartFirst(t *testing.T) {
	dir := t.TempDir()
	buildSegments(t, dir, 100)
	fs := &opLog{FS: vfs.Default}
	l := openLog(t, dir, Options{FS: fs})
	fs.mu.Lock()
	fs.ops = nil
	fs.mu.Unlock()
	require.NoError(t, l.Sync())
	ls, rp := -1, -1
	for i, op := range fs.ops {
		switch {
		case strings.HasPrefix(op, "rename "+layout.LogStartFile+".tmp"):
			ls = i
		case strings.HasPrefix(op, "rename "+layout.RecoveryPointFile+".tmp"):
			rp = i
		}
	}
	require.GreaterOrEqual(t, ls, 0, "%v", fs.ops)
	require.Greater(t, rp, ls, "%v", fs.ops)
}
