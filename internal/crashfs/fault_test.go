package crashfs_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/internal/crashfs"
	"github.com/logfs/logfs/vfs"
)

// opEnv is what the steps of a workload share.
type opEnv struct {
	fs  *crashfs.FS
	dir string
	f   vfs.File
}

// opSteps is a workload of one mutating operation per step.
var opSteps = []struct {
	name string
	do   func(e *opEnv) error
}{
	{"mkdir", func(e *opEnv) error { return e.fs.MkdirAll(filepath.Join(e.dir, "p", "q"), 0o755) }},
	{"create", func(e *opEnv) (err error) {
		e.f, err = e.fs.OpenFile(filepath.Join(e.dir, "p", "log"), os.O_RDWR|os.O_CREATE, 0o644)
		return err
	}},
	{"write", func(e *opEnv) error { _, err := e.f.WriteAt([]byte("hello"), 0); return err }},
	{"append", func(e *opEnv) error { _, err := e.f.WriteAt([]byte(" world"), 5); return err }},
	{"sync", func(e *opEnv) error { return e.f.Sync() }},
	{"truncate", func(e *opEnv) error { return e.f.Truncate(5) }},
	{"syncdir", func(e *opEnv) error { return e.fs.SyncDir(filepath.Join(e.dir, "p")) }},
	{"rename", func(e *opEnv) error {
		return e.fs.Rename(filepath.Join(e.dir, "p", "log"), filepath.Join(e.dir, "p", "q", "log"))
	}},
	{"overwrite", func(e *opEnv) (err error) {
		e.f, err = e.fs.OpenFile(filepath.Join(e.dir, "p", "q", "log"), os.O_WRONLY|os.O_TRUNC, 0)
		return err
	}},
	{"remove", func(e *opEnv) error { return e.fs.Remove(filepath.Join(e.dir, "p", "q", "log")) }},
	{"removeall", func(e *opEnv) error { return e.fs.RemoveAll(filepath.Join(e.dir, "p")) }},
}

func TestFailAfter(t *testing.T) {
	// A clean run: the state after each number of operations.
	e := &opEnv{fs: crashfs.New(vfs.Default), dir: t.TempDir()}
	after := []string{tree(t, e.dir)}
	for i, s := range opSteps {
		require.NoError(t, s.do(e), s.name)
		require.Equal(t, i+1, e.fs.Ops(), "%s is not one operation", s.name)
		require.NoError(t, e.fs.Check())
		after = append(after, tree(t, e.dir))
	}

	for k, s := range opSteps {
		t.Run(fmt.Sprintf("%d-%s", k, s.name), func(t *testing.T) {
			e := &opEnv{fs: crashfs.New(vfs.Default), dir: t.TempDir()}
			e.fs.FailAfter(k, nil)
			var err error
			i := 0
			for ; err == nil && i < len(opSteps); i++ {
				err = opSteps[i].do(e)
			}
			require.ErrorIs(t, err, crashfs.ErrInjected)
			require.Equal(t, k+1, i, "the wrong step failed")
			require.Equal(t, k+1, e.fs.Ops())
			require.Equal(t, after[k], tree(t, e.dir), "the failed operation did something")
			require.NoError(t, e.fs.Check())

			// The fault fires once: the same step now runs.
			require.NoError(t, s.do(e))
			require.Equal(t, after[k+1], tree(t, e.dir))
			require.NoError(t, e.fs.Check())
		})
	}
}

func TestFailAfterCustomError(t *testing.T) {
	fs := crashfs.New(vfs.Default)
	dir := t.TempDir()
	fs.FailAfter(0, syscall.EIO)
	err := fs.MkdirAll(filepath.Join(dir, "a"), 0o755)
	require.ErrorIs(t, err, syscall.EIO)
	require.False(t, errors.Is(err, crashfs.ErrInjected))
	var pe *os.PathError
	require.ErrorAs(t, err, &pe)
	require.NoDirExists(t, filepath.Join(dir, "a"))

	fs.FailAfter(1, nil)
	fs.FailAfter(-1, nil) // cancelled
	require.NoError(t, fs.MkdirAll(filepath.Join(dir, "a"), 0o755))
	require.NoError(t, fs.SyncDir(dir))
}

func TestShortWriteAfter(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789"), 100)
	for seed := range uint64(20) {
		dir := t.TempDir()
		p := filepath.Join(dir, "log")
		fs := crashfs.New(vfs.Default)
		f, err := fs.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o644)
		require.NoError(t, err)
		require.NoError(t, fs.SyncDir(dir))
		fs.ShortWriteAfter(fs.Ops(), rand.New(rand.NewPCG(seed, 4)))
		n, err := f.WriteAt(data, 0)
		require.ErrorIs(t, err, crashfs.ErrInjected)
		require.ErrorIs(t, err, syscall.ENOSPC)
		require.Less(t, n, len(data))
		got, err := os.ReadFile(p)
		require.NoError(t, err)
		require.Equal(t, data[:n], got)
		require.NoError(t, fs.Check())

		// The bytes written are unsynced like any others.
		require.NoError(t, fs.Crash(crashfs.CrashConfig{Mode: crashfs.DropAll}))
		got, err = os.ReadFile(p)
		require.NoError(t, err)
		require.Empty(t, got)
	}
}

func TestFillAfter(t *testing.T) {
	dir := t.TempDir()
	fs := crashfs.New(vfs.Default)
	p := filepath.Join(dir, "log")
	f, err := fs.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o644)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("0123456789"), 0)
	require.NoError(t, err)
	fs.FillAfter(fs.Ops())

	// What needs space fails, and does only what fits.
	n, err := f.WriteAt([]byte("abcdef"), 7)
	require.ErrorIs(t, err, syscall.ENOSPC)
	require.ErrorIs(t, err, crashfs.ErrInjected)
	require.Equal(t, 3, n, "the bytes inside the file are written")
	_, err = fs.OpenFile(filepath.Join(dir, "new"), os.O_RDWR|os.O_CREATE, 0o644)
	require.ErrorIs(t, err, syscall.ENOSPC)
	require.NoFileExists(t, filepath.Join(dir, "new"))
	require.ErrorIs(t, fs.MkdirAll(filepath.Join(dir, "d"), 0o755), syscall.ENOSPC)
	require.NoDirExists(t, filepath.Join(dir, "d"))

	// What does not, runs.
	_, err = f.WriteAt([]byte("XY"), 0)
	require.NoError(t, err)
	g, err := fs.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o644)
	require.NoError(t, err, "opening an existing file with O_CREATE")
	require.NoError(t, g.Close())
	require.NoError(t, f.Truncate(4))
	require.NoError(t, f.Sync())
	require.NoError(t, fs.Rename(p, p+".2"))
	require.NoError(t, fs.SyncDir(dir))
	got, err := os.ReadFile(p + ".2")
	require.NoError(t, err)
	require.Equal(t, "XY23", string(got))

	fs.Free()
	_, err = f.WriteAt([]byte("more"), 4)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	require.NoError(t, fs.Check())
}

// logWorkload appends records to a log, syncing every second one, and
// replaces a checkpoint; it stops at the first error. acked is the log
// content known durable, ckpt the checkpoint content known durable and
// next the one being written when the workload stopped.
func logWorkload(fs vfs.FS, dir string) (acked []byte, ckpt, next string, err error) {
	p := filepath.Join(dir, "p")
	if err := fs.MkdirAll(p, 0o755); err != nil {
		return nil, "", "", err
	}
	if err := fs.SyncDir(dir); err != nil {
		return nil, "", "", err
	}
	f, err := fs.OpenFile(filepath.Join(p, "log"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, "", "", err
	}
	defer f.Close()
	if err := fs.SyncDir(p); err != nil {
		return nil, "", "", err
	}
	var written []byte
	for i := range 6 {
		rec := fmt.Appendf(nil, "record-%d;", i)
		if _, err := f.WriteAt(rec, int64(len(written))); err != nil {
			return acked, ckpt, next, err
		}
		written = append(written, rec...)
		if i%2 == 1 {
			if err := f.Sync(); err != nil {
				return acked, ckpt, next, err
			}
			acked = append([]byte(nil), written...)
			next = fmt.Sprint(len(acked))
			if err := vfs.WriteFileAtomic(fs, filepath.Join(p, "ckpt"), []byte(next)); err != nil {
				return acked, ckpt, next, err
			}
			ckpt = next
		}
	}
	return acked, ckpt, next, nil
}

// TestCrashAtEveryOperation is pebble's TestDBWALRotationCrash pattern:
// crash at operation k for k = 0, 1, ... until the workload ends first.
func TestCrashAtEveryOperation(t *testing.T) {
	fs := crashfs.New(vfs.Default)
	_, _, _, err := logWorkload(fs, t.TempDir())
	require.NoError(t, err)
	total := fs.Ops()

	modes := []crashfs.Mode{crashfs.DropAll, crashfs.KeepPrefix, crashfs.Reorder, crashfs.KeepAll}
	for k := 0; ; k++ {
		dir := t.TempDir()
		fs := crashfs.New(vfs.Default)
		mode := modes[k%len(modes)]
		fs.CrashAt(k, crashfs.CrashConfig{Mode: mode, Rand: rand.New(rand.NewPCG(uint64(k), 5))})
		acked, ckpt, next, err := logWorkload(fs, dir)
		crashed, cerr := fs.Crashed()
		require.NoError(t, cerr)
		if !crashed {
			require.NoError(t, err)
			require.Equal(t, total, k, "the workload ended before its last operation")
			break
		}
		require.ErrorIs(t, err, crashfs.ErrCrashed, "k=%d", k)
		require.Equal(t, k+1, fs.Ops(), "operations ran after the crash")

		// What was acknowledged is there.
		log, rerr := os.ReadFile(filepath.Join(dir, "p", "log"))
		if len(acked) > 0 {
			require.NoError(t, rerr, "k=%d %v", k, mode)
			require.True(t, bytes.HasPrefix(log, acked), "k=%d %v: log %q lacks %q", k, mode, log, acked)
		}
		if ckpt != "" {
			got, err := os.ReadFile(filepath.Join(dir, "p", "ckpt"))
			require.NoError(t, err)
			require.Contains(t, []string{ckpt, next}, string(got), "k=%d %v", k, mode)
		}

		// The FS is dead.
		require.ErrorIs(t, fs.MkdirAll(filepath.Join(dir, "z"), 0o755), crashfs.ErrCrashed)
		require.Equal(t, k+1, fs.Ops())
		require.NoDirExists(t, filepath.Join(dir, "z"))
	}
}

func TestCrashKillsEverything(t *testing.T) {
	dir := t.TempDir()
	fs := crashfs.New(vfs.Default)
	w, err := fs.OpenFile(filepath.Join(dir, "w"), os.O_RDWR|os.O_CREATE, 0o644)
	require.NoError(t, err)
	r, err := fs.OpenFile(filepath.Join(dir, "w"), os.O_RDONLY, 0)
	require.NoError(t, err)
	lockPath := filepath.Join(dir, "LOCK")
	lock, err := fs.Lock(lockPath)
	require.NoError(t, err)
	_, err = vfs.Default.Lock(lockPath)
	require.ErrorIs(t, err, vfs.ErrLocked)

	require.NoError(t, fs.Crash(crashfs.CrashConfig{}))
	crashed, err := fs.Crashed()
	require.True(t, crashed)
	require.NoError(t, err)
	require.ErrorIs(t, fs.Crash(crashfs.CrashConfig{}), crashfs.ErrCrashed)

	// The lock went with the process.
	l2, err := vfs.Default.Lock(lockPath)
	require.NoError(t, err)
	require.NoError(t, l2.Close())

	buf := make([]byte, 1)
	for name, f := range map[string]vfs.File{"writer": w, "reader": r} {
		_, err := f.WriteAt(buf, 0)
		require.ErrorIs(t, err, crashfs.ErrCrashed, name)
		_, err = f.ReadAt(buf, 0)
		require.ErrorIs(t, err, crashfs.ErrCrashed, name)
		_, err = f.Stat()
		require.ErrorIs(t, err, crashfs.ErrCrashed, name)
		require.ErrorIs(t, f.Truncate(0), crashfs.ErrCrashed, name)
		require.ErrorIs(t, f.Sync(), crashfs.ErrCrashed, name)
		require.ErrorIs(t, f.Close(), crashfs.ErrCrashed, name)
		require.Equal(t, filepath.Join(dir, "w"), f.Name())
	}
	require.ErrorIs(t, lock.Close(), crashfs.ErrCrashed)

	_, err = fs.OpenFile(filepath.Join(dir, "w"), os.O_RDONLY, 0)
	require.ErrorIs(t, err, crashfs.ErrCrashed)
	_, err = fs.OpenFile(filepath.Join(dir, "x"), os.O_RDWR|os.O_CREATE, 0o644)
	require.ErrorIs(t, err, crashfs.ErrCrashed)
	_, err = fs.Stat(dir)
	require.ErrorIs(t, err, crashfs.ErrCrashed)
	_, err = fs.ReadDir(dir)
	require.ErrorIs(t, err, crashfs.ErrCrashed)
	_, err = fs.Lock(lockPath)
	require.ErrorIs(t, err, crashfs.ErrCrashed)
	require.ErrorIs(t, fs.Rename(lockPath, lockPath+"2"), crashfs.ErrCrashed)
	require.ErrorIs(t, fs.Remove(lockPath), crashfs.ErrCrashed)
	require.ErrorIs(t, fs.RemoveAll(dir), crashfs.ErrCrashed)
	require.ErrorIs(t, fs.SyncDir(dir), crashfs.ErrCrashed)
	require.ErrorIs(t, fs.Check(), crashfs.ErrCrashed)
	require.Equal(t, 1, fs.Ops())
	require.Equal(t, "LOCK=", tree(t, dir), "w was never made durable")
}

func TestMangle(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "p")
	makeTree(t, dir, "p/ p/old.log=durable other/ other/x.index=untouched")
	fs := crashfs.New(vfs.Default)
	writeSynced(t, fs, filepath.Join(p, "00.log"), "data")
	require.NoError(t, fs.SyncDir(p))
	// The index package writes its files directly.
	require.NoError(t, os.WriteFile(filepath.Join(p, "00.index"), []byte("index"), 0o644))

	var got []string
	require.NoError(t, fs.Crash(crashfs.CrashConfig{Mangle: func(path string) {
		got = append(got, path)
		_, err := fs.Stat(path) // runs unlocked: no deadlock
		require.ErrorIs(t, err, crashfs.ErrCrashed)
		if filepath.Ext(path) == ".index" {
			require.NoError(t, os.Truncate(path, 2))
		}
	}}))
	want := []string{filepath.Join(p, "00.index"), filepath.Join(p, "00.log"), filepath.Join(p, "old.log")}
	require.Equal(t, want, got)
	require.Equal(t, "other/ other/x.index=untouched p/ p/00.index=in p/00.log=data p/old.log=durable", tree(t, dir))
}

// TestCheckCatchesOutsideChanges: Check fails when something bypasses the
// FS for a file it tracks.
func TestCheckCatchesOutsideChanges(t *testing.T) {
	dir := t.TempDir()
	fs := crashfs.New(vfs.Default)
	f, err := fs.OpenFile(filepath.Join(dir, "log"), os.O_RDWR|os.O_CREATE, 0o644)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("abc"), 0)
	require.NoError(t, err)
	require.NoError(t, fs.Check())
	require.NoError(t, os.Truncate(filepath.Join(dir, "log"), 1))
	require.ErrorContains(t, fs.Check(), "size 1 on disk, 3 in the model")
	require.NoError(t, os.Remove(filepath.Join(dir, "log")))
	require.ErrorContains(t, fs.Check(), "in the model but")
}

// TestConcurrentWriters runs writers, a reader and Check on one FS and
// crashes it under them; run it with -race.
func TestConcurrentWriters(t *testing.T) {
	const writers, recLen = 4, 64
	dir := t.TempDir()
	fs := crashfs.New(vfs.Default)
	var synced [writers]atomic.Int64
	ready := make(chan struct{}, writers)
	var wg sync.WaitGroup
	errs := make(chan error, writers+1)
	record := func(w, i int) []byte {
		return bytes.Repeat([]byte{byte('a' + w), byte('0' + i%10)}, recLen/2)
	}
	for w := range writers {
		wg.Go(func() {
			name := filepath.Join(dir, fmt.Sprintf("log-%d", w))
			f, err := fs.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
			if err == nil {
				err = fs.SyncDir(dir)
			}
			for i := 0; err == nil && i < 100000; i++ {
				if _, err = f.WriteAt(record(w, i), int64(i*recLen)); err != nil {
					break
				}
				if i%3 == 2 {
					if err = f.Sync(); err == nil {
						synced[w].Store(int64((i + 1) * recLen))
					}
				}
				if i == 30 {
					ready <- struct{}{}
				}
			}
			if !errors.Is(err, crashfs.ErrCrashed) {
				errs <- fmt.Errorf("writer %d: %v", w, err)
			}
		})
	}
	wg.Go(func() {
		buf := make([]byte, recLen)
		for {
			err := fs.Check()
			if err == nil {
				_, err = fs.ReadDir(dir)
			}
			if err == nil {
				var f vfs.File
				if f, err = fs.OpenFile(filepath.Join(dir, "log-0"), os.O_RDONLY, 0); err == nil {
					_, err = f.ReadAt(buf, 0)
					f.Close()
				}
			}
			if errors.Is(err, crashfs.ErrCrashed) {
				return
			}
			if err != nil && !errors.Is(err, os.ErrNotExist) && !errors.Is(err, io.EOF) {
				errs <- fmt.Errorf("reader: %v", err)
				return
			}
		}
	})
	for range writers {
		<-ready
	}
	require.NoError(t, fs.Crash(crashfs.CrashConfig{Mode: crashfs.KeepPrefix, Rand: rand.New(rand.NewPCG(6, 6))}))
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	for w := range writers {
		b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("log-%d", w)))
		require.NoError(t, err)
		n := int(synced[w].Load())
		require.GreaterOrEqual(t, len(b), n, "writer %d lost synced data", w)
		for i := 0; i < n/recLen; i++ {
			require.Equal(t, record(w, i), b[i*recLen:(i+1)*recLen], "writer %d record %d", w, i)
		}
	}
}
