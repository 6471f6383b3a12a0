package integration

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/fs"
	"github.com/logfs/logfs/internal/tmpfs"
	"github.com/logfs/logfs/storage"
)

// fullDiskTopic rolls and indexes often, so that a small disk fills at
// every kind of write: the log, both indexes, new segments, view indexes.
var fullDiskTopic = storage.Overrides{"segment.bytes": 65536, "index.interval.bytes": 512,
	"segment.index.bytes": 4096, "flush.ms": -1}

// fullDiskLines is one write(2) of n lines of random sizes, each naming
// its writer, write and line.
func fullDiskLines(rng *rand.Rand, who string, w, n int) []string {
	lines := make([]string, n)
	for i := range lines {
		lines[i] = fmt.Sprintf("%s-%d-%d-%s", who, w, i, strings.Repeat("v", rng.IntN(3000)))
	}
	return lines
}

// TestFullDiskThroughMount fills a real tmpfs from outside at many levels
// while a Go writer appends through the mount, each write(2) one request:
// the write that finds no room fails with ENOSPC and leaves nothing, the
// same write sent again on the full disk fails again, reads go on, and
// once room is freed the same write goes in once. A Python writer and
// shell redirection see the error too. At the end the log holds exactly
// the acknowledged lines, in order, and so does the next start after a
// close on a full disk.
func TestFullDiskThroughMount(t *testing.T) {
	root := tmpfs.Mount(t, 6<<20)
	dir := filepath.Join(root, "data")
	l, err := storage.Open(dir, storage.Options{Logger: logger(t), RetentionCheckInterval: -1})
	require.NoError(t, err)
	closed := false
	t.Cleanup(func() {
		if !closed {
			l.Close()
		}
	})
	_, err = l.CreateTopic("t", 1, fullDiskTopic)
	require.NoError(t, err)
	srv, mnt := mountServer(t, l, fs.Options{})
	pdir := part(mnt, "t", 0)
	app := filepath.Join(pdir, "append")
	var model []string // every acknowledged line, in offset order
	requireLog := func(what string) {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(pdir, "offset", "0"))
		require.NoError(t, err, "%s: read on a full disk", what)
		got := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
		if len(b) == 0 {
			got = nil
		}
		require.Equal(t, len(model), len(got), "%s: records", what)
		for i := range got {
			if got[i] != model[i] {
				t.Fatalf("%s: record %d is %.40q, want %.40q", what, i, got[i], model[i])
			}
		}
	}
	f, err := os.OpenFile(app, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	defer f.Close()
	rng := rand.New(rand.NewPCG(5, 5))
	w := 0
	for level := 0; level < 8; level++ {
		what := fmt.Sprintf("level %d", level)
		room := int64(512) << (level + level/2) // 512 B to about 1 MiB
		tmpfs.Reserve(t, root, "filler", max(tmpfs.Free(t, root)-room, 0))
		for ; ; w++ {
			lines := fullDiskLines(rng, "go", w, 1+rng.IntN(40))
			data := []byte(strings.Join(lines, "\n") + "\n")
			n, err := f.Write(data)
			if err == nil {
				model = append(model, lines...)
				continue
			}
			require.ErrorIs(t, err, syscall.ENOSPC, "%s: write %d", what, w)
			require.Zero(t, n, "%s: one request is all or nothing", what)
			requireLog(what + ": after ENOSPC")
			_, err = f.Write(data)
			require.ErrorIs(t, err, syscall.ENOSPC, "%s: the same write again on the full disk", what)
			requireLog(what + ": after the retry on the full disk")
			require.NoError(t, os.Remove(filepath.Join(root, "filler")))
			_, err = f.Write(data)
			require.NoError(t, err, "%s: the same write once there is room", what)
			model = append(model, lines...)
			requireLog(what + ": after room came back")
			w++
			break
		}
	}

	// Other writers on a full disk: Python's unbuffered writes and the
	// shell's redirection get ENOSPC, and leave nothing partial.
	tmpfs.Fill(t, root, "filler")
	if py, err := exec.LookPath("python3"); err == nil {
		script := `
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND)
ok = 0
try:
    for i in range(100000):
        os.write(fd, ("py-%d-" % i + "w" * 2000 + "\n").encode())
        ok += 1
except OSError as e:
    print(ok, e.errno)
`
		out, err := exec.Command(py, "-c", script, app).CombinedOutput()
		require.NoError(t, err, "%s", out)
		fields := strings.Fields(string(out))
		require.Len(t, fields, 2, "%s", out)
		require.Equal(t, strconv.Itoa(int(syscall.ENOSPC)), fields[1], "python sees ENOSPC")
		k, _ := strconv.Atoi(fields[0])
		for i := 0; i < k; i++ {
			model = append(model, fmt.Sprintf("py-%d-%s", i, strings.Repeat("w", 2000)))
		}
		requireLog("after python")
	}
	errOut := shFails(t, "for i in $(seq 1 50); do printf 'sh-%%s-%%02000d\\n' $i 0; done >> %s", q(app))
	require.Contains(t, errOut, "No space left on device")
	// The shell's printf may have written lines before the disk filled.
	b, err := os.ReadFile(filepath.Join(pdir, "offset", "0"))
	require.NoError(t, err)
	shLines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")[len(model):]
	for i, line := range shLines {
		require.Equal(t, fmt.Sprintf("sh-%d-%s", i+1, strings.Repeat("0", 2000)), line, "shell line %d whole", i)
		model = append(model, line)
	}
	t.Logf("the shell wrote %d lines before ENOSPC", len(shLines))
	requireLog("after the shell")

	// Unmount and close on the full disk: the close may fail, never crash,
	// and the next start has every acknowledged line.
	require.NoError(t, f.Close())
	unmount(t, srv)
	if err := l.Close(); err != nil {
		require.True(t, errors.Is(err, syscall.ENOSPC), "close on a full disk: %v", err)
	}
	closed = true
	require.NoError(t, os.Remove(filepath.Join(root, "filler")))
	l2 := openLog(t, dir, storage.Options{})
	p, err := l2.Partition("t", 0)
	require.NoError(t, err)
	got := partitionValues(t, p)
	require.Equal(t, len(model), len(got))
	for i := range got {
		if got[i] != model[i] {
			t.Fatalf("after reopen: record %d is %.40q, want %.40q", i, got[i], model[i])
		}
	}
	t.Logf("%d records, %d segments", len(got), len(p.SegmentBases()))
}
