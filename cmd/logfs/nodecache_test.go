package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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
