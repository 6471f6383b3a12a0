package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// rssAnon reads a process's anonymous resident memory (RssAnon) in bytes.
func rssAnon(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "RssAnon:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			require.NoError(t, err)
			return kb << 10
		}
	}
	t.Fatal("no RssAnon in /proc/PID/status")
	return 0
}

// TestStatFloodMemory stats different offset/N files of a mount (any
// user could, with --allow-other), 30,000 of them or LOGFS_STAT_FLOOD, and
// reads the mount's anonymous memory before and after: the nodes the
// kernel is handed are bounded, so it grows by less than 16 MiB however
// many (100,000 grew it by 111 MiB before, 30,000 by 34 MiB).
func TestStatFloodMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("tens of thousands of lookups")
	}
	n := 30_000
	if v := os.Getenv("LOGFS_STAT_FLOOD"); v != "" {
		var err error
		n, err = strconv.Atoi(v)
		require.NoError(t, err)
	}
	dir := t.TempDir()
	ok(t, dir, "", "topic", "create", "--config", "segment.bytes=65536", "t")
	ok(t, dir, strings.Repeat("r\n", n), "produce", "t")
	mp := filepath.Join(dir, "mnt")
	m := startMount(t, dir, mp)
	part := filepath.Join(mp, "t", "0", "offset")
	for i := range 1000 { // warm up: what any use of the mount allocates
		_, err := os.Stat(filepath.Join(part, strconv.Itoa(i)))
		require.NoError(t, err)
	}
	before := rssAnon(t, m.cmd.Process.Pid)
	for i := range n {
		_, err := os.Stat(filepath.Join(part, strconv.Itoa(i)))
		require.NoError(t, err)
	}
	after := rssAnon(t, m.cmd.Process.Pid)
	t.Logf("RssAnon %d MiB before, %d MiB after %d stats: +%d MiB", before>>20, after>>20, n, (after-before)>>20)
	require.Less(t, after-before, int64(16<<20))
}

// TestUnfinishedLineMemory opens append.jsonl 16 times (50 in the issue:
// LOGFS_LINE_HANDLES=50)
// and writes into each an unfinished line of 6 MiB, as any user could
// with --allow-other, and reads the mount's anonymous memory before and
// after: the unfinished lines of all handles together are bounded
// (fs.PartialBudget, 64 MiB), so it grows by much less than the 300 MiB
// asked for (370 MB before the bound); writes past it fail with ENOBUFS.
func TestUnfinishedLineMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("hundreds of MiB written")
	}
	handles := 16
	if v := os.Getenv("LOGFS_LINE_HANDLES"); v != "" {
		var err error
		handles, err = strconv.Atoi(v)
		require.NoError(t, err)
	}
	dir := t.TempDir()
	ok(t, dir, "", "topic", "create", "t")
	mp := filepath.Join(dir, "mnt")
	m := startMount(t, dir, mp)
	path := filepath.Join(mp, "t", "0", "append.jsonl")
	w, err := os.OpenFile(path, os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = w.WriteString(`{"value":"warm up"}` + "\n")
	require.NoError(t, err)
	require.NoError(t, w.Close())
	before := rssAnon(t, m.cmd.Process.Pid)
	chunk := []byte(strings.Repeat("x", 128<<10))
	refused := 0
	var files []*os.File
	for range handles {
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		require.NoError(t, err)
		files = append(files, f)
		_, err = f.WriteString(`{"value":"`)
		for written := 0; err == nil && written < 6<<20; written += len(chunk) {
			_, err = f.Write(chunk)
		}
		if err != nil {
			require.ErrorIs(t, err, syscall.ENOBUFS)
			refused++
		}
	}
	after := rssAnon(t, m.cmd.Process.Pid)
	t.Logf("RssAnon %d MiB before, %d MiB after %d handles with an unfinished 6 MiB line (%d refused): +%d MiB",
		before>>20, after>>20, handles, refused, (after-before)>>20)
	for _, f := range files {
		require.NoError(t, f.Close())
	}
	if handles >= 12 { // 72 MiB asked
		require.Positive(t, refused, "past the budget writes are refused")
	}
	require.Less(t, after-before, int64(200<<20))
}
