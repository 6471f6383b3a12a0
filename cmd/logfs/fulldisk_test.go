package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/internal/tmpfs"
	"github.com/logfs/logfs/layout"
)

// TestCommandsOnFullDisk runs check, check --repair and produce on a real
// tmpfs with no room left, after a crash that left recovery work to do (no
// clean-shutdown marker, no index files): each reports, in one line or a
// check report, and none crashes; once there is room, check --repair
// recovers every record.
func TestCommandsOnFullDisk(t *testing.T) {
	root := tmpfs.Mount(t, 4<<20)
	data := filepath.Join(root, "data")
	dir := t.TempDir()
	ok(t, dir, "", "topic", "create", "--data", data, "--config", "segment.bytes=20000",
		"--config", "index.interval.bytes=256", "t")
	var in strings.Builder
	for i := 0; i < 3000; i++ {
		fmt.Fprintf(&in, "r%d-%s\n", i, strings.Repeat("w", i%200))
	}
	ok(t, dir, in.String(), "produce", "--data", data, "t")
	require.NoError(t, os.Remove(filepath.Join(data, layout.CleanShutdownFile)))
	ents, err := os.ReadDir(filepath.Join(data, "t-0"))
	require.NoError(t, err)
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), layout.IndexSuffix) || strings.HasSuffix(e.Name(), layout.TimeIndexSuffix) {
			require.NoError(t, os.Remove(filepath.Join(data, "t-0", e.Name())))
		}
	}
	tmpfs.Fill(t, root, "filler")

	for _, args := range [][]string{
		{"check", "--data", data},
		{"check", "--repair", "--data", data},
		{"produce", "--data", data, "t"},
	} {
		r := logfs(t, dir, "more\n", args...)
		t.Logf("logfs %s on a full disk: exit %d\n%s%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
		require.NotContains(t, r.stderr, "goroutine", "no crash")
		require.NotContains(t, r.stderr, "SIGBUS")
		if r.code != 0 {
			require.Equal(t, exitFailure, r.code)
			require.Contains(t, r.stdout+r.stderr, "no space left on device")
		}
	}

	require.NoError(t, os.Remove(filepath.Join(root, "filler")))
	require.Contains(t, ok(t, dir, "", "check", "--repair", "--data", data), ": OK")
	out := ok(t, dir, "", "consume", "--data", data, "--offset", "earliest", "t", "0")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	require.GreaterOrEqual(t, len(lines), 3000)
	for i := 0; i < 3000; i++ {
		require.Equal(t, fmt.Sprintf("r%d-%s", i, strings.Repeat("w", i%200)), lines[i])
	}
	require.LessOrEqual(t, len(lines), 3001, "at most the one line produce may have appended")
}
