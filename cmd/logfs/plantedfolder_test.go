package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// plantFolder puts, at name in the data directory, a folder holding a
// file of someone's, and returns a check that it still exists, whole, at
// name or moved aside to name.planted.
func plantFolder(t *testing.T, data, name string) (kept func(step string)) {
	t.Helper()
	at := filepath.Join(data, name)
	require.NoError(t, os.RemoveAll(at))
	require.NoError(t, os.Mkdir(at, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(at, "theirs"), []byte(name), 0o600))
	return func(step string) {
		t.Helper()
		for _, p := range []string{at, at + ".planted"} {
			if b, err := os.ReadFile(filepath.Join(p, "theirs")); err == nil {
				require.Equal(t, name, string(b), "after %s", step)
				return
			}
		}
		t.Fatalf("after %s: the folder planted at %s is gone", step, name)
	}
}

// TestPlantedFoldersMovedAside plants folders, each holding a file, where
// logfs keeps its files: a segment's three indexes, both checkpoints and
// a topic's settings, in a data directory not shut down cleanly. Before,
// one folder in place of an index made every command fail on the whole
// data directory, check --repair included ("read …index: is a
// directory"). Now reads take each file for missing, check names the
// folders, and a write moves the folder aside (NAME.planted) with what it
// holds: every command works, every record reads back, nothing of the
// folders is lost.
func TestPlantedFoldersMovedAside(t *testing.T) {
	dir := setupConsume(t)
	data := filepath.Join(dir, "logfs-data")
	want := ok(t, dir, "", "consume", "--offset", "earliest", "--format", "jsonl", "orders", "0")
	require.NoError(t, os.Remove(filepath.Join(data, ".kafka_cleanshutdown")))

	var kept []func(string)
	for _, name := range []string{
		"orders-0/00000000000000000000.index",
		"orders-0/00000000000000000000.timeindex",
		"orders-0/00000000000000000000.viewindex",
		"recovery-point-offset-checkpoint",
		"log-start-offset-checkpoint",
		"orders.props",
	} {
		kept = append(kept, plantFolder(t, data, name))
	}
	allKept := func(step string) {
		t.Helper()
		for _, k := range kept {
			k(step)
		}
	}

	r := logfs(t, dir, "", "check")
	require.Equal(t, 1, r.code, "check: %s\n%s", r.stdout, r.stderr)
	require.Contains(t, r.stdout, "open logfs-data/orders-0/00000000000000000000.index: a folder, where logfs keeps a file")
	require.NotContains(t, r.stderr, "open data directory", "check reads the data directory")
	allKept("check")
	require.Equal(t, want, ok(t, dir, "", "consume", "--offset", "earliest", "--format", "jsonl", "orders", "0"),
		"consume with folders in place of the indexes")
	allKept("consume")

	out := ok(t, dir, "", "check", "--repair")
	require.Contains(t, out, "moved aside")
	allKept("check --repair")
	require.Contains(t, ok(t, dir, "", "check"), ": OK")
	for _, name := range []string{"00000000000000000000.index", "00000000000000000000.timeindex"} {
		st, err := os.Lstat(filepath.Join(data, "orders-0", name))
		require.NoError(t, err)
		require.True(t, st.Mode().IsRegular(), "%s is rebuilt: %v", name, st.Mode())
	}

	ok(t, dir, "more\n", "produce", "orders")
	got := ok(t, dir, "", "consume", "--offset", "earliest", "--format", "jsonl", "orders", "0")
	require.True(t, strings.HasPrefix(got, want), "every record reads back after the repair")
	require.Contains(t, got[len(want):], `"value":"more"`)
	allKept("produce")
}

// TestPlantedFolderIsNoCleanShutdown plants a folder at the clean-shutdown
// marker's name of a data directory that was not shut down cleanly and
// whose log ends in a torn write: the folder vouches for nothing, so the
// open recovers the log (cutting the torn bytes, keeping them aside)
// rather than trusting it, and a writable open no longer fails on the
// marker it cannot remove. The next clean shutdown moves the folder
// aside and writes the marker.
func TestPlantedFolderIsNoCleanShutdown(t *testing.T) {
	dir := setupConsume(t)
	data := filepath.Join(dir, "logfs-data")
	want := ok(t, dir, "", "consume", "--offset", "earliest", "orders", "0")
	require.NoError(t, os.Remove(filepath.Join(data, ".kafka_cleanshutdown")))
	kept := plantFolder(t, data, ".kafka_cleanshutdown")

	// A torn write at the end of the last segment: a batch header's
	// worth of zeros past the last batch.
	logs, err := filepath.Glob(filepath.Join(data, "orders-0", "*.log"))
	require.NoError(t, err)
	last := logs[len(logs)-1]
	f, err := os.OpenFile(last, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.Write(make([]byte, 61))
	require.NoError(t, err)
	require.NoError(t, f.Close())

	r := logfs(t, dir, "", "check")
	require.Equal(t, 1, r.code, "check must see the torn write: %s\n%s", r.stdout, r.stderr)
	require.Contains(t, r.stdout, "would cut")
	kept("check")

	require.Equal(t, want, ok(t, dir, "", "consume", "--offset", "earliest", "orders", "0"))
	ok(t, dir, "more\n", "produce", "orders")
	require.Equal(t, want+"more\n", ok(t, dir, "", "consume", "--offset", "earliest", "orders", "0"))
	kept("produce")
	var st unix.Stat_t
	require.NoError(t, unix.Lstat(filepath.Join(data, ".kafka_cleanshutdown"), &st))
	require.Equal(t, uint32(unix.S_IFREG), st.Mode&unix.S_IFMT, "a clean shutdown writes the marker in the folder's place")
	require.Contains(t, ok(t, dir, "", "check"), ": OK")
}
